"""NodeResourcesFit: the node must have room for the pod's requests and one more pod; nodes score by
the configured strategy (``noderesources/fit.go`` and ``resource_allocation.go``).

Filter: ``Too many pods`` when the pod count is at the limit; ``Insufficient <resource>`` for each
requested resource that does not fit in ``allocatable - requested``. The status is unresolvable when a
request exceeds the node's whole allocatable (preemption cannot help; upstream since v1.34, still at v1.37.2).
With ``DRAExtendedResource`` (``shouldDelegateResourceToDRA``): an extended resource a DeviceClass stands
for (``framework/objects/extended_resources.py``) is not checked on a node whose allocatable lacks it (or
has 0 of it); DynamicResources allocates devices for it there instead. A node that advertises the
resource is checked as for any extended resource. A DeviceClass added, or changed in its
``extendedResourceName``, requeues the pods requesting a resource it now stands for.
Score: CPU and memory use non-zero requests (100m / 200 MiB for containers without requests); other
resources count only when the pod requests them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopf_scheduler.framework import resources as res
from kopf_scheduler.framework import signers
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    RowVerdicts,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import DeviceClass
from kopf_scheduler.framework.objects.extended_resources import (
    DEVICE_CLASS_PREFIX,
    DeviceClassResolver,
    device_class_resolver,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.node_resources_fit import scoring
from kopf_scheduler.plugins.node_resources_fit.args import Args

NAME = names.NODE_RESOURCES_FIT
TOO_MANY_PODS = "Too many pods"
#: the feature gate of extended resources backed by DRA
DRA_EXTENDED_RESOURCE = "DRAExtendedResource"


def insufficient(resource: str) -> str:
    return f"Insufficient {resource}"


#: the filter's rejections, one object per (code, reasons): preemption's dry run asks the same questions
#: of many nodes, and a status costs more to make than to look up
_REJECTIONS: dict[tuple[Code, tuple[str, ...]], Status] = {}
_MAX_REJECTIONS = 256


def _rejection(code: Code, reasons: tuple[str, ...]) -> Status:
    found = _REJECTIONS.get((code, reasons))
    if found is None:
        found = Status(code, reasons)
        if len(_REJECTIONS) < _MAX_REJECTIONS:
            _REJECTIONS[code, reasons] = found
    return found


@dataclass(frozen=True, slots=True)
class _Request:
    """The requests filter checks: positive, and not ignored by the plugin's arguments."""

    amounts: tuple[tuple[str, int], ...]
    #: the requested resources a DeviceClass stands for: left to DRA on nodes without them
    delegable: frozenset[str] = frozenset()


_FILTER_KEY: StateKey[_Request] = StateKey("PreFilter" + NAME)

#: upstream's ``fitsRequest`` checks (and reports) cpu, memory, ephemeral-storage, then scalar resources.
_CHECK_ORDER = {res.CPU: 0, res.MEMORY: 1, res.EPHEMERAL_STORAGE: 2}


