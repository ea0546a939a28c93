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
- Device binding conditions (``DRADeviceBindingConditions`` with ``DRAResourceClaimDeviceStatus``,
  ``binding_conditions``): PreBind then waits, in the binding cycle's task, until the drivers report the
  conditions of the pod's devices true (an error when one fails or ``bindingTimeout`` passes: the pod is
  unreserved and retried after backoff), and Filter finds a claim whose binding failed or timed out not
  available on any node, so that PostFilter deallocates it.

Statuses that reject are UnschedulableAndUnresolvable, as upstream's ``statusUnschedulable``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import ClusterEventWithHint
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeStatusMap,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreBindPreFlightResult,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import DEVICE_CLASSES, ResourceClaim
from kopf_scheduler.framework.objects.extended_resources import device_class_resolver
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import StatusMap
from kopf_scheduler.framework.selectors import NodeSelector
from kopf_scheduler.framework.status import SKIP, Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._helpers import default_normalize_score
from kopf_scheduler.plugins.dynamic_resources import binding, extended, requeue
from kopf_scheduler.plugins.dynamic_resources import binding_conditions as bc
from kopf_scheduler.plugins.dynamic_resources.allocator import (
    AllocationError,
    Allocator,
    FailedOnNode,
    FilterTimeout,
    Found,
)
from kopf_scheduler.plugins.dynamic_resources.args import (
    DEFAULT_BINDING_TIMEOUT_SECONDS,
    DEFAULT_FILTER_TIMEOUT_SECONDS,
    Args,
)
from kopf_scheduler.plugins.dynamic_resources.claims import ClaimError, has_claims, pod_claims
from kopf_scheduler.plugins.dynamic_resources.manager import manager_for
from kopf_scheduler.plugins.dynamic_resources.prepare import Features
from kopf_scheduler.plugins.dynamic_resources.score import compute_score
from kopf_scheduler.plugins.dynamic_resources.sharing import NO_SHARES

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
    #: the claim of the pod's extended resources backed by DRA (``extended``); None: the pod has none
    extended: extended.Extended | None = None
    #: indexes of allocated claims whose device binding failed or timed out (available on no node)
    not_ready: list[int] = field(default_factory=list)

    def clone(self) -> _State:
        return self  # shared, as upstream's: filters of simulations record into the same state

    def to_allocate(self) -> list[tuple[int, ResourceClaim]]:
        return [(i, c) for i, c in enumerate(self.claims) if c.allocation is None]


