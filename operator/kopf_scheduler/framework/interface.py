"""The plugin contract: one abstract class per extension point, as in kube-scheduler's framework.

A plugin lists in its bases the extension points it implements. The scheduling cycle (pre-filter to
permit) is synchronous CPU work over a snapshot; pre-bind, bind and post-bind do I/O and are ``async``.

Contracts every implementation keeps:
- A method returns ``None`` for success, or a ``Status`` for an expected outcome (unschedulable,
  unresolvable, skip, wait, pending). An unexpected failure is raised; the runtime turns it into an
  ``ERROR`` status that names the plugin.
- Filter and score never mutate node state (``NodeInfo``, ``NodeTable``); they read the snapshot only.
- Every reserve is matched by an unreserve when the pod does not bind; unreserve is idempotent and must
  not fail.
- Per-cycle data goes into ``CycleState`` under the plugin's own ``StateKey``; values that pre-filter
  extensions change implement ``clone()``.
- Optional fast paths (``VectorFilter``, ``VectorScore``) judge many nodes at once and must agree with the
  per-node forms exactly, errors included (``filter_errors``); the runtime prefers them when present, and
  a vectorised filter may leave a pod to its per-node form.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import ClusterEventWithHint
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import Status

#: the highest score a score plugin may give after normalisation (``framework.MaxNodeScore``).
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1


class Plugin(abc.ABC):  # noqa: B024 - a marker base: every plugin has a name, nothing else is required
    """Every plugin has a name: kube-scheduler's CamelCase name where the semantics match."""

    name: str = ""


# -- the snapshot as plugins see it --------------------------------------------------------------------
class SnapshotLister(Protocol):
    node_infos: list[NodeInfo]
    table: NodeTable

    def get(self, name: str) -> NodeInfo | None: ...

    def index_of(self, name: str) -> int | None: ...

    def have_pods_with_affinity(self) -> list[NodeInfo]: ...

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]: ...

    def image_num_nodes(self, image: str) -> int: ...


class NodeSet(Sequence[NodeInfo]):
    """The nodes a pre-score or score sees: rows into the snapshot table plus their ``NodeInfo``s."""

    __slots__ = ("_infos", "_snapshot", "rows")

    def __init__(self, snapshot: SnapshotLister, rows: np.ndarray) -> None:
        self._snapshot = snapshot
        self.rows = rows
        self._infos: list[NodeInfo] | None = None

    @property
    def infos(self) -> list[NodeInfo]:
        if self._infos is None:
            all_infos = self._snapshot.node_infos
            self._infos = [all_infos[i] for i in self.rows.tolist()]
        return self._infos

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        return self.infos[i]

    def __iter__(self) -> Iterator[NodeInfo]:
        return iter(self.infos)