def _check_order(item: tuple[str, int]) -> tuple[int, str]:
    return _CHECK_ORDER.get(item[0], len(_CHECK_ORDER)), item[0]


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, VectorFilter, PreScorePlugin, ScorePlugin, VectorScore,
                       EnqueueExtensions, SignPlugin):  # fmt: skip
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's requests; unsigned when DRA would allocate one of them (``DRAExtendedResource``)."""
        return signers.requests(pod, self.classes)

    def __init__(self, args: Args, classes: DeviceClassResolver | None = None) -> None:
        self.args = args
        #: None: ``DRAExtendedResource`` off, every extended resource is checked against allocatable
        self.classes = classes
        self.ignored = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        self.weights = np.array([r.weight for r in args.resources], dtype=np.int64)

    # -- filter ----------------------------------------------------------------------------------------
    def _checked(self, name: str) -> bool:
        if res.is_extended(name):
            return name not in self.ignored and name.split("/", 1)[0] not in self.ignored_groups
        return True

    def _compute_request(self, pod: PodInfo) -> _Request:
        # The spec alone: upstream's computePodResourceRequest reads no resize status for a pod being
        # scheduled.
        checked = [(n, a) for n, a in pod.spec_requests.items() if a > 0 and self._checked(n)]
        delegable: frozenset[str] = frozenset()
        if self.classes is not None:
            delegable = frozenset(n for n, _ in checked if self.classes.get(n) is not None)
        return _Request(tuple(sorted(checked, key=_check_order)), delegable)

    def _request(self, state: CycleState, pod: PodInfo) -> _Request:
        found = state.get(_FILTER_KEY)
        if found is None:
            found = self._compute_request(pod)
            state.write(_FILTER_KEY, found)
        return found

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_FILTER_KEY, self._compute_request(pod))
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        reasons: list[str] = []
        unresolvable = False
        if len(node.pods) + 1 > node.allowed_pod_number:
            reasons.append(TOO_MANY_PODS)
        request = self._request(state, pod)
        for name, amount in request.amounts:
            allocatable = node.allocatable.get(name, 0)
            if allocatable <= 0 and name in request.delegable:
                continue  # DynamicResources allocates devices for it on this node
            if amount > allocatable - node.requested.get(name, 0):
                reasons.append(insufficient(name))
                unresolvable = unresolvable or amount > allocatable
        if not reasons:
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return _rejection(code, tuple(reasons))

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        at, whole = _selector(table, rows)
        ok = table.pod_count[at] + 1 <= table.allowed_pods[at]
        request = self._request(state, pod)
        for name, amount in request.amounts:
            col = table.column.get(name)
            if col is None:
                if name in request.delegable:
                    continue  # no node has it: DRA's on every node
                return np.zeros(len(rows), dtype=bool)
            fits = table.allocatable[at, col] - table.requested[at, col] >= amount
            if name in request.delegable:
                fits |= table.allocatable[at, col] <= 0
            ok &= fits
        return ok[rows] if whole else ok

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> RowVerdicts | None:
        request = self._request(state, pod)
        amounts = tuple(a for a in request.amounts if a[0] not in request.delegable or a[0] in table.column)
        at, whole = _selector(table, rows)
        flags = [table.pod_count[at] + 1 > table.allowed_pods[at]]
        unresolvable = np.zeros(len(flags[0]), dtype=bool)
        for name, amount in amounts:
            col = table.column.get(name)
            if col is None:  # no node has the resource: the per-node form says so
                return None
            allocatable = table.allocatable[at, col]
            checked = allocatable > 0 if name in request.delegable else True
            flags.append(checked & (allocatable - table.requested[at, col] < amount))
            unresolvable |= checked & (allocatable < amount)
        # one status per distinct combination of reasons, shared by the rows that have it
        keys = unresolvable.astype(np.int64) << len(flags)
        for bit, flag in enumerate(flags):
            keys |= flag.astype(np.int64) << bit
        if whole:
            keys = keys[rows]
        texts = (TOO_MANY_PODS, *(insufficient(name) for name, _ in amounts))
        distinct, which = _distinct(keys, 1 << (len(flags) + 1))
        made: list[Status | None] = []
        for key in distinct.tolist():
            reasons = tuple(text for bit, text in enumerate(texts) if key >> bit & 1)
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if key >> len(flags) & 1 else Code.UNSCHEDULABLE
            made.append(Status(code, reasons) if reasons else None)
        return RowVerdicts(made, which)

    # -- score -----------------------------------------------------------------------------------------
    def _pod_scoring_requests(self, pod: PodInfo) -> list[int]:
        out = []
        for spec in self.args.resources:
            if spec.name == res.CPU:
                out.append(pod.scoring_cpu)
            elif spec.name == res.MEMORY:
                out.append(pod.scoring_memory)
            else:
                out.append(pod.requests.get(spec.name, 0))
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        pod_requests = self._pod_scoring_requests(pod)
        requested, alloc = [], []
        for spec, pod_amount in zip(self.args.resources, pod_requests, strict=True):
            if pod_amount == 0 and res.is_scalar(spec.name):
                requested.append(0)
                alloc.append(0)
                continue
            if spec.name == res.CPU:
                node_amount = node.non_zero_cpu
            elif spec.name == res.MEMORY:
                node_amount = node.non_zero_memory
            else:
                node_amount = node.requested.get(spec.name, 0)
            alloc.append(node.allocatable.get(spec.name, 0))
            requested.append(node_amount + pod_amount)
        req_arr = np.array([requested], dtype=np.int64)
        alloc_arr = np.array([alloc], dtype=np.int64)
        per_resource = scoring.resource_scores(self.args.strategy, self.args.shape, req_arr, alloc_arr)
        return int(scoring.combine(self.args.strategy, per_resource, alloc_arr, self.weights)[0])

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        pod_requests = self._pod_scoring_requests(pod)
        n, k = len(rows), len(self.args.resources)
        requested = np.zeros((n, k), dtype=np.int64)
        alloc = np.zeros((n, k), dtype=np.int64)
        for i, (spec, pod_amount) in enumerate(zip(self.args.resources, pod_requests, strict=True)):
            if pod_amount == 0 and res.is_scalar(spec.name):
                continue
            col = table.column.get(spec.name)
            if col is None:
                continue
            alloc[:, i] = table.allocatable[rows, col]
            if spec.name == res.CPU:
                requested[:, i] = table.non_zero[rows, 0] + pod_amount
            elif spec.name == res.MEMORY:
                requested[:, i] = table.non_zero[rows, 1] + pod_amount
            else:
                requested[:, i] = table.requested[rows, col] + pod_amount
        per_resource = scoring.resource_scores(self.args.strategy, self.args.shape, requested, alloc)
        return scoring.combine(self.args.strategy, per_resource, alloc, self.weights)

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        # InPlacePodVerticalScaling is GA: scale-downs may free room (scale-ups matter only to deferred
        # resizes, InPlacePodVerticalScalingSchedulerPreemption, off).
        return [
            ClusterEventWithHint(ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE), _assigned_pod_deleted),
            ClusterEventWithHint(
                ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_ALLOCATABLE), self._node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.ASSIGNED_POD, Action.UPDATE_POD_SCALE_DOWN), _assigned_pod_scaled_down
            ),
            ClusterEventWithHint(ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_SCALE_DOWN), _queue),
            *(
                []
                if self.classes is None
                else [
                    ClusterEventWithHint(
                        ClusterEvent(Resource.DEVICE_CLASS, Action.ADD | Action.UPDATE), _device_class_changed
                    )
                ]
            ),
        ]

    def _node_changed(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, NodeInfo):
            return QueueingHint.QUEUE
        empty = NodeInfo()
        empty.allocatable, empty.allowed_pod_number = new.allocatable, new.allowed_pod_number
        state = CycleState()
        return QueueingHint.QUEUE if self.filter(state, pod, empty) is None else QueueingHint.SKIP


