"""NodeAffinity: a pod fits only on nodes matching its ``nodeSelector``, its required node affinity and
the profile's ``addedAffinity``; nodes score by the weights of the preferred terms they match
(``nodeaffinity/node_affinity.go`` upstream).

Pre-filter skips pods with nothing to check, and narrows filtering to the node names required terms pick
with ``matchFields`` on ``metadata.name`` (every term must name nodes, else any node may match).
Filter checks ``addedAffinity`` first (``didn't match scheduler-enforced node affinity``), then the pod's
own selector and affinity; both rejections are unresolvable. Pre-score skips pods without preferred
terms when the profile adds none; normalisation scales raw sums to 0..100.

The vectorised forms memoise, per selector, a mask (filter) or a weight sum (score) over all rows of the
``NodeTable``; node labels change rarely, so pods of one template pay the label matching once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
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
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import NodeSelector, PreferredTerm, RequiredNodeAffinity
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._helpers import default_normalize_score
from kopf_scheduler.plugins.node_affinity.args import PREFERRED, REQUIRED, Args
from kopf_scheduler.plugins.node_affinity.terms import (
    PodNodeAffinity,
    parse_node_selector,
    parse_preferred_terms,
    pod_node_affinity,
)

NAME = names.NODE_AFFINITY
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: RequiredNodeAffinity

    def clone(self) -> _PreFilterState:  # not changed by added or removed pods
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: tuple[PreferredTerm, ...]

    def clone(self) -> _PreScoreState:
        return self


_PRE_FILTER_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
_PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def _pod_data(pod: PodInfo) -> PodNodeAffinity:
    data = pod.extra.get(NAME)
    if data is None:
        data = pod.extra[NAME] = pod_node_affinity(pod.spec)
    return data  # type: ignore[no-any-return]


def _weights(terms: Sequence[PreferredTerm], labels: Mapping[str, str], node_name: str) -> int:
    return sum(t.weight for t in terms if t.term.matches(labels, node_name))


def _matcher(selector: NodeSelector | RequiredNodeAffinity) -> Callable[[NodeInfo], bool]:
    return lambda info: selector.matches(info.labels, info.name)


class NodeAffinity(PreFilterPlugin, FilterPlugin, VectorFilter, PreScorePlugin, ScorePlugin, VectorScore,
                   EnqueueExtensions, SignPlugin):  # fmt: skip
    name = NAME
    has_normalize = True

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's node affinity and node selector."""
        return [
            (signers.NODE_AFFINITY, signers.node_affinity(pod)),
            (signers.NODE_SELECTOR, pod.spec.get("nodeSelector")),
        ]

    def __init__(self, args: Args, handle: Handle) -> None:
        self.handle = handle
        added = args.added_affinity or {}
        required = added.get(REQUIRED)
        self.added_required: NodeSelector | None = None if required is None else parse_node_selector(required)
        preferred = added.get(PREFERRED) or []
        self.added_preferred: tuple[PreferredTerm, ...] | None = None
        if preferred:
            terms, problem = parse_preferred_terms(preferred)
            if problem:
                raise ValueError(f"parsing addedAffinity.{PREFERRED}: {problem}")
            self.added_preferred = terms

    # -- pre-filter and filter -------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        data = _pod_data(pod)
        if not data.has_required and self.added_required is None and not data.required.node_selector:
            return None, SKIP
        state.write(_PRE_FILTER_KEY, _PreFilterState(data.required))
        if data.node_names is None:
            return None, None
        if not data.node_names:  # every term names nodes, and each term's names contradict each other
            return None, unresolvable(ERR_REASON_CONFLICT)
        return PreFilterResult(data.node_names), None

    def _required(self, state: CycleState, pod: PodInfo) -> RequiredNodeAffinity:
        found = state.get(_PRE_FILTER_KEY)
        return found.required if found is not None else _pod_data(pod).required

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if self.added_required is not None and not self.added_required.matches(node.labels, node.name):
            return unresolvable(ERR_REASON_ENFORCED)
        if not self._required(state, pod).matches(node.labels, node.name):
            return unresolvable(ERR_REASON_POD)
        return None

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        ok: np.ndarray | None = None
        added = self.added_required
        if added is not None:
            ok = self._memo(table, ("added", added), _matcher(added), bool)[rows]
        required = self._required(state, pod)
        if not required.trivial:
            mask = self._memo(table, ("required", required), _matcher(required), bool)
            ok = mask[rows] if ok is None else ok & mask[rows]
        return np.ones(len(rows), dtype=bool) if ok is None else ok

    def _memo(self, table: NodeTable, key: Any, of_node: Callable[[NodeInfo], Any], dtype: Any) -> np.ndarray:
        """A per-row array of ``of_node`` over the snapshot's nodes, kept until labels change."""

        def build() -> np.ndarray:
            infos = self.handle.snapshot().node_infos
            if len(infos) != table.size:
                raise RuntimeError("the node table does not describe the current snapshot")
            return np.fromiter((of_node(info) for info in infos), dtype=dtype, count=len(infos))

        values: np.ndarray = table.memo((NAME, *key), build)
        return values

    # -- score -----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        data = _pod_data(pod)
        if data.preferred_error is not None:
            return error(f"parsing {PREFERRED}: {data.preferred_error}")
        if data.preferred is None and self.added_preferred is None:
            return SKIP  # nothing to score for this pod
        state.write(_PRE_SCORE_KEY, _PreScoreState(data.preferred or ()))
        return None

    def _preferred(self, state: CycleState, pod: PodInfo) -> tuple[PreferredTerm, ...]:
        found = state.get(_PRE_SCORE_KEY)
        if found is not None:
            return found.preferred
        data = _pod_data(pod)  # pre-score disabled in the profile
        if data.preferred_error is not None:
            raise ValueError(f"parsing {PREFERRED}: {data.preferred_error}")
        return data.preferred or ()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        total = _weights(self.added_preferred or (), node.labels, node.name)
        return total + _weights(self._preferred(state, pod), node.labels, node.name)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        total = np.zeros(len(rows), dtype=np.int64)
        for terms in (self.added_preferred, self._preferred(state, pod)):
            if terms:
                total += self._weight_sums(table, terms)[rows]
        return total

    def _weight_sums(self, table: NodeTable, terms: tuple[PreferredTerm, ...]) -> np.ndarray:
        return self._memo(table, ("preferred", terms), lambda i: _weights(terms, i.labels, i.name), np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        event = ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL)
        return [ClusterEventWithHint(event, self.node_changed)]

    def node_changed(self, pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """Queue when a node now matches the added and the pod's affinity and did not before (or is new)."""
        if not isinstance(new, NodeInfo) or (old is not None and not isinstance(old, NodeInfo)):
            return QueueingHint.QUEUE
        if self.added_required is not None and not self.added_required.matches(new.labels, new.name):
            return QueueingHint.SKIP
        required = _pod_data(pod).required
        if not required.matches(new.labels, new.name):
            return QueueingHint.SKIP
        if old is None:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP if required.matches(old.labels, old.name) else QueueingHint.QUEUE


def new(args: Args, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args, handle)
