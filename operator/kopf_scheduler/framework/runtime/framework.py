"""A profile's running framework: its plugins per extension point, and how each point runs them.

Guards: plugins run in the configured order; the first failing filter decides a node's status; scores are
checked to lie in [0, 100] after normalisation and multiplied by their weight; a plugin that raises gets an
``ERROR`` status naming it; reserve failures are undone by unreserve in reverse order. The vectorised forms
of filter and score are used when a plugin offers them, and give the same verdicts as the per-node forms.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.diagnosis import count_verdicts, merge_counts
from kopf_scheduler.framework.disruption_budgets import DisruptionBudget, DisruptionBudgets
from kopf_scheduler.framework.eager import run_eagerly
from kopf_scheduler.framework.events import Action, ClusterEvent, HintFn, Resource
from kopf_scheduler.framework.extenders import HTTPExtender
from kopf_scheduler.framework.extenders.scheduling import EXTENDER_NAME, extenders_binding
from kopf_scheduler.framework.handle import PodNominator
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    AsyncPostFilter,
    BindPlugin,
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    NodeStatusMap,
    PermitPlugin,
    PlacementFeasiblePlugin,
    Plugin,
    PodGroupPostFilterPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    RowVerdicts,
    ScorePlugin,
    SnapshotLister,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import ClusterListers, NoObjects
from kopf_scheduler.framework.objects.podgroups import GroupMembers, NoMembers
from kopf_scheduler.framework.objects.workload_pod_groups import NoPodGroups, PodGroupManager
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.pods_in_pre_bind import PodInPreBind, PodsInPreBind
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.runtime.waiting_pods import MAX_PERMIT_TIMEOUT, WaitingPod, WaitingPods
from kopf_scheduler.framework.status import SKIP, Code, Status, error

if TYPE_CHECKING:
    from kopf_scheduler.framework.runtime.batch import OpportunisticBatch

P = TypeVar("P", bound=Plugin)


#: the smallest number of candidates filtered at once
MIN_FILTER_CHUNK = 256
#: copies of nominated nodes (``_with_nominated``) kept beyond the nodes nominated for the pod at hand
NOMINATED_COPIES_SLACK = 64


def _call_error(plugin: Plugin, point: str, exc: BaseException) -> Status:
    """A plugin that raised, worded as upstream's ``framework.go`` words the error status of that point."""
    name = plugin.name
    if point == "Filter":
        message = f'running "{name}" filter plugin: {exc}'
    elif point == "Score":
        message = f'running Score plugins: plugin "{name}" failed with: {exc}'
    elif point == "PostFilter":
        message = str(exc)
    else:
        message = f'running {point} plugin "{name}": {exc}'
    return error(message, plugin=name, cause=exc)


class _NoNominator:
    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []

    def add_nominated_pod(self, pod: PodInfo, node_name: str | None = None) -> None:
        return None

    def nominated_node_of(self, pod: PodInfo) -> str:
        return pod.nominated_node_name


@dataclass(slots=True)
class Rejected:
    """Rows a vectorised filter rejected, with the per-node filters that run before it in the chain."""

    plugin: FilterPlugin
    earlier: tuple[FilterPlugin, ...]
    rows: np.ndarray


@dataclass(slots=True)
class Judged:
    """Rows a vectorised filter judged alone, and their verdicts: ``verdicts[which[i]]`` is row ``i``'s."""

    rows: np.ndarray
    which: np.ndarray
    verdicts: list[Status]


