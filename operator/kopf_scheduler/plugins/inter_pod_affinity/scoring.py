"""PreScore, Score and NormalizeScore (upstream ``interpodaffinity/scoring.go``).

Per topology pair, PreScore sums:
- +weight for each existing pod matching one of the incoming pod's preferred affinity terms, -weight for
  its preferred anti-affinity terms (only when the pod has preferred terms: then every pod is looked at);
- for existing pods with affinity: +hardPodAffinityWeight for each of their required affinity terms the
  incoming pod matches (when the weight is > 0), +weight / -weight for each of their preferred affinity /
  anti-affinity terms it matches (matched with the incoming pod's namespace labels).
A node's raw score is the sum over its labels of those pair sums; NormalizeScore maps [min, max] linearly
onto [0, 100] (all 0 when min == max). PreScore returns Skip when nothing was summed, and, with
``ignorePreferredTermsOfExistingPods``, for pods without preferred terms.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kopf_scheduler.framework.interface import MAX_NODE_SCORE
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.inter_pod_affinity.index import (
    PREFERRED_AFFINITY,
    REQUIRED_AFFINITY,
    ClusterIndex,
)
from kopf_scheduler.plugins.inter_pod_affinity.terms import WeightedTerm, matcher
from kopf_scheduler.plugins.inter_pod_affinity.topology import Lookup, TopologyCounts

_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


class PreScoreState:
    __slots__ = ("sums",)

    def __init__(self, lookup: Lookup) -> None:
        #: per topology pair: the summed weights (upstream's ``topologyScore``)
        self.sums = TopologyCounts(lookup)

    def clone(self) -> PreScoreState:
        return self  # read-only after PreScore, as upstream


def has_preferred_terms(pod: PodInfo) -> bool:
    """Upstream's ``hasConstraints``: preferred affinity or anti-affinity terms in the spec."""
    affinity = pod.affinity
    return bool((affinity.get("podAffinity") or {}).get(_PREFERRED)) or bool(
        (affinity.get("podAntiAffinity") or {}).get(_PREFERRED)
    )


def compute(
    state: PreScoreState,
    incoming: PodInfo,
    preferred_affinity: tuple[WeightedTerm, ...],
    preferred_anti: tuple[WeightedTerm, ...],
    namespace_labels: Mapping[str, str],
    index: ClusterIndex,
    hard_weight: int,
) -> bool:
    """Fills the sums; returns whether any term contributed (else the plugin skips scoring)."""
    sums = state.sums
    contributed = False
    for weighted, sign in [(w, 1) for w in preferred_affinity] + [(w, -1) for w in preferred_anti]:
        term = weighted.term
        rows = index.match_counts(("one", term), matcher(term))
        contributed |= sums.add_rows(term.topology_key, rows, sign * weighted.weight)
    for (kind, term, weight), rows in index.scoring.items():
        if kind == REQUIRED_AFFINITY:
            if hard_weight <= 0:
                continue
            factor = hard_weight
        else:
            factor = weight if kind == PREFERRED_AFFINITY else -weight
        if term.matches(incoming, namespace_labels):
            contributed |= sums.add_rows(term.topology_key, rows, factor)
    return contributed


def score_node(state: PreScoreState, node: NodeInfo) -> int:
    sums = state.sums
    total = 0
    for key in sums.arrays:
        count = sums.get_for(key, node.labels)
        if count is not None:
            total += count
    return total


def score_rows(state: PreScoreState, rows: np.ndarray) -> np.ndarray:
    total = np.zeros(len(rows), dtype=np.int64)
    for key in state.sums.arrays:
        total += state.sums.row_counts(key, rows)
    return total


def normalize(scores: np.ndarray) -> None:
    """``int(100 * (s - min) / (max - min))`` in float64 as upstream computes it; 0 when max == min."""
    if not len(scores):
        return
    low, high = int(scores.min()), int(scores.max())
    spread = high - low
    if spread <= 0:
        scores[:] = 0
        return
    scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(spread))
    scores[:] = scaled.astype(np.int64)