# -- queue ---------------------------------------------------------------------------------------------
class PreEnqueuePlugin(Plugin):
    @abc.abstractmethod
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Whether the pod may enter the active queue; a rejection keeps it gated (not attempted)."""


class QueueSortPlugin(Plugin):
    @abc.abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """True when ``a`` should be scheduled before ``b``."""

    def sort_key(self, qp: QueuedPodInfo) -> Any:
        """Optional fast form: a key whose ascending order equals ``less`` (None: the queue uses less)."""
        return None


class EnqueueExtensions(abc.ABC):
    """Plugins that reject pods say which cluster events may make those pods schedulable again."""

    @abc.abstractmethod
    def events_to_register(self) -> list[ClusterEventWithHint]: ...


# -- pre-filter and filter -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Restricts filtering to these node names; ``None`` means all nodes."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


class PreFilterExtensions(abc.ABC):
    """Incremental updates of pre-filter state when pods are added to or removed from a node in a
    simulation (nominated pods, preemption victims)."""

    @abc.abstractmethod
    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None: ...

    @abc.abstractmethod
    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None: ...


class PreFilterPlugin(Plugin):
    @abc.abstractmethod
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        """Computes per-pod data for filter; Skip means this plugin's filter does not run for the pod."""

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    @abc.abstractmethod
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Whether the pod fits on the node."""


class VectorFilter(abc.ABC):
    """Optional fast form of ``filter`` over many nodes at once."""

    @abc.abstractmethod
    def filter_rows(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        """A boolean array aligned with ``rows``: True where ``filter`` would return success. None when the
        plugin has no vectorised form for this pod: the runtime then runs ``filter`` node by node."""

    def filter_errors(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> np.ndarray | None:
        """Optional: for ``rows`` (rows ``filter_rows`` rejected), a boolean array aligned with them, True
        where ``filter`` returns an ``ERROR`` status. The runtime runs the per-node chain on those nodes in
        their place in the examination order, so filtering stops at the first error as it does node by
        node. None (the default): ``filter`` does not fail where ``filter_rows`` rejects."""
        return None

    def filter_statuses(
        self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray
    ) -> RowVerdicts | None:
        """Optional: the statuses ``filter`` returns for ``rows`` (rows ``filter_rows`` rejected), all at
        once. None (the default) means the runtime asks ``filter`` node by node, when a status is read."""
        return None


@dataclass(frozen=True, slots=True)
class RowVerdicts:
    """The statuses of many rows at once, as the few distinct ones and, for each row, which of them it
    has: a pod that fits nowhere gets thousands of verdicts, most of them alike."""

    #: the distinct statuses (None: the row passes)
    distinct: list[Status | None]
    #: aligned with the rows: the index in ``distinct`` of each row's status
    which: np.ndarray

    def __getitem__(self, i: int) -> Status | None:
        return self.distinct[int(self.which[i])]


@dataclass(slots=True)
class PostFilterResult:
    nominated_node_name: str = ""
    #: pods removed to make room (preemption victims), for reporting.
    victims: list[PodInfo] = field(default_factory=list)
    #: API work to finish before the pod is requeued (preemption's evictions); the scheduler awaits it
    #: outside the scheduling cycle, keeping the pod in flight meanwhile. Returns an error status or None.
    prepare: Callable[[], Awaitable[Status | None]] | None = None


class PostFilterPlugin(Plugin):
    @abc.abstractmethod
    def post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Tries to make the pod schedulable after filtering rejected every node (preemption)."""


class AsyncPostFilter(abc.ABC):
    """Optional form of ``post_filter`` that the runtime awaits: for a post-filter that consults scheduler
    extenders over HTTP (preemption's preempt verb). It must give the same answer as ``post_filter`` and
    must not suspend when the profile has no extenders (its cycle then runs without an event loop)."""

    @abc.abstractmethod
    async def post_filter_async(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status | None]: ...


class NodeStatusMap(Protocol):
    """Filter verdicts per node name for the nodes filtering examined."""

    def get(self, name: str) -> Status | None: ...

    def items(self) -> Iterator[tuple[str, Status]]: ...

    def __len__(self) -> int: ...


# -- scoring -------------------------------------------------------------------------------------------
class PreScorePlugin(Plugin):
    @abc.abstractmethod
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        """Computes per-pod data for score; Skip means this plugin's score does not run for the pod."""