@dataclass(slots=True)
class NodeStatuses:
    """Filter verdicts for the nodes filtering examined and rejected (upstream's ``NodeToStatus``).

    Statuses of nodes that a vectorised filter rejected are computed on first access, by that plugin
    alone (its vectorised ``filter_statuses`` when it has one) after the per-node filters ahead of it in
    the chain (those run during filtering already, where an error must stop it, and are then left out),
    so a pod that fits pays nothing for them and one that does not pays little. Verdicts the vectorised
    form gave alone stay in that compact form (``bulk``) until a reader asks node by node: counting
    them, as the failure message, the queue and preemption do, needs no per-node entry.
    """

    framework: Framework
    state: CycleState
    pod: PodInfo
    snapshot: SnapshotLister
    #: statuses already known, by node name
    known: dict[str, Status] = field(default_factory=dict)
    #: rows rejected by vectorised filters whose statuses are not computed yet
    pending: list[Rejected] = field(default_factory=list)
    #: rows a vectorised filter judged alone, with their verdicts
    bulk: list[Judged] = field(default_factory=list)
    #: the status of every node not examined at all (e.g. outside a pre-filter result)
    absent: Status | None = None
    absent_count: int = 0
    #: a filter failed (an ``ERROR`` status): filtering stopped there and the cycle fails with it,
    #: as ``findNodesThatPassFilters`` stops on the first error upstream
    error: Status | None = None
    _counts: list[tuple[Status, int]] | None = None

    def _resolve(self) -> None:
        if not self.pending:
            return
        self._counts = None
        pending, self.pending = self.pending, []
        for group in pending:
            self._resolve_group(group)

    def _resolve_group(self, group: Rejected) -> None:
        infos = self.snapshot.node_infos
        state, pod, plugin = self.state, self.pod, group.plugin
        try:
            verdicts = plugin.filter_statuses(state, pod, self.snapshot.table, group.rows)  # type: ignore[attr-defined]
        except Exception as e:
            failure = _call_error(plugin, "Filter", e)
            verdicts = RowVerdicts([failure], np.zeros(len(group.rows), dtype=np.intp))
        if not group.earlier and verdicts is not None and None not in verdicts.distinct:
            # the plugin alone judged these rows: each distinct verdict named once, kept compact
            named = [found.with_plugin(plugin.name) for found in verdicts.distinct if found is not None]
            self.bulk.append(Judged(group.rows, verdicts.which, named))
            return
        run_chain = self.framework.run_filters
        for i, row in enumerate(group.rows.tolist()):
            node = infos[row]
            status = run_chain(group.earlier, state, pod, node) if group.earlier else None
            if status is None and verdicts is None:
                status = run_chain((plugin,), state, pod, node)
            elif status is None and (found := verdicts[i]) is not None:
                status = found.with_plugin(plugin.name)  # made once per distinct verdict object
            if status is None:  # a vector form disagreed with its per-node form: a plugin bug
                status = error(f"vectorised filter {plugin.name!r} rejected a node its filter accepts")
            self.known[node.name] = status

    def _expand(self) -> None:
        """Every verdict as a per-node entry (for readers by node name)."""
        self._resolve()
        infos = self.snapshot.node_infos
        for judged in self.bulk:
            names = [infos[row].name for row in judged.rows.tolist()]
            verdicts = judged.verdicts
            self.known.update(zip(names, [verdicts[i] for i in judged.which.tolist()], strict=True))
        self.bulk.clear()

    def get(self, name: str) -> Status | None:
        self._expand()
        return self.known.get(name)

    def set(self, name: str, status: Status) -> None:
        """Records (or replaces) a node's verdict: a filter extender's rejection."""
        self._expand()
        self.known[name] = status
        self._counts = None

    def items(self) -> Iterator[tuple[str, Status]]:
        self._expand()
        return iter(list(self.known.items()))

    def verdict_counts(self) -> list[tuple[Status, int]]:
        """Each distinct verdict and how many nodes have it, counted once until a verdict changes."""
        self._resolve()
        if self._counts is None:
            pairs = count_verdicts(list(self.known.values()))
            for judged in self.bulk:
                counts = np.bincount(judged.which, minlength=len(judged.verdicts)).tolist()
                pairs.extend((status, n) for status, n in zip(judged.verdicts, counts, strict=True) if n)
            self._counts = merge_counts(pairs)
        return self._counts

    def __len__(self) -> int:
        judged = sum(len(judged.rows) for judged in self.bulk)
        return len(self.known) + judged + sum(len(group.rows) for group in self.pending)


L = TypeVar("L")


def _per_cycle(
    state: CycleState,
    key: StateKey[tuple[list[P], int, L]],
    plugins: list[P],
    build: Callable[[list[P], set[str]], L],
) -> L:
    """What ``build`` derives from a profile's ``plugins`` and the plugins this cycle's pre-filter skipped,
    made once per cycle and kept in ``state`` under ``key`` (preemption asks for it thousands of times a
    cycle); made again if the profile's list or the skipped set has changed since."""
    skip = state.skip_filter_plugins
    held = state.get(key)
    if held is None or held[0] is not plugins or held[1] != len(skip):
        held = (plugins, len(skip), build(plugins, skip))
        state.write(key, held)
    return held[2]


def _unskipped(plugins: list[FilterPlugin], skip: set[str]) -> tuple[FilterPlugin, ...]:
    return tuple(p for p in plugins if p.name not in skip)


def _extensions(plugins: list[PreFilterPlugin], skip: set[str]) -> list[tuple[str, PreFilterExtensions]]:
    return [
        (p.name, ext)
        for p in plugins
        if p.name not in skip and (ext := p.pre_filter_extensions()) is not None
    ]


#: the filter chain of a cycle: (the profile's filters, how many it skips, the plugins left)
_CHAIN_KEY: StateKey[tuple[list[FilterPlugin], int, tuple[FilterPlugin, ...]]] = StateKey(
    "framework/filterChain"
)
#: the pre-filter extensions of a cycle: (the profile's pre-filters, how many it skips, the extensions run)
_EXTENSIONS_KEY: StateKey[tuple[list[PreFilterPlugin], int, list[tuple[str, PreFilterExtensions]]]] = (
    StateKey("framework/preFilterExtensions")
)


def _with_pods(node: NodeInfo, pods: list[PodInfo]) -> NodeInfo:
    copy = node.clone()
    for pod in pods:
        copy.add_pod(pod)
    return copy


def _rejected_groups(
    candidates: np.ndarray,
    rejected_by: np.ndarray,
    examined: int,
    rejecters: list[tuple[FilterPlugin, tuple[FilterPlugin, ...]]],
) -> list[Rejected]:
    """The examined candidates each vectorised filter rejected, grouped by that filter."""
    head = rejected_by[:examined]
    groups = []
    for k, (plugin, earlier) in enumerate(rejecters):
        rows = candidates[:examined][head == k]
        if len(rows):
            groups.append(Rejected(plugin, earlier, rows))
    return groups


@dataclass(slots=True)
class FilterOutcome:
    feasible: np.ndarray  # rows, in the order they were examined
    examined: int
    statuses: NodeStatuses


@dataclass(slots=True)
class ScoreBreakdown:
    """Per-plugin raw, normalised and weighted scores, aligned with the scored rows (for --explain)."""

    raw: dict[str, np.ndarray] = field(default_factory=dict)
    normalized: dict[str, np.ndarray] = field(default_factory=dict)
    weighted: dict[str, np.ndarray] = field(default_factory=dict)


def profile_replaced_message(profile: str, generation: int | None) -> str:
    """Why the pods waiting at Permit in a replaced framework are rejected (``reject_waiting_pods``)."""
    version = f"generation {generation}" if generation is not None else "a new version"
    return (
        f"profile {profile} was replaced by {version} while the pod waited at Permit: every pod waiting "
        "there is rejected at once, so a gang is requeued together"
    )