_KEY: StateKey[_State] = StateKey(NAME)
#: the state of every pod without claims (never changed: no later point writes to it)
_NO_CLAIMS = _State()
_PARALLEL = PreBindPreFlightResult(allow_parallel=True)
#: the pod group step's answer, whatever it did (``PodGroupPostFilter``)
POD_GROUP_CLAIMS_DONE = "deallocation and deletion of ResourceClaims completed"


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    PodGroupPostFilterPlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
    SignPlugin,
    ScorePlugin,
    VectorScore,
):
    name = NAME
    has_normalize = True

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """Nothing, for a pod without resource claims; a pod with claims is not signed."""
        if pod.spec.get("resourceClaims"):
            return Status(Code.UNSCHEDULABLE, ("pods with dra resource claims are not signable",))
        return ()

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.manager = manager_for(handle.objects)
        #: which DeviceClass an extended resource stands for; None: ``DRAExtendedResource`` off
        self.classes = (
            device_class_resolver(handle.objects)
            if handle.feature_gates.enabled("DRAExtendedResource")
            else None
        )
        gates = handle.feature_gates
        #: DRAPartitionableDevices, DRAConsumableCapacity, DRAFractionalCapacityRange (``Features``)
        self.features = Features(
            gates.enabled("DRAPartitionableDevices"),
            gates.enabled("DRAConsumableCapacity"),
            gates.enabled("DRAFractionalCapacityRange"),
        )
        #: DRADeviceTaints: untolerated devices are skipped; DRADeviceTaintRules: rules taint devices too
        self.device_taints = gates.enabled("DRADeviceTaints")
        self.taint_rules = gates.enabled("DRADeviceTaintRules")
        #: ``firstAvailable`` requests are allowed and scored
        self.prioritized_list = gates.enabled("DRAPrioritizedList")
        #: both gates of device binding conditions are on (upstream's ``DeviceBindingAndStatus``)
        self.binding_conditions = gates.enabled("DRADeviceBindingConditions") and gates.enabled(
            "DRAResourceClaimDeviceStatus"
        )
        timeout = args.filter_timeout_seconds
        #: 0: no limit (``DRASchedulerFilterTimeout`` off, or ``filterTimeout: 0s``)
        self.filter_timeout = (
            (DEFAULT_FILTER_TIMEOUT_SECONDS if timeout is None else timeout)
            if gates.enabled("DRASchedulerFilterTimeout")
            else 0.0
        )
        self.binding_timeout = (
            DEFAULT_BINDING_TIMEOUT_SECONDS
            if args.binding_timeout_seconds is None
            else args.binding_timeout_seconds
        )
        #: the wall clock (seconds since the epoch): allocation timestamps are written and compared with it
        self.wall: Callable[[], float] = time.time

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
        ext = None if self.classes is None else extended.pre_filter(pod, self.classes, self.manager.list)
        if not has_claims(pod) and ext is None:
            return None, SKIP
        try:
            claims = pod_claims(pod, self.manager)
        except ClaimError as e:
            return None, unresolvable(str(e))
        if not claims and ext is None:
            return None, SKIP
        data = _State(extended=ext)
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
                    if not self.prioritized_list:
                        status = unresolvable(
                            f"resource claim {claim.key}, request {request.name}: has subrequests, but the "
                            "DRAPrioritizedList feature is disabled"
                        )
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
        if (
            ext is not None
            and ext.claim.allocation is None
            and self.manager.has_pending_allocation(ext.claim.uid)
        ):
            return None, unresolvable(f"resource claim {ext.claim.key} is in the process of being allocated")
        if any(claim.allocation is None for claim in claims) or (
            ext is not None and ext.claim.allocation is None
        ):
            objects = self.handle.objects
            allocated, shares = self.manager.allocated_devices(), self.manager.shares()
            if not self.features.consumable and shares.devices:  # a share takes the whole device then
                allocated, shares = allocated | shares.devices, NO_SHARES
            data.allocator = Allocator(
                lambda name: objects.of(DEVICE_CLASSES).get("", name),
                self.manager.resource_slices(self.taint_rules),
                allocated,
                self.manager.matcher,
                self.filter_timeout,
                self.manager.devices,
                self.manager.pool_versions(),
                device_taints=self.device_taints,
                binding_conditions=self.binding_conditions,
                features=self.features,
                shares=shares,
            )
            data.pending = [claim for claim in claims if claim.allocation is None]
        if self.binding_conditions:
            now = self.wall()
            for i, claim in enumerate(claims):
                if claim.allocation is not None and self._binding_stopped(claim, now):
                    data.not_ready.append(i)
        data.claims = claims
        return None, None

    def _binding_stopped(self, claim: ResourceClaim, now: float) -> bool:
        """The claim's device binding failed, or is not done and timed out."""
        try:
            ready = bc.claim_ready(claim)
        except bc.BindingFailed:
            return True
        return not ready and bc.claim_timed_out(claim, self.binding_timeout, now)

    def _class_status(self, class_name: str, request: str) -> Status | None:
        if not class_name:
            return error(f"request {request}: unsupported request type")
        if self.handle.objects.of(DEVICE_CLASSES).get("", class_name) is None:
            return unresolvable(f"request {request}: device class {class_name} does not exist")
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        data = state.read(_KEY)
        if not data.claims and data.extended is None:
            return None
        pending, variant = data.pending, None
        if data.extended is not None:
            verdict = extended.for_node(data.extended, pod, node)
            if isinstance(verdict, Status):
                return verdict
            variant = verdict
            if variant is None and not data.claims:
                return None  # the node has every extended resource itself
            if variant is not None:
                pending = data.extended.claims_for(variant[0], data.pending)
        found = None
        if data.allocator is not None:
            try:
                found = data.allocator.find(node.name, node.labels, pending)
            except FilterTimeout:  # the runtime's error status: 'running "DynamicResources" filter ...'
                raise FilterTimeout(f"node {node.name}: {TIMED_OUT}") from None
            except (
                AllocationError
            ) as e:  # the runtime's error status: 'running "DynamicResources" filter ...'
                raise AllocationError(str(e)) from None
            except FailedOnNode as e:  # this node only: ``invalid resource pools were encountered``
                return unresolvable(str(e))
            if found is None or len(found.results) != len(pending):
                return _CANNOT_ALLOCATE
        if data.selectors or data.not_ready:
            unavailable = [i for i, s in data.selectors if not s.matches(node.labels, node.name)]
            unavailable += data.not_ready
            if unavailable:
                data.unavailable.update(unavailable)
                return unresolvable(NOT_AVAILABLE)
        if found is not None:
            data.node_allocations[node.name] = found
            if variant is not None and data.extended is not None:
                data.extended.node_claims[node.name] = variant
        return None

    # -- post-filter -------------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        data = state.get(_KEY)
        if data is None:
            return None, error(STATE_NOT_FOUND)
        if not data.claims and data.extended is None:
            return None, unschedulable()
        for index in sorted(data.unavailable):  # upstream picks one at random
            claim = data.claims[index]
            reserved = claim.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.uid):
                binding.spawn(binding.deallocate_claim(self.handle.client, claim))
                return None, unschedulable(DEALLOCATED)
        if data.extended is not None and not data.extended.in_memory:  # left from an earlier attempt
            binding.spawn(extended.delete_logged(self.handle.client, data.extended.claim))
            return None, unschedulable(extended.DELETED)
        return None, unschedulable()

    async def pod_group_post_filter(
        self,
        group: WorkloadPodGroup,
        unscheduled: Sequence[PodInfo],
        states: Mapping[str, CycleState],
        schedule: PodGroupSchedulingFunc,
    ) -> tuple[PodGroupPostFilterResult | None, Status | None]:
        """The pod group cycle's step (``PodGroupPostFilter``, GenericWorkload): each pod's claims that
        could not be had are dealt with as ``post_filter`` does for a pod on its own; the group's own
        claims are not (DRAWorkloadResourceClaims is off). Never helps the group at once."""
        for pod in unscheduled:
            state = states.get(pod.uid)
            if state is None or state.get(_KEY) is None:
                continue  # its pre-filter did not run: nothing recorded for it
            _, status = self.post_filter(state, pod, StatusMap())
            if status is not None and status.code == Code.ERROR:
                return None, status
        return None, unschedulable(POD_GROUP_CLAIMS_DONE)

    # -- score (``score``) -------------------------------------------------------------------------------
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """With ``DRAPrioritizedList``: how early in their lists the node's picked subrequests come."""
        if not self.prioritized_list:
            return 0
        data = state.read(_KEY)
        found = data.node_allocations.get(node.name) if data.claims else None
        if found is None:
            return 0
        return compute_score(data.claims, found.results)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """``score`` over many nodes: zeros at once for the pods that have nothing to score (most)."""
        data = state.read(_KEY)
        if not self.prioritized_list or not data.node_allocations:
            return np.zeros(len(rows), dtype=np.int64)
        infos = self.handle.snapshot().node_infos
        return np.array([self.score(state, pod, infos[row]) for row in rows.tolist()], dtype=np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # -- reserve -----------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        to_allocate = data.to_allocate()
        variant = None if data.extended is None else data.extended.node_claims.get(node_name)
        if (not to_allocate and variant is None) or data.allocator is None:
            return None
        found = data.node_allocations.get(node_name)
        allocations = None if found is None else found.allocations()
        if not allocations:
            return error("claim allocation not found for node")
        if len(allocations) != len(to_allocate) + (variant is not None):
            have, want = len(allocations), len(to_allocate) + (variant is not None)
            return error(
                f"internal error, have {have} allocations, {want} claims to allocate, want {want} claims"
            )
        for (index, claim), allocation in zip(to_allocate, allocations, strict=False):
            data.allocations[index] = allocation
            self.manager.signal_pending_allocation(claim.uid, binding.with_allocation(claim, allocation))
        if variant is not None and data.extended is not None:
            extended.reserve(self.manager, data.extended, variant[0], allocations[-1])
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
        if data.extended is not None:
            extended.unreserve(self.handle.client, self.manager, data.extended)

    # -- pre-bind ----------------------------------------------------------------------------------------
    def pre_bind_pre_flight(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[PreBindPreFlightResult | None, Status | None]:
        """Pre-bind has work for every pod with claims (even all reserved already); it may run together
        with the other pre-binds that allow it (upstream: ``AllowParallel``)."""
        data = state.read(_KEY)
        return _PARALLEL, (SKIP if not data.claims and data.extended is None else None)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        data = state.read(_KEY)
        stamp = self.wall if self.binding_conditions else None
        for index, claim in enumerate(data.claims):
            if claim.reserved_for_pod(pod.uid):
                continue
            try:
                written = await binding.bind_claim(
                    self.handle.client, self.manager, claim, data.allocations[index], pod, stamp
                )
            except binding.ClaimWriteError as e:  # the runtime's 'running PreBind plugin ...' error
                raise binding.ClaimWriteError(str(e)) from None
            data.claims[index] = written
        if data.extended is not None:
            try:
                await extended.bind(self.handle.client, self.manager, data.extended, pod, node_name, stamp)
            except binding.ClaimWriteError as e:  # likewise; Unreserve deletes a claim it created
                raise binding.ClaimWriteError(str(e)) from None
            self.manager.remove_pending_allocation(data.extended.initial_uid)
        if self.binding_conditions and bc.has_binding_conditions(data.claims):
            record = getattr(self.handle.client, "record_event", None)
            if record is not None:
                message = f"waiting for binding conditions for device on node {node_name}"
                record(pod, "Normal", bc.PENDING_REASON, bc.PENDING_ACTION, message)
            clock = self.handle.clock
            started = clock.now()
            failure = await self._wait_for_binding(data)
            self._observe_binding(data, bc.SUCCESS if failure is None else failure[0], clock.now() - started)
            if failure is not None:
                return error(failure[1])  # the allocations stay in flight until Unreserve
        for index, claim in enumerate(data.claims):  # ``prebindSuccessCleanup``
            if data.allocations[index] is not None:
                self.manager.remove_pending_allocation(claim.uid)
        return None

    async def _wait_for_binding(self, data: _State) -> tuple[str, str] | None:
        """``wait.PollUntilContextTimeout`` of ``isPodReadyForBinding`` (at once, then every 5 s, for at
        most ``bindingTimeout``): None when the claims are ready, else (metrics status, error text)."""
        clock = self.handle.clock
        deadline = clock.now() + self.binding_timeout
        while True:
            try:
                if self._pod_ready_for_binding(data):
                    return None
            except bc.BindingFailed as e:
                text = str(e)
                return (bc.TIMEOUT if text.startswith(bc.ERR_TIMEOUT) else bc.FAILURE), text
            except binding.ClaimWriteError as e:
                return bc.ERROR, str(e)
            remaining = deadline - clock.now()
            if remaining > 0:
                await clock.sleep(min(bc.POLL_SECONDS, remaining))
            if clock.now() >= deadline:
                return bc.TIMEOUT, f"{bc.ERR_TIMEOUT}: {bc.DEADLINE_EXCEEDED}"

    def _pod_ready_for_binding(self, data: _State) -> bool:
        """``isPodReadyForBinding``: every claim as the scheduler sees it now is ready; raises
        ``BindingFailed`` for a failure condition or a claim that timed out, ``ClaimWriteError`` for a
        claim that is gone."""
        now = self.wall()
        for index, claim in enumerate(data.claims):
            latest = self.manager.get(claim.namespace, claim.name)
            if latest is None:
                raise binding.ClaimWriteError(f'could not find ResourceClaim "{claim.key}"')
            data.claims[index] = latest
            if not bc.claim_ready(latest):
                if bc.claim_timed_out(latest, self.binding_timeout, now):
                    raise bc.BindingFailed(f"{bc.ERR_TIMEOUT}: claim={latest.name}")
                return False
        return True

    def _observe_binding(self, data: _State, status: str, seconds: float) -> None:
        """Upstream's ``dra_bindingconditions_*`` observations, per device result and per device with
        binding conditions of the pod's allocated claims."""
        waits, allocations = self.manager.binding_wait_hooks, self.manager.binding_allocation_hooks
        if not waits and not allocations:
            return
        profile = self.handle.profile_name
        for claim in data.claims:
            if claim.allocation is None:
                continue
            for driver in bc.drivers(claim):
                for wait_hook in waits:
                    wait_hook(profile, driver, status, seconds)
            for summary in bc.summaries(claim):
                for allocation_hook in allocations:
                    allocation_hook(profile, summary.driver, status)


def new(args: Args, handle: Handle) -> DynamicResources:
    return DynamicResources(args, handle)
