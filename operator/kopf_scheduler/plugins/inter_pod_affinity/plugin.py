"""InterPodAffinity: required pod affinity and anti-affinity as a filter, preferred ones (and existing
pods' terms) as a score (upstream ``interpodaffinity/plugin.go``); the work is in ``filtering.py`` and
``scoring.py``, the per-node aggregates in ``index.py``.

Namespace selectors are resolved through ``namespaces`` (a ``NamespaceLister``): the scheduler's Namespace
store (``handle.objects``), upstream's namespace informer. The incoming pod's terms pick the namespaces
whose labels their selector matches once per cycle; existing pods' terms are matched against the incoming
pod's namespace labels. A namespace the store does not know has no labels.

Beyond upstream (which registers no Namespace event and leaves such pods to the five-minute flush), a
Namespace added or relabelled requeues the pods whose required terms select namespaces by label, and the
pods of that namespace (existing pods' terms may select it now or no longer). It changes when a pod is
retried, never what is decided.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import NAMESPACES, Namespace
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins.inter_pod_affinity import filtering, scoring
from kopf_scheduler.plugins.inter_pod_affinity.args import Args
from kopf_scheduler.plugins.inter_pod_affinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    PreFilterState,
)
from kopf_scheduler.plugins.inter_pod_affinity.index import ClusterIndex
from kopf_scheduler.plugins.inter_pod_affinity.scoring import PreScoreState
from kopf_scheduler.plugins.inter_pod_affinity.terms import (
    AffinityTerm,
    ListedNamespaces,
    NamespaceLister,
    NoNamespaces,
    matches_all,
    merge_all,
    merge_weighted,
    pod_terms,
)
from kopf_scheduler.plugins.inter_pod_affinity.topology import Lookup, topology_index

NAME = names.INTER_POD_AFFINITY
_FILTER_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
_SCORE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)
_REJECTIONS = {
    filtering.AFFINITY: unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    filtering.ANTI_AFFINITY: unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    filtering.EXISTING_ANTI_AFFINITY: unschedulable(ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
}


def _not_found(key: StateKey[Any]) -> str:
    return f"error reading {key.name!r} from cycleState: not found".replace("'", '"')


class InterPodAffinity(PreFilterPlugin, PreFilterExtensions, FilterPlugin, VectorFilter, PreScorePlugin,
                       ScorePlugin, VectorScore, EnqueueExtensions, SignPlugin):  # fmt: skip
    name = NAME
    has_normalize = True

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's labels (other pods' terms may select it), none with
        ``ignorePreferredTermsOfExistingPods``; a pod with pod affinity or anti-affinity is not signed."""
        if pod.has_pod_affinity:
            return Status(Code.UNSCHEDULABLE, ("pods with InterPodAffinity are not signable",))
        if self.args.ignore_preferred_terms_of_existing_pods:
            return ()
        return [(signers.LABELS, pod.labels)]

    def __init__(self, args: Args, handle: Handle, namespaces: NamespaceLister | None = None) -> None:
        self.args = args
        self.handle = handle
        #: upstream's namespace lister; replaceable (see the module docstring)
        self.namespaces: NamespaceLister = namespaces if namespaces is not None else NoNamespaces()
        self._index = ClusterIndex()

    def _sync(self) -> Lookup:
        snapshot = self.handle.snapshot()
        table, infos = snapshot.table, snapshot.node_infos
        self._index.sync(snapshot)
        return lambda key: topology_index(table, infos, key)

    def _namespace_labels(self, pod: PodInfo) -> Mapping[str, str]:
        return self.namespaces.labels(pod.namespace) or {}

    # -- pre-filter ------------------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = pod_terms(pod)
        if terms.error:
            return None, unresolvable(f"parsing pod: {terms.error}")
        lookup = self._sync()
        affinity = merge_all(terms.required_affinity, self.namespaces)
        anti = merge_all(terms.required_anti, self.namespaces)
        found = PreFilterState(affinity, anti, self._namespace_labels(pod), lookup)
        filtering.compute(found, pod, self._index)
        if found.existing_counts.empty() and not terms.has_required:
            return None, SKIP
        state.write(_FILTER_KEY, found)
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        found = state.get(_FILTER_KEY)
        if found is None:
            return error(_not_found(_FILTER_KEY))
        found.update_with_pod(pod, to_add, node, 1)
        return None

    def remove_pod(
        self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        found = state.get(_FILTER_KEY)
        if found is None:
            return error(_not_found(_FILTER_KEY))
        found.update_with_pod(pod, to_remove, node, -1)
        return None

    # -- filter ----------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        found = state.get(_FILTER_KEY)
        if found is None:
            return error(_not_found(_FILTER_KEY))
        return _REJECTIONS.get(filtering.check_node(found, node.labels))

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        found = state.get(_FILTER_KEY)
        if found is None:
            raise RuntimeError(_not_found(_FILTER_KEY))
        return filtering.check_rows(found, rows)

    # -- score -----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        if not len(nodes):
            return SKIP
        has_preferred = scoring.has_preferred_terms(pod)
        if self.args.ignore_preferred_terms_of_existing_pods and not has_preferred:
            return SKIP
        terms = pod_terms(pod)
        if terms.error:
            return error(f"failed to parse pod: {terms.error}")
        lookup = self._sync()
        found = PreScoreState(lookup)
        contributed = scoring.compute(
            found,
            pod,
            merge_weighted(terms.preferred_affinity, self.namespaces) if has_preferred else (),
            merge_weighted(terms.preferred_anti, self.namespaces) if has_preferred else (),
            self._namespace_labels(pod),
            self._index,
            self.args.hard_pod_affinity_weight,
        )
        if not contributed:
            return SKIP
        state.write(_SCORE_KEY, found)
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return scoring.score_node(self._score_state(state), node)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        return scoring.score_rows(self._score_state(state), rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        if state.get(_SCORE_KEY) is None:
            return error(_not_found(_SCORE_KEY).replace("error reading", "failed to read"))
        scoring.normalize(scores)
        return None

    @staticmethod
    def _score_state(state: CycleState) -> PreScoreState:
        found = state.get(_SCORE_KEY)
        if found is None:
            raise RuntimeError(_not_found(_SCORE_KEY).replace("error reading", "failed to read"))
        return found

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.ASSIGNED_POD, Action.ADD | Action.UPDATE_POD_LABEL | Action.DELETE),
                _assigned_pod_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_LABEL), _target_pod_relabelled
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL), _node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.NAMESPACE, Action.ADD | Action.UPDATE), _namespace_changed
            ),
        ]