@dataclass(slots=True)
class _PreFlight:
    """What the pre-flights of a binding cycle decided (upstream's skip and parallel pre-bind sets)."""

    skip: set[str]
    parallel: set[str]

    def clone(self) -> _PreFlight:
        return self


_PRE_FLIGHT: StateKey[_PreFlight] = StateKey("PreBindPreFlight")


def _pre_bind_groups(plugins: list[PreBindPlugin], flight: _PreFlight | None) -> list[list[PreBindPlugin]]:
    """The pre-bind plugins to run, in order, consecutive ones allowed to run in parallel grouped
    (upstream's ``getPreBindPluginGroups``)."""
    if flight is None:
        return [[p] for p in plugins]
    groups: list[list[PreBindPlugin]] = []
    group: list[PreBindPlugin] = []
    for plugin in plugins:
        if plugin.name in flight.parallel:
            if plugin.name not in flight.skip:
                group.append(plugin)
            continue
        if group:
            groups.append(group)
            group = []
        if plugin.name not in flight.skip:
            groups.append([plugin])
    if group:
        groups.append(group)
    return groups


@dataclass
class Framework:
    profile_name: str
    percentage_of_nodes_to_score: int | None
    plugins: dict[str, Plugin]
    pre_enqueue: list[PreEnqueuePlugin]
    queue_sort: QueueSortPlugin
    pre_filter: list[PreFilterPlugin]
    filter: list[FilterPlugin]
    post_filter: list[PostFilterPlugin]
    pre_score: list[PreScorePlugin]
    score: list[ScorePlugin]
    score_weights: dict[str, int]
    reserve: list[ReservePlugin]
    permit: list[PermitPlugin]
    pre_bind: list[PreBindPlugin]
    bind: list[BindPlugin]
    post_bind: list[PostBindPlugin]
    client: ClusterClient
    clock: Clock = field(default_factory=RealClock)
    waiting_pods: WaitingPods = field(default_factory=WaitingPods)
    #: pods between their Permit wait and their binding, which preemption cancels instead of deleting
    pods_in_pre_bind: PodsInPreBind = field(default_factory=PodsInPreBind)
    nominator: PodNominator = field(default_factory=_NoNominator)
    #: the snapshot of the running cycle (set by the scheduler before each cycle)
    current_snapshot: SnapshotLister | None = None
    #: the generation of the SchedulingProfile this framework was built from
    generation: int | None = None
    #: the scheduler's random source (set by the scheduler; seeded in simulations)
    rng: random.Random = field(default_factory=random.Random)
    #: the cluster's PodDisruptionBudgets (the scheduler's store, shared by its profiles)
    disruption_budgets: DisruptionBudgets = field(default_factory=DisruptionBudgets)
    #: the cluster objects besides pods and nodes (the scheduler's stores, shared by its profiles)
    objects: ClusterListers = field(default_factory=NoObjects)
    #: the feature gates in force (the scheduler's; without one, kube-scheduler v1.37.2's defaults)
    feature_gates: FeatureGates = DEFAULT_GATES
    #: scheduler extenders, in calling order (``framework.extenders``); with any, the cycle awaits I/O
    extenders: list[HTTPExtender] = field(default_factory=list)
    #: a shadow profile never binds: it judges the bindings other schedulers make (``shadow``)
    shadow: bool = False
    #: whether the scheduler still holds a pod, by uid (set by the scheduler; without one, every pod)
    pod_known: Callable[[str], bool] = field(default=lambda uid: True)
    #: the pods of each PodGroup the scheduler knows (set by the scheduler; without one, none)
    group_members: GroupMembers = field(default_factory=NoMembers)
    #: moves pods waiting in the queue to its active heap (set by the scheduler; without one, a no-op)
    activate_pods: Callable[[Iterable[PodInfo]], None] = field(default=lambda pods: None)
    #: opportunistic batching's state (``batch``): None while the gate is off
    batch: OpportunisticBatch | None = None
    #: the pod group cycle's plugins (GenericWorkload; ``pod_group_points`` runs them)
    placement_feasible: list[PlacementFeasiblePlugin] = field(default_factory=list)
    pod_group_post_filter: list[PodGroupPostFilterPlugin] = field(default_factory=list)
    #: the Workload API's PodGroups and their pods' states (set by the scheduler; without one, none)
    pod_groups: PodGroupManager = field(default_factory=NoPodGroups)
    #: where plugins report what preemption did (the scheduler's; without one, nobody listens)
    recorder: Recorder = field(default_factory=Recorder)
    #: snapshot nodes with their nominated pods added, by node name (``_with_nominated``)
    _nominated_copies: dict[str, tuple[int, list[PodInfo], NodeInfo]] = field(
        default_factory=dict, init=False, repr=False
    )

    # -- Handle ----------------------------------------------------------------------------------------
    def snapshot(self) -> SnapshotLister:
        assert self.current_snapshot is not None, "no scheduling cycle is running"
        return self.current_snapshot

    def pod_exists(self, pod: PodInfo) -> bool:
        return self.pod_known(pod.uid)

    def pdbs(self) -> Sequence[DisruptionBudget]:
        return self.disruption_budgets.list()

    def activate(self, pods: Iterable[PodInfo]) -> None:
        self.activate_pods(pods)

    # -- queue -----------------------------------------------------------------------------------------
    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        for plugin in self.pre_enqueue:
            try:
                status = plugin.pre_enqueue(pod)
            except Exception as e:
                return _call_error(plugin, "PreEnqueue", e)
            if status is not None and not status.is_success:
                return status.with_plugin(plugin.name)
        return None

    def events_to_register(self) -> list[tuple[str, ClusterEvent, HintFn | None]]:
        """(plugin, event, hint) for every plugin that can reject pods and says what may help them."""
        out = []
        for name, plugin in self.plugins.items():
            if isinstance(plugin, EnqueueExtensions):
                for item in plugin.events_to_register():
                    out.append((name, item.event, item.hint))
        if self.extenders:  # extenders say nothing of what helps: any event may (upstream's default)
            out.append((EXTENDER_NAME, ClusterEvent(Resource.WILDCARD, Action.all(), "ExtenderAny"), None))
        return out

    # -- pre-filter and filter -------------------------------------------------------------------------
    def run_pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """Runs the pre-filter plugins as ``RunPreFilterPlugins`` (``framework/runtime/framework.go``) does;
        returns the merged result, the status and the plugins whose results restricted the nodes.

        An ``Unschedulable`` status does not stop the run: the later plugins still prepare their cycle
        state, which preemption's dry run needs (kubernetes#119770). The last such status is returned
        unless something ends the run first: ``UnschedulableAndUnresolvable`` (preemption cannot help;
        returned with no plugin list), any other code (an error naming the plugin), or results whose
        intersection is empty (``UnschedulableAndUnresolvable`` naming no plugin, with the list).
        """
        result: PreFilterResult | None = None
        with_nodes: list[str] = []
        rejected: Status | None = None
        for plugin in self.pre_filter:
            try:
                plugin_result, status = plugin.pre_filter(state, pod, nodes)
            except Exception as e:
                return None, _call_error(plugin, "PreFilter", e), []
            if status is not None and status.code == Code.SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            if status is not None and not status.is_success:
                status = status.with_plugin(plugin.name)
                if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return None, status, []
                if status.code == Code.UNSCHEDULABLE:
                    rejected = status
                    continue
                message = f'running PreFilter plugin "{plugin.name}": {status.message()}'
                return None, error(message, plugin=plugin.name, cause=status.cause), []
            if plugin_result is not None and plugin_result.node_names is not None:
                with_nodes.append(plugin.name)
                result = plugin_result if result is None else result.merge(plugin_result)
                if not result.node_names:
                    names = sorted(with_nodes)  # upstream lists a sorted set
                    if len(names) == 1:
                        message = f"node(s) didn't satisfy plugin {names[0]}"
                    else:
                        message = f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                    return result, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,)), with_nodes
        return result, rejected, with_nodes

    def pre_filter_extensions(self, state: CycleState) -> list[tuple[str, PreFilterExtensions]]:
        """The pre-filter extensions this cycle runs: those of plugins whose pre-filter did not skip."""
        return _per_cycle(state, _EXTENSIONS_KEY, self.pre_filter, _extensions)

    def run_pre_filter_add_pod(
        self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo
    ) -> None:
        for name, ext in self.pre_filter_extensions(state):
            status = ext.add_pod(state, pod, to_add, node)
            if status is not None and not status.is_success:
                raise RuntimeError(f'running AddPod on PreFilter plugin "{name}": {status.message()}')

    def run_pre_filter_remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> None:
        for name, ext in self.pre_filter_extensions(state):
            status = ext.remove_pod(state, pod, to_remove, node)
            if status is not None and not status.is_success:
                raise RuntimeError(f'running RemovePod on PreFilter plugin "{name}": {status.message()}')

    def cycle_filters(self, state: CycleState) -> tuple[FilterPlugin, ...]:
        """The filters this cycle runs, in order: those of plugins whose pre-filter did not skip."""
        return _per_cycle(state, _CHAIN_KEY, self.filter, _unskipped)

    def run_filter_chain(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """The per-node filter chain: the first plugin that rejects decides the node's status."""
        return self.run_filters(self.cycle_filters(state), state, pod, node)

    @staticmethod
    def run_filters(
        plugins: Sequence[FilterPlugin],
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        skip: Collection[str] = (),
    ) -> Status | None:
        """Runs ``plugins``' per-node filters in order (but those in ``skip``); the first rejection,
        naming its plugin, or None."""
        for plugin in plugins:
            if skip and plugin.name in skip:
                continue
            try:
                status = plugin.filter(state, pod, node)
            except Exception as e:
                return _call_error(plugin, "Filter", e)
            if status is not None and not status.is_success:
                return status.with_plugin(plugin.name)
        return None

    def run_filter_with_nominated_pods(
        self,
        state: CycleState,
        pod: PodInfo,
        node: NodeInfo,
        without: Sequence[FilterPlugin] | None = None,
        *,
        shared: bool = False,
    ) -> Status | None:
        """Filters as if nominated pods of equal or higher priority were already on the node: the pod must
        fit with them and without them (upstream's ``RunFilterPluginsWithNominatedPods``). ``without``:
        the filters still to run for the pass without them, when the caller knows the others pass there
        (the vectorised filters that kept the node); the whole chain when None.

        When no pre-filter extension runs for this pod, adding the nominated pods leaves the cycle state
        as it is, so the pass with them reads ``state`` itself and a copy of the node with them added;
        ``shared``: ``node`` is the snapshot's, whose copy is kept for the next pod while neither the node
        nor its nominated pods change (filtering every pod against every nominated node otherwise copies
        each of those nodes once per pod)."""
        on_node = self.nominator.nominated_pods_for_node(node.name)
        nominated = (
            [p for p in on_node if p.uid != pod.uid and p.priority >= pod.priority] if on_node else on_node
        )
        if nominated:
            extensions = self.pre_filter_extensions(state)
            if extensions:
                state_with = state.clone()
                node_with = node.clone()
                for other in nominated:
                    node_with.add_pod(other)
                    self.run_pre_filter_add_pod(state_with, pod, other, node_with)
            else:
                state_with = state
                node_with = self._with_nominated(node, nominated) if shared else _with_pods(node, nominated)
            status = self.run_filter_chain(state_with, pod, node_with)
            if status is not None:
                return status
        if without is not None:
            return self.run_filters(without, state, pod, node)
        return self.run_filter_chain(state, pod, node)

    def _with_nominated(self, node: NodeInfo, nominated: list[PodInfo]) -> NodeInfo:
        """The snapshot's ``node`` with ``nominated`` added, made once per node generation and nominated
        set (same pods, same order, same objects)."""
        cache = self._nominated_copies
        held = cache.get(node.name)
        if held is not None:
            generation, pods, copy = held
            if generation == node.generation and pods == nominated:  # PodInfo compares by identity
                return copy
        copy = _with_pods(node, nominated)
        cache[node.name] = (node.generation, nominated, copy)
        return copy

    def find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: SnapshotLister,
        candidates: np.ndarray,
        num_to_find: int,
        nominated_nodes: frozenset[str] = frozenset(),
    ) -> FilterOutcome:
        """Filters ``candidates`` (rows, in examination order) until ``num_to_find`` nodes fit.

        Candidates are taken in chunks (the first a little larger than ``num_to_find``, then doubling), so
        a large cluster where most nodes fit is not filtered whole to find a few hundred. In each chunk,
        vectorised filters prune all rows at once; per-node filters (and nodes with nominated pods) then
        run in order over the survivors until enough feasible nodes are found, and over pruned nodes the
        per-node filters ahead of the pruning one. A filter's error (a vectorised one's per
        ``filter_errors``) ends filtering at the first node, in examination order, whose chain fails.
        """
        statuses = NodeStatuses(self, state, pod, snapshot)
        filters = self.cycle_filters(state)
        copies = self._nominated_copies
        if len(copies) > len(nominated_nodes) + NOMINATED_COPIES_SLACK:
            # copies of nodes no longer nominated (or gone): none can serve this pod, and each holds a
            # whole node and pods that may have been deleted since
            for name in [name for name in copies if name not in nominated_nodes]:
                del copies[name]
        found: list[np.ndarray] = []
        wanted, start, total = num_to_find, 0, len(candidates)
        step = max(num_to_find + num_to_find // 2, MIN_FILTER_CHUNK)
        while start < total:
            chunk = candidates[start : start + step]
            feasible, examined = self._filter_chunk(
                state, pod, snapshot, filters, chunk, wanted, nominated_nodes, statuses
            )
            found.append(feasible)
            wanted -= len(feasible)
            if wanted <= 0 or examined < 0:
                end = total if examined < 0 else start + examined
                return FilterOutcome(np.concatenate(found), end, statuses)
            start += len(chunk)
            step *= 2
        return FilterOutcome(np.concatenate(found) if found else candidates[:0], total, statuses)

    def _filter_chunk(
        self,
        state: CycleState,
        pod: PodInfo,
        snapshot: SnapshotLister,
        filters: Sequence[FilterPlugin],
        candidates: np.ndarray,
        num_to_find: int,
        nominated_nodes: frozenset[str],
        statuses: NodeStatuses,
    ) -> tuple[np.ndarray, int]:
        """Filters one chunk; adds the rejected nodes to ``statuses``. Returns the feasible rows and how
        many candidates were examined (-1 when a filter failed and filtering must stop)."""
        alive = np.ones(len(candidates), dtype=bool)
        #: for each candidate, the index in ``rejecters`` of the vectorised filter that rejected it
        rejected_by = np.full(len(candidates), -1, dtype=np.int32)
        rejecters: list[tuple[FilterPlugin, tuple[FilterPlugin, ...]]] = []
        #: candidates where a vectorised filter's per-node form fails (``filter_errors``): they get the
        #: per-node chain in their turn, and the first that errs there ends filtering
        erred: np.ndarray | None = None
        scalar: list[FilterPlugin] = []
        for plugin in filters:
            if isinstance(plugin, VectorFilter):
                idx = np.flatnonzero(alive)
                if not len(idx):
                    break
                table = snapshot.table
                try:
                    passed = plugin.filter_rows(state, pod, table, candidates[idx])
                    failing = None
                    if passed is not None and not passed.all():
                        failing = plugin.filter_errors(state, pod, table, candidates[idx[~passed]])
                except Exception as e:
                    failure = _call_error(plugin, "Filter", e)
                    infos = snapshot.node_infos
                    statuses.known.update((infos[r].name, failure) for r in candidates[idx].tolist())
                    statuses.error = failure
                    return candidates[:0], -1
                if passed is None:  # no vectorised form for this pod
                    scalar.append(plugin)
                    continue
                gone = idx[~passed]
                if len(gone):
                    alive[gone] = False
                    if failing is not None and failing.any():
                        if erred is None:
                            erred = np.zeros(len(candidates), dtype=bool)
                        erred[gone[failing]] = True
                        gone = gone[~failing]
                    rejected_by[gone] = len(rejecters)
                    rejecters.append((plugin, tuple(scalar)))
            else:
                scalar.append(plugin)
        if not scalar and not nominated_nodes and erred is None:
            positions = np.flatnonzero(alive)
            examined = len(candidates)
            if len(positions) >= num_to_find:
                positions = positions[:num_to_find]
                examined = int(positions[-1]) + 1
            statuses.pending += _rejected_groups(candidates, rejected_by, examined, rejecters)
            return candidates[positions], examined
        infos = snapshot.node_infos
        feasible: list[int] = []
        examined = len(candidates)
        visit = alive if erred is None else alive | erred
        # Nodes a vectorised filter pruned still get, in their turn, the per-node filters ahead of it in
        # the chain: one of them may fail there, which ends filtering as it does node by node.
        screened = [k for k, (_, earlier) in enumerate(rejecters) if earlier]
        if screened:
            visit = visit | np.isin(rejected_by, screened)
        for pos in np.flatnonzero(visit).tolist():
            row = int(candidates[pos])
            node = infos[row]
            by = int(rejected_by[pos])
            if by >= 0:  # pruned: its status is the earlier filters' rejection, else the pruning one's
                status = self.run_filters(rejecters[by][1], state, pod, node)
                if status is None:
                    continue
                rejected_by[pos] = -1
            elif node.name in nominated_nodes and (erred is None or not erred[pos]):
                # kept by the vectorised filters: without the nominated pods only the others can fail
                status = self.run_filter_with_nominated_pods(state, pod, node, scalar, shared=True)
            elif node.name in nominated_nodes:
                status = self.run_filter_with_nominated_pods(state, pod, node, shared=True)
            elif erred is not None and erred[pos]:  # the whole chain: an earlier filter may reject first
                status = self.run_filter_chain(state, pod, node)
            else:
                status = self.run_filters(scalar, state, pod, node)
            if status is None:
                feasible.append(row)
                if len(feasible) >= num_to_find:
                    examined = pos + 1
                    break
            else:
                statuses.known[node.name] = status
                if status.code == Code.ERROR:
                    statuses.error = status
                    return np.asarray(feasible, dtype=np.int64), -1
        # the pruned nodes left passed the filters ahead of the pruning one: only that one decides
        pruned: list[tuple[FilterPlugin, tuple[FilterPlugin, ...]]] = [(p, ()) for p, _ in rejecters]
        statuses.pending += _rejected_groups(candidates, rejected_by, examined, pruned)
        return np.asarray(feasible, dtype=np.int64), examined

    def run_post_filter(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        """Runs post-filter plugins until one makes the pod schedulable; returns the joined messages.
        Profiles with extenders need ``run_post_filter_async``."""
        return run_eagerly(self.run_post_filter_async(state, pod, node_statuses))

    async def run_post_filter_async(
        self, state: CycleState, pod: PodInfo, node_statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        """``run_post_filter``, awaiting the plugins' async forms (``AsyncPostFilter``)."""
        messages: list[str] = []
        rejector = ""
        # the last result a rejecting plugin returned (preemption clearing a stale nomination)
        kept: PostFilterResult | None = None
        for plugin in self.post_filter:
            try:
                if isinstance(plugin, AsyncPostFilter):
                    result, status = await plugin.post_filter_async(state, pod, node_statuses)
                else:
                    result, status = plugin.post_filter(state, pod, node_statuses)
            except Exception as e:
                return None, _call_error(plugin, "PostFilter", e)
            if status is None or status.is_success:  # its message, if any, ends the FitError's
                return result, Status(Code.SUCCESS, status.reasons if status else (), plugin.name)
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:  # no later plugin can help either
                return result, status.with_plugin(plugin.name)
            if status.code == Code.ERROR:
                return None, status.with_plugin(plugin.name)
            if result is not None:
                kept = result
            if status.reasons:
                messages.append(status.message())
            rejector = rejector or plugin.name
        return kept, Status(Code.UNSCHEDULABLE, tuple(messages), rejector)

    # -- scoring ---------------------------------------------------------------------------------------
    def run_pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        for plugin in self.pre_score:
            try:
                status = plugin.pre_score(state, pod, nodes)
            except Exception as e:
                return _call_error(plugin, "PreScore", e)
            if status is None or status.is_success:
                continue
            if status.code == Code.SKIP:
                state.skip_score_plugins.add(plugin.name)
                continue
            return error(f'running PreScore plugin "{plugin.name}": {status.message()}', plugin=plugin.name)
        return None

    def run_score(
        self, state: CycleState, pod: PodInfo, nodes: NodeSet, explain: bool = False, keep_raw: bool = False
    ) -> tuple[np.ndarray, ScoreBreakdown | None, Status | None]:
        """Total weighted scores aligned with ``nodes``; a breakdown per plugin when ``explain``, or only
        the raw scores when ``keep_raw`` (what opportunistic batching renormalises later)."""
        total = np.zeros(len(nodes), dtype=np.int64)
        breakdown = ScoreBreakdown() if explain or keep_raw else None
        copy_raw = explain or keep_raw
        table = self.snapshot().table
        for plugin in self.score:
            if plugin.name in state.skip_score_plugins:
                continue
            try:
                if isinstance(plugin, VectorScore):
                    raw = np.asarray(plugin.score_rows(state, pod, table, nodes.rows), dtype=np.int64)
                else:
                    raw = np.fromiter(
                        (plugin.score(state, pod, node) for node in nodes), dtype=np.int64, count=len(nodes)
                    )
            except Exception as e:
                return total, breakdown, _call_error(plugin, "Score", e)
            scores = raw.copy() if copy_raw else raw
            weighted, status = self._normalize_and_weigh(plugin, state, pod, scores)
            if status is not None:
                return total, breakdown, status
            total += weighted
            if breakdown is not None:
                breakdown.raw[plugin.name] = raw
                if explain:
                    breakdown.normalized[plugin.name] = scores
                    breakdown.weighted[plugin.name] = weighted
        return total, breakdown, None

    def _normalize_and_weigh(
        self, plugin: ScorePlugin, state: CycleState, pod: PodInfo, scores: np.ndarray
    ) -> tuple[np.ndarray, Status | None]:
        """``scores`` normalised in place (when the plugin normalises), checked to lie in [0, 100], and
        multiplied by the plugin's weight."""
        try:
            if plugin.has_normalize:
                status = plugin.normalize_score(state, pod, scores)
                if status is not None and not status.is_success:
                    message = f'running Normalize on Score plugins: plugin "{plugin.name}" failed with: '
                    return scores, error(message + status.message(), plugin=plugin.name)
        except Exception as e:
            return scores, _call_error(plugin, "Score", e)
        if len(scores) and (scores.min() < MIN_NODE_SCORE or scores.max() > MAX_NODE_SCORE):
            bad = int(scores.max() if scores.max() > MAX_NODE_SCORE else scores.min())
            return scores, error(
                "applying score defaultWeights on Score plugins: "
                f'plugin "{plugin.name}" returns an invalid score {bad}, it should in the range of '
                f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
                plugin=plugin.name,
            )
        return scores * self.score_weights[plugin.name], None

    def run_raw_score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> dict[str, int] | Status:
        """The raw scores of one node by every score plugin not skipped (upstream's
        ``RunRawScorePlugins``), or the error of the first plugin that failed."""
        out: dict[str, int] = {}
        for plugin in self.score:
            if plugin.name in state.skip_score_plugins:
                continue
            try:
                out[plugin.name] = int(plugin.score(state, pod, node))
            except Exception as e:
                return error(f'plugin "{plugin.name}" failed with: {e}', plugin=plugin.name, cause=e)
        return out

    def normalize_scores(
        self, state: CycleState, pod: PodInfo, raw: Mapping[str, np.ndarray], count: int
    ) -> tuple[np.ndarray, Status | None]:
        """Total weighted scores of ``count`` nodes from their raw scores by plugin (a plugin missing from
        ``raw`` scored 0 everywhere), normalised as ``run_score`` does (upstream's ``NormalizeScores``)."""
        total = np.zeros(count, dtype=np.int64)
        for plugin in self.score:
            if plugin.name in state.skip_score_plugins:
                continue
            given = raw.get(plugin.name)
            scores = np.zeros(count, dtype=np.int64) if given is None else np.array(given, dtype=np.int64)
            weighted, status = self._normalize_and_weigh(plugin, state, pod, scores)
            if status is not None:
                return total, status
            total += weighted
        return total, None

    # -- reserve and permit ----------------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.reserve:
            try:
                status = plugin.reserve(state, pod, node_name)
            except Exception as e:
                return _call_error(plugin, "Reserve", e)
            if status is not None and not status.is_success:
                if status.is_rejection:
                    return status.with_plugin(plugin.name)
                return error(
                    f'running Reserve plugin "{plugin.name}": {status.message()}', plugin=plugin.name
                )
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in reversed(self.reserve):
            try:
                plugin.unreserve(state, pod, node_name)
            except Exception:  # unreserve must not fail; one plugin's bug must not skip the others
                continue

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        timeouts: dict[str, float] = {}
        for plugin in self.permit:
            try:
                status, timeout = plugin.permit(state, pod, node_name)
            except Exception as e:
                return _call_error(plugin, "Permit", e)
            if status is None or status.is_success:
                continue
            if status.is_rejection:
                return status.with_plugin(plugin.name)
            if status.code == Code.WAIT:
                timeouts[plugin.name] = min(max(timeout, 0.0), MAX_PERMIT_TIMEOUT)
                continue
            return error(f'running Permit plugin "{plugin.name}": {status.message()}', plugin=plugin.name)
        if timeouts:
            self.waiting_pods.add(WaitingPod(pod, timeouts, self.clock))
            return Status(Code.WAIT, (), next(iter(timeouts)))
        return None

    def reject_waiting_pods(self, message: str) -> int:
        """Rejects every pod waiting at Permit, all at once (a gang's members fail, are unreserved and
        requeue together), each by the first plugin it still waits for; returns how many."""
        waiting = self.waiting_pods.all()
        for pod in waiting:
            pending = pod.pending_plugins()
            pod.reject(pending[0] if pending else "", message)
        return len(waiting)

    def will_wait_on_permit(self, pod: PodInfo) -> bool:
        return self.waiting_pods.get(pod.uid) is not None

    async def wait_on_permit(self, pod: PodInfo) -> Status | None:
        """The pod's Permit verdict: None (allowed), a rejection as the rejecting plugin gave it, or an
        error (a preempted pod) worded as upstream's ``WaitOnPermit`` words it."""
        waiting = self.waiting_pods.get(pod.uid)
        if waiting is None:
            return None
        try:
            status = await waiting.wait()
        finally:
            self.waiting_pods.remove(pod.uid)
        if status is None or status.is_success or status.is_rejection:
            return status
        return error(f"waiting on permit for pod: {status.message()}", plugin=status.plugin)

    # -- binding cycle ---------------------------------------------------------------------------------
    def run_pre_bind_pre_flights(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """None when some pre-bind plugin has work for the pod, Skip when none has, or an error (upstream's
        ``RunPreBindPreFlights``). Records which pre-binds to skip and which may run in parallel."""
        result: Status | None = SKIP
        skip: set[str] = set()
        parallel: set[str] = set()
        for plugin in self.pre_bind:
            try:
                flight, status = plugin.pre_bind_pre_flight(state, pod, node_name)
            except Exception as e:
                return error(f'running PreBindPreFlight "{plugin.name}": {e}', cause=e)
            if flight is not None and flight.allow_parallel:
                parallel.add(plugin.name)
            code = Code.SUCCESS if status is None else status.code
            if code == Code.ERROR:
                assert status is not None
                return error(
                    f'running PreBindPreFlight "{plugin.name}": {status.message()}', cause=status.cause
                )
            if code == Code.SUCCESS:
                result = None
            elif code == Code.SKIP:
                skip.add(plugin.name)
            else:
                return error(
                    f'PreBindPreFlight {plugin.name} returned "{code.label}", which is unsupported. It is '
                    "supposed to return Success, Skip, or Error status"
                )
        state.write(_PRE_FLIGHT, _PreFlight(skip, parallel))
        return result

    async def run_pre_bind(
        self, state: CycleState, pod: PodInfo, node_name: str, in_pre_bind: PodInPreBind | None = None
    ) -> Status | None:
        """Runs the pre-bind plugins the pre-flights did not skip, in order; consecutive plugins whose
        pre-flight allowed it run together, and the first failure among them cancels the others. With
        ``in_pre_bind``, cancelling it stops the plugin running then (upstream cancels its context)."""
        flight = state.get(_PRE_FLIGHT)
        for group in _pre_bind_groups(self.pre_bind, flight):
            if len(group) == 1:
                status = await self._pre_bind_cancellable(group[0], state, pod, node_name, in_pre_bind)
            else:
                status = await self._pre_bind_together(group, state, pod, node_name, in_pre_bind)
            if status is not None:
                return status
        return None

    async def _pre_bind_together(
        self,
        group: list[PreBindPlugin],
        state: CycleState,
        pod: PodInfo,
        node_name: str,
        in_pre_bind: PodInPreBind | None,
    ) -> Status | None:
        tasks = [
            asyncio.ensure_future(self._pre_bind_cancellable(p, state, pod, node_name, in_pre_bind))
            for p in group
        ]
        try:
            pending: set[asyncio.Future[Status | None]] = set(tasks)
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:  # the first failure, in plugin order among those done together
                    if task in done and task.result() is not None:
                        return task.result()
            return None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _pre_bind_cancellable(
        self,
        plugin: PreBindPlugin,
        state: CycleState,
        pod: PodInfo,
        node_name: str,
        in_pre_bind: PodInPreBind | None,
    ) -> Status | None:
        if in_pre_bind is None:
            return await self._pre_bind_one(plugin, state, pod, node_name)
        task = asyncio.ensure_future(self._pre_bind_one(plugin, state, pod, node_name))
        cancelled = asyncio.ensure_future(in_pre_bind.wait_cancelled())
        try:
            await asyncio.wait((task, cancelled), return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                # a plugin with nothing to wait for ends in its first step, as upstream's ends without
                # looking at its cancelled context; one waiting for I/O is stopped
                await asyncio.sleep(0)
        finally:
            cancelled.cancel()
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if task.cancelled():  # the plugin saw its context cancelled, and says so with the cause
            return _call_error(plugin, "PreBind", Exception(in_pre_bind.message))
        return task.result()

    async def _pre_bind_one(
        self, plugin: PreBindPlugin, state: CycleState, pod: PodInfo, node_name: str
    ) -> Status | None:
        try:
            status = await plugin.pre_bind(state, pod, node_name)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            return _call_error(plugin, "PreBind", e)
        if status is None or status.is_success or status.code == Code.SKIP:
            return None
        if status.is_rejection:
            return status.with_plugin(plugin.name)
        return error(
            f'running PreBind plugin "{plugin.name}": {status.message()}',
            plugin=plugin.name,
            cause=status.cause,
        )

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """An interested bind extender binds the pod instead of the bind plugins (kube-scheduler's
        precedence); else the first bind plugin that does not skip."""
        if self.extenders:
            bound, status = await extenders_binding(self.extenders, pod, node_name)
            if bound:
                if status is None:
                    observe = getattr(self.client, "bound_by_extender", None)
                    if observe is not None:
                        observe(pod, node_name)
                return status
        for plugin in self.bind:
            try:
                status = await plugin.bind(state, pod, node_name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                return _call_error(plugin, "Bind", e)
            if status is not None and status.code == Code.SKIP:
                continue
            if status is not None and not status.is_success:
                return status.with_plugin(plugin.name)
            return None
        return Status(Code.SKIP, ("no bind plugin bound the pod",))

    async def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self.post_bind:
            try:
                await plugin.post_bind(state, pod, node_name)
            except Exception:  # informational: a failing post-bind does not undo the binding
                continue

    def describe(self) -> dict[str, Any]:
        """The effective configuration, by extension point (for status and logs)."""
        points: dict[str, list[Any]] = {
            "preEnqueue": [p.name for p in self.pre_enqueue],
            "queueSort": [self.queue_sort.name],
            "preFilter": [p.name for p in self.pre_filter],
            "filter": [p.name for p in self.filter],
            "postFilter": [p.name for p in self.post_filter],
            "preScore": [p.name for p in self.pre_score],
            "score": [{"name": p.name, "weight": self.score_weights[p.name]} for p in self.score],
            "reserve": [p.name for p in self.reserve],
            "permit": [p.name for p in self.permit],
            "preBind": [p.name for p in self.pre_bind],
            "bind": [p.name for p in self.bind],
            "postBind": [p.name for p in self.post_bind],
        }
        return {k: v for k, v in points.items() if v}