def _device_class_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterDeviceClassEvent``: the class now stands for a resource the pod requests (an
    update only when its ``extendedResourceName`` changed; an added class also by its implicit name)."""
    if not isinstance(new, DeviceClass):
        return QueueingHint.QUEUE
    if isinstance(old, DeviceClass):
        if (old.extended_resource_name or "") == (new.extended_resource_name or ""):
            return QueueingHint.SKIP
    elif DEVICE_CLASS_PREFIX + new.name in pod.requests:
        return QueueingHint.QUEUE
    if new.extended_resource_name is not None and new.extended_resource_name in pod.requests:
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _assigned_pod_deleted(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterAssignedPodDelete``: a pod neither bound nor nominated held no room."""
    if isinstance(old, PodInfo) and not old.node_name and not old.nominated_node_name:
        return QueueingHint.SKIP
    return QueueingHint.QUEUE


def _assigned_pod_scaled_down(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterAssignedPodScaleDown`` (``haveEnoughRelevantResourcesDecreased``): a bound
    pod's request lowered for a resource the pending pod requests."""
    if not isinstance(old, PodInfo) or not isinstance(new, PodInfo):
        return QueueingHint.QUEUE
    if not new.node_name:
        return QueueingHint.SKIP
    before, after = old.requests, new.requests
    for name in pod.requests:
        if (name in _COMPARED or res.is_scalar(name)) and before.get(name, 0) > after.get(name, 0):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


#: the named resources ``SetMaxResource`` keeps besides scalar ones
_COMPARED = frozenset({res.CPU, res.MEMORY, res.EPHEMERAL_STORAGE})


def _queue(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterTargetPodScaleDown``: the pending pod asks for less now."""
    return QueueingHint.QUEUE


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    enabled = handle.feature_gates.enabled(DRA_EXTENDED_RESOURCE)
    return NodeResourcesFit(args, device_class_resolver(handle.objects) if enabled else None)


def _selector(table: NodeTable, rows: np.ndarray) -> tuple[slice | np.ndarray, bool]:
    """What to read the table's columns at, and whether that is the whole table (the result then picked
    at ``rows`` once): when the rows are most of the table, whole columns cost less than picking the rows
    out of each column."""
    if len(rows) * 2 >= table.size:
        return slice(0, table.size), True
    return rows, False


def _distinct(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys in ``[0, bound)``: counted, not sorted, when the
    bound is small (a few resources), as it is for all but pods asking for many extended resources."""
    if bound > len(keys) or bound > 1 << 16:
        return np.unique(keys, return_inverse=True)  # type: ignore[no-any-return]
    distinct = np.flatnonzero(np.bincount(keys, minlength=bound))
    lookup = np.zeros(bound, dtype=np.intp)
    lookup[distinct] = np.arange(len(distinct))
    return distinct, lookup[keys]