def _matches_any(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    """Upstream's ``podMatchesAnyAffinityTerms`` (matched without namespace labels, as upstream)."""
    return any(t.matches(pod, None) for t in terms)


def _assigned_pod_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Upstream's ``isSchedulableAfterAssignedPodChange``: an added pod matching all the affinity terms;
    an updated one that starts matching them, or stops matching an anti-affinity term; a deleted one
    that matched an anti-affinity term, or whose own anti-affinity matched the pending pod. Pods neither
    bound nor nominated never count."""
    for other in (new, old):
        if isinstance(other, PodInfo) and not other.node_name and not other.nominated_node_name:
            return QueueingHint.SKIP
    terms = pod_terms(pod)
    if terms.error:
        return QueueingHint.QUEUE
    affinity, anti = terms.required_affinity, terms.required_anti
    if isinstance(new, PodInfo) and isinstance(old, PodInfo):
        if not matches_all(affinity, old) and matches_all(affinity, new):
            return QueueingHint.QUEUE
        if _matches_any(anti, old) and not _matches_any(anti, new):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP
    if isinstance(new, PodInfo):
        return QueueingHint.QUEUE if matches_all(affinity, new) else QueueingHint.SKIP
    if not isinstance(old, PodInfo):
        return QueueingHint.QUEUE
    if _matches_any(anti, old):
        return QueueingHint.QUEUE
    theirs = pod_terms(old)
    if theirs.error or _matches_any(theirs.required_anti, pod):
        return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _target_pod_relabelled(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Upstream's ``isSchedulableAfterTargetPodUpdateLabel``: the pending pod's new labels may match its
    own affinity terms, or no longer match existing pods' anti-affinity."""
    return QueueingHint.QUEUE


def _node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Upstream's ``isSchedulableAfterNodeChange``: a node gaining (or changing) an affinity term's key, or a
    node added, or losing (or changing) an anti-affinity term's key."""
    if not isinstance(new, NodeInfo):
        return QueueingHint.QUEUE
    terms = pod_terms(pod)
    if terms.error:
        return QueueingHint.QUEUE
    before = old.labels if isinstance(old, NodeInfo) else None
    after = new.labels
    for term in terms.required_affinity:
        value = after.get(term.topology_key)
        if value is not None and (before is None or before.get(term.topology_key) != value):
            return QueueingHint.QUEUE
    for term in terms.required_anti:
        if before is None:
            return QueueingHint.QUEUE
        value = before.get(term.topology_key)
        if value is not None and after.get(term.topology_key) != value:
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def _namespace_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """A namespace added or relabelled: it may now (or no longer) be picked by the pod's required terms,
    or, being the pod's own, by existing pods' terms."""
    if not isinstance(new, Namespace):
        return QueueingHint.SKIP
    before = old.labels if isinstance(old, Namespace) else {}
    if before == new.labels:
        return QueueingHint.SKIP
    if new.name == pod.namespace:
        return QueueingHint.QUEUE
    terms = pod_terms(pod)
    if terms.error:
        return QueueingHint.QUEUE
    for term in (*terms.required_affinity, *terms.required_anti):
        selector = term.namespace_selector
        if (
            selector is not None
            and not selector.empty
            and selector.matches(before) != selector.matches(new.labels)
        ):
            return QueueingHint.QUEUE
    return QueueingHint.SKIP


def new(args: Args, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args, handle, ListedNamespaces(handle.objects.of(NAMESPACES)))
