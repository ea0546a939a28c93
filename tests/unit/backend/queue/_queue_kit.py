"""Small builders and fakes for the scheduling-queue tests: pods and nodes as plain API-shaped dicts,
a fake profile (PreEnqueue gates plus registered events), fake queue-sort plugins, a queue on a virtual
clock, and a helper that reports a failed attempt the way the scheduling cycle does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kopf_scheduler.backend.queue import SchedulingQueue
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.events import Action, ClusterEvent, HintFn, QueueingHint, Resource
from kopf_scheduler.framework.interface import QueueSortPlugin
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import Code, Status

START = 1000.0
PROFILE = "default-scheduler"

QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP

NODE_ADD = ClusterEvent(Resource.NODE, Action.ADD, "NodeAdd")
NODE_TAINT = ClusterEvent(Resource.NODE, Action.UPDATE_NODE_TAINT)
NODE_ALLOCATABLE = ClusterEvent(Resource.NODE, Action.UPDATE_NODE_ALLOCATABLE)
NODE_DELETE = ClusterEvent(Resource.NODE, Action.DELETE)
ASSIGNED_POD_DELETE = ClusterEvent(Resource.ASSIGNED_POD, Action.DELETE)
ASSIGNED_POD_ADD = ClusterEvent(Resource.ASSIGNED_POD, Action.ADD)
POD_TOLERATION = ClusterEvent(Resource.POD, Action.UPDATE_POD_TOLERATION)
POD_LABEL = ClusterEvent(Resource.POD, Action.UPDATE_POD_LABEL)
POD_GATES_GONE = ClusterEvent(Resource.POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)


def make_pod(
    name: str,
    *,
    priority: int = 0,
    scheduler: str = PROFILE,
    gates: Sequence[str] = (),
    labels: dict[str, str] | None = None,
    tolerations: Sequence[dict[str, str]] = (),
    cpu: str | None = None,
    nominated: str = "",
    node: str = "",
) -> PodInfo:
    container: dict[str, Any] = {"name": "c"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    raw = {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": dict(labels or {}),
        },
        "spec": {
            "priority": priority,
            "schedulerName": scheduler,
            "nodeName": node,
            "containers": [container],
            "schedulingGates": [{"name": g} for g in gates],
            "tolerations": [dict(t) for t in tolerations],
        },
        "status": {"nominatedNodeName": nominated} if nominated else {},
    }
    return PodInfo(raw)


def make_node(
    name: str,
    *,
    cpu: str = "4",
    labels: dict[str, str] | None = None,
    taints: Sequence[dict[str, str]] = (),
    unschedulable: bool = False,
    annotations: dict[str, str] | None = None,
    conditions: dict[str, str] | None = None,
) -> NodeInfo:
    raw = {
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
        "spec": {"taints": [dict(t) for t in taints], "unschedulable": unschedulable},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": k, "status": v} for k, v in (conditions or {"Ready": "True"}).items()],
        },
    }
    return NodeInfo(raw)


class FastPrioritySort(QueueSortPlugin):
    """Higher priority first, then the earlier queue timestamp; offers the fast key."""

    name = "PrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.timestamp < b.timestamp

    def sort_key(self, qp: QueuedPodInfo) -> Any:
        return (-qp.pod.priority, qp.timestamp)


class LessOnlyPrioritySort(QueueSortPlugin):
    """The same order through ``less`` only (no fast key)."""

    name = "LessOnlyPrioritySort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.timestamp < b.timestamp


class LowestPriorityFirst(QueueSortPlugin):
    name = "LowestPriorityFirst"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.pod.priority < b.pod.priority

    def sort_key(self, qp: QueuedPodInfo) -> Any:
        return qp.pod.priority


Gate = Callable[[PodInfo], str | None]


def gates_gate(pod: PodInfo) -> str | None:
    """A PreEnqueue check like SchedulingGates: holds pods that still have gates."""
    return f"waiting for scheduling gates: {list(pod.scheduling_gates)}" if pod.scheduling_gates else None


def gates_removed_hint(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    return QUEUE if isinstance(new, PodInfo) and new.uid == pod.uid and not new.scheduling_gates else SKIP


class FakeProfile:
    """A profile as the queue sees it: PreEnqueue gates by plugin name, and (plugin, event, hint) triples."""

    def __init__(
        self,
        registrations: Iterable[tuple[str, ClusterEvent, HintFn | None]] = (),
        gates: dict[str, Gate] | None = None,
    ) -> None:
        self.queue_sort = FastPrioritySort()
        self.registrations = list(registrations)
        self.gates = dict(gates or {})
        self.pre_enqueue_runs = 0

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        self.pre_enqueue_runs += 1
        for plugin, gate in self.gates.items():
            reason = gate(pod)
            if reason:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (reason,), plugin)
        return None

    def events_to_register(self) -> list[tuple[str, ClusterEvent, HintFn | None]]:
        return list(self.registrations)


def make_queue(
    profile: FakeProfile | None = None,
    *,
    profiles: dict[str, FakeProfile] | None = None,
    sort: QueueSortPlugin | None = None,
    clock: VirtualClock | None = None,
    **options: Any,
) -> tuple[SchedulingQueue, VirtualClock]:
    clock = clock or VirtualClock(START)
    table = dict(profiles or {})
    if profile is not None:
        table[PROFILE] = profile
    queue = SchedulingQueue(sort or FastPrioritySort(), table.get, clock, **options)
    return queue, clock


def fail(
    queue: SchedulingQueue,
    qp: QueuedPodInfo,
    *plugins: str,
    pending: Sequence[str] = (),
    error: bool = False,
) -> str | None:
    """Reports a failed attempt of a popped pod as the scheduling cycle would."""
    qp.unschedulable_plugins.update(plugins)
    qp.pending_plugins.update(pending)
    qp.last_failure_was_error = error
    return queue.add_unschedulable_if_not_present(qp)


def pop_uid(queue: SchedulingQueue) -> str | None:
    qp = queue.pop_nowait()
    return None if qp is None else qp.pod.uid


def pop_all_names(queue: SchedulingQueue) -> list[str]:
    names = []
    while (qp := queue.pop_nowait()) is not None:
        names.append(qp.pod.name)
        queue.done(qp.pod.uid)
    return names


def attempt_and_fail(
    queue: SchedulingQueue, pod: PodInfo, *plugins: str, pending: Sequence[str] = (), error: bool = False
) -> QueuedPodInfo:
    """Adds ``pod``, pops it and reports the failure; the popped pod must be ``pod``."""
    queue.add(pod)
    qp = queue.pop_nowait()
    assert qp is not None and qp.pod.uid == pod.uid
    fail(queue, qp, *plugins, pending=pending, error=error)
    return qp
