"""DynamicResources: pods with ResourceClaims go where their devices are (upstream's
``dynamicresources/dynamicresources.go``, with v1.34's default features).

- PreEnqueue: every claim of the pod must exist (a template's claim is made by kube-controller-manager's
  resource-claim controller), not be deleting, and be the pod's own when made from a template.
- PreFilter: pods without claims are skipped. A claim another pod is allocating right now makes the pod
  wait; an unallocated claim's requests need their device classes. The allocator for the cycle is set up
  with the devices allocated in the cluster and in flight, and with what the manager keeps across cycles
  (each node's devices and selector verdicts, what a request found on a node while its pools' allocations
  stay the same: ``node_devices``, ``greedy``).
- Filter: an allocated claim must be available on the node (its allocation's node selector); the others
  must be allocatable together from the pools the node sees. A selector that fails is an error naming the
  class or claim; the search of one node stops after ``filterTimeout``, an error (the attempt is retried
  after backoff, as v1.37: a timeout may pass) naming the node.
- PostFilter: an allocated claim that was not available on some node and that no other pod uses is
  deallocated (``deallocation of ResourceClaim completed``); else, and for a pod without claims, the pod
  stays unschedulable with no reason of this plugin's (v1.37: the FailedScheduling message gains no text).
- Reserve records the chosen node's allocations as in flight; Unreserve drops them (and a reservation
  PreBind made). PreBind writes them and the pod's reservation (``binding``).

Statuses that reject are UnschedulableAndUnresolvable, as upstream's ``statusUnschedulable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import ClusterEventWithHint
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeStatusMap,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreBindPreFlightResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import DEVICE_CLASSES, RESOURCE_SLICES, ResourceClaim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import NodeSelector
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.dynamic_resources import binding, requeue
from kopf_scheduler.plugins.dynamic_resources.allocator import (
    AllocationError,
    Allocator,
    FilterTimeout,
    Found,
)
from kopf_scheduler.plugins.dynamic_resources.args import Args
from kopf_scheduler.plugins.dynamic_resources.claims import ClaimError, has_claims, pod_claims
from kopf_scheduler.plugins.dynamic_resources.manager import manager_for

NAME = names.DYNAMIC_RESOURCES
DEALLOCATED = "deallocation of ResourceClaim completed"
NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
TIMED_OUT = "timed out trying to allocate devices"
#: the text of upstream's CycleState lookup error when a plugin's state was never written
STATE_NOT_FOUND = "not found"
#: what Filter says of most nodes (statuses are immutable: one serves them all)
_CANNOT_ALLOCATE = unresolvable(CANNOT_ALLOCATE)


@dataclass(slots=True)
class _State:
    #: the pod's claims in ``spec.resourceClaims`` order; empty: nothing to do for the pod
    claims: list[ResourceClaim] = field(default_factory=list)
    #: per claim: the allocation Reserve took for it (claims the scheduler allocates)
    allocations: list[dict[str, Any] | None] = field(default_factory=list)
    allocator: Allocator | None = None
    #: the claims the allocator is asked for (those unallocated at PreFilter)
    pending: list[ResourceClaim] = field(default_factory=list)
    #: (index, the node selector of its allocation) of each allocated claim whose allocation has one
    selectors: list[tuple[int, NodeSelector]] = field(default_factory=list)
    #: node -> the devices Filter found there for the pending claims
    node_allocations: dict[str, Found] = field(default_factory=dict)
    #: indexes of allocated claims that were not available on some node
    unavailable: set[int] = field(default_factory=set)

    def clone(self) -> _State:
        return self  # shared, as upstream's: filters of simulations record into the same state

    def to_allocate(self) -> list[tuple[int, ResourceClaim]]:
        return [(i, c) for i, c in enumerate(self.claims) if c.allocation is None]


_KEY: StateKey[_State] = StateKey(NAME)
#: the state of every pod without claims (never changed: no later point writes to it)
_NO_CLAIMS = _State()
_PARALLEL = PreBindPreFlightResult(allow_parallel=True)


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.manager = manager_for(handle.objects)

    # -- queue -------------------------------------------------------------------------------------------
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not has_claims(pod):
            return None
        try:
            pod_claims(pod, self.manager)
        except ClaimError as e:
            return unresolvable(str(e))
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return requeue.events(self.manager)

    # -- pre-filter and filter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_KEY, _NO_CLAIMS)  # what later points see when this one ends early
        if not has_claims(pod):
            return None, SKIP
        try:
            claims = pod_claims(pod, self.manager)
        except ClaimError as e:
            return None, unresolvable(str(e))
        if not claims:
            return None, SKIP
        data = _State()
        state.write(_KEY, data)
        data.selectors = [(i, c.node_selector) for i, c in enumerate(claims) if c.node_selector is not None]
        data.allocations = [None] * len(claims)
        for claim in claims:
            if claim.allocation is not None:
                continue
            if self.manager.has_pending_allocation(claim.uid):
                return None, unresolvable(f"resource claim {claim.key} is in the process of being allocated")
            for request in claim.requests:
                if request.exactly is not None:
                    status = self._class_status(request.exactly.device_class_name, request.name)
                elif request.first_available:
                    status = None
                    for sub in request.first_available:
                        status = status or self._class_status(
                            sub.device_class_name, f"{request.name}/{sub.name}"
                        )
                else:
                    status = unresolvable(
                        f"resource claim {claim.key}, request {request.name}: unknown request type"
                    )
                if status is not None:
                    return None, status
        if any(claim.allocation is None for claim in claims):
            objects = self.handle.objects
            data.allocator = Allocator(
                lambda name: objects.of(DEVICE_CLASSES).get("", name),
                objects.of(RESOURCE_SLICES).list(),
                self.manager.allocated_devices(),
                self.manager.matcher,
                self.args.filter_timeout_seconds,
                self.manager.devices,
                self.manager.pool_versions(),
            )
            data.pending = [claim for claim in claims if claim.allocation is None]
        data.claims = claims
        return None, None

    def _class_status(self, class_name: str, request: str) -> Status | None:
        if not class_name:
            return error(f"request {request}: unsupported request type")
        if self.handle.objects.of(DEVICE_CLASSES).get("", class_name) is None:
            return unresolvable(f"request {request}: device class {class_name} does not exist")
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.read(_KEY)
        if not data.claims:
            return None
        found = None
        if data.allocator is not None:
            try:
                found = data.allocator.find(node.name, node.labels, data.pending)
            except FilterTimeout:  # the runtime's error status: 'running "DynamicResources" filter ...'
                raise FilterTimeout(f"node {node.name}: {TIMED_OUT}") from None
            except (
                AllocationError
            ) as e:  # the runtime's error status: 'running "DynamicResources" filter ...'
                raise AllocationError(str(e)) from None
            if found is None or len(found.results) != len(data.pending):
                return _CANNOT_ALLOCATE
        if data.selectors:
            unavailable = [i for i, s in data.selectors if not s.matches(node.labels, node.name)]
            if unavailable:
                data.unavailable.update(unavailable)
                return unresolvable(NOT_AVAILABLE)
        if found is not None:
            data.node_allocations[node.name] = found
        return None

    # -- post-filter -------------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        data = state.get(_KEY)
        if data is None:
            return None, error(STATE_NOT_FOUND)
        if not data.claims:
            return None, unschedulable()
        for index in sorted(data.unavailable):  # upstream picks one at random
            claim = data.claims[index]
            reserved = claim.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                binding.spawn(binding.deallocate_claim(self.handle.client, claim))
                return None, unschedulable(DEALLOCATED)
        return None, unschedulable()

    # -- reserve -----------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        to_allocate = data.to_allocate()
        if not to_allocate or data.allocator is None:
            return None
        found = data.node_allocations.get(node_name)
        allocations = None if found is None else found.allocations()
        if not allocations:
            return error("claim allocation not found for node")
        if len(allocations) != len(to_allocate):
            have, want = len(allocations), len(to_allocate)
            return error(
                f"internal error, have {have} allocations, {want} claims to allocate, want {want} claims"
            )
        for (index, claim), allocation in zip(to_allocate, allocations, strict=True):
            data.allocations[index] = allocation
            self.manager.signal_pending_allocation(claim.uid, binding.with_allocation(claim, allocation))
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(_KEY)
        if data is None:
            return
        for claim in data.claims:
            if self.manager.remove_pending_allocation(claim.uid):
                self.manager.restore(claim.namespace, claim.name)
            if claim.allocation is not None and claim.reserved_for_pod(pod.uid):
                binding.spawn(binding.unreserve_claim(self.handle.client, claim, pod))

    # -- pre-bind ----------------------------------------------------------------------------------------
    def pre_bind_pre_flight(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[PreBindPreFlightResult | None, Status | None]:
        """Pre-bind has work for every pod with claims (even all reserved already); it may run together
        with the other pre-binds that allow it (upstream: ``AllowParallel``)."""
        return _PARALLEL, (SKIP if not state.read(_KEY).claims else None)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        for index, claim in enumerate(data.claims):
            if claim.reserved_for_pod(pod.uid):
                continue
            try:
                written = await binding.bind_claim(
                    self.handle.client, self.manager, claim, data.allocations[index], pod
                )
            except binding.ClaimWriteError as e:  # the runtime's 'running PreBind plugin ...' error
                raise binding.ClaimWriteError(str(e)) from None
            data.claims[index] = written
        return None


def new(args: Args, handle: Handle) -> DynamicResources:
    return DynamicResources(args, handle)