class ScorePlugin(Plugin):
    @abc.abstractmethod
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The raw score of the node for the pod."""

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        """Optional: rewrites ``scores`` (int64, aligned with the scored nodes) in place into [0, 100]."""
        return None

    #: set by plugins that implement ``normalize_score`` (upstream's ``ScoreExtensions``).
    has_normalize: bool = False


class VectorScore(abc.ABC):
    """Optional fast form of ``score`` over many nodes at once."""

    @abc.abstractmethod
    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        """Raw scores (int64) aligned with ``rows``, equal to ``score`` on each node."""


# -- signatures (opportunistic batching) ----------------------------------------------------------------
#: one piece of a pod's signature: (signer name, JSON-serialisable value), upstream's ``SignFragment``
SignFragment = tuple[str, Any]


class SignPlugin(abc.ABC):
    """What of a pod a pre-filter, filter, pre-score or score plugin reads (upstream's ``SignPlugin``):
    two pods whose fragments are equal get the same verdicts and raw scores from the plugin on the same
    nodes. A profile batches only when every such plugin signs (``framework.runtime.batch``)."""

    @abc.abstractmethod
    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The fragments of ``pod``'s signature, or a status saying why it cannot be signed."""


# -- reserve and permit --------------------------------------------------------------------------------
class ReservePlugin(Plugin):
    @abc.abstractmethod
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Undoes ``reserve``; idempotent, never fails."""


class PermitPlugin(Plugin):
    @abc.abstractmethod
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """Allow (None), reject (a rejection status) or wait (``Code.WAIT``, timeout in seconds)."""


# -- binding (async: API I/O) --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PreBindPreFlightResult:
    """What a pre-bind plugin's pre-flight says besides its status (upstream's
    ``PreBindPreFlightResult``)."""

    #: its pre-bind may run at the same time as the neighbouring pre-binds that allow it too
    allow_parallel: bool = False


class PreBindPlugin(Plugin):
    @abc.abstractmethod
    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def pre_bind_pre_flight(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[PreBindPreFlightResult | None, Status | None]:
        """Whether ``pre_bind`` has work for the pod (upstream's ``PreBindPreFlight``, run before the
        binding cycle's Permit wait with the NominatedNodeNameForExpectation gate): success (None) when
        it has, Skip when it has none (then ``pre_bind`` is not called), or an error. Any other code is
        refused. Cheap and without I/O. The default says it has work, as a plugin that cannot tell must."""
        return None, None


class BindPlugin(Plugin):
    @abc.abstractmethod
    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Binds the pod; Skip passes the pod to the next bind plugin."""


class PostBindPlugin(Plugin):
    @abc.abstractmethod
    async def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Informational, after a successful bind."""


# -- the pod group scheduling cycle (GenericWorkload) ---------------------------------------------------
class PlacementFeasiblePlugin(Plugin):
    """Whether a pod group can still meet its constraints, asked before the cycle tries its pods and after
    each (upstream's ``PlacementFeasiblePlugin``; kube-scheduler v1.37.2 asks GangScheduling only)."""

    @abc.abstractmethod
    def placement_feasible(self, group: WorkloadPodGroup, scheduled: int, remaining: int) -> Status | None:
        """``scheduled``: the group's pods assumed or bound so far (this cycle's included); ``remaining``:
        its pods not tried yet. None: feasible; Wait: not yet; Unschedulable: never in this cycle."""


@dataclass(slots=True)
class ProposedAssignment:
    """A pod of a group and the node a pod group cycle found for it, with the pod's cycle state."""

    pod: PodInfo
    node_name: str
    state: CycleState


#: runs the pod group cycle's algorithm again (on the snapshot as it is now): the assignments it found
#: and the group's status (awaited: it awaits scheduler extenders, and nothing else)
PodGroupSchedulingFunc = Callable[[], Awaitable[tuple[list[ProposedAssignment], Status | None]]]


@dataclass(slots=True)
class PodGroupPostFilterResult:
    #: pod uid -> the node it is nominated to
    nominations: dict[str, str] = field(default_factory=dict)
    #: API work (preemption's evictions) the scheduler awaits outside the cycle before the group's pods
    #: are reported; returns an error status or None
    prepare: Callable[[], Awaitable[Status | None]] | None = None
    #: pods removed to make room, for reporting
    victims: list[PodInfo] = field(default_factory=list)


class PodGroupPostFilterPlugin(Plugin):
    """Tries to make a pod group schedulable after its cycle failed (pod group preemption)."""

    @abc.abstractmethod
    async def pod_group_post_filter(
        self,
        group: WorkloadPodGroup,
        unscheduled: Sequence[PodInfo],
        states: Mapping[str, CycleState],
        schedule: PodGroupSchedulingFunc,
    ) -> tuple[PodGroupPostFilterResult | None, Status | None]:
        """``unscheduled``: the group's pods in this cycle, in its order; ``states``: by pod uid, the cycle
        state of each pod the cycle tried. Must not suspend other than in ``schedule`` (its cycle may run
        without an event loop)."""


EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}
