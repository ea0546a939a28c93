"""PreFilter, its add/remove-pod extensions and Filter (upstream ``interpodaffinity/filtering.go``).

PreFilter counts, per topology pair: existing pods matching ALL the incoming pod's required affinity
terms (each term counts at its own key), existing pods matching each of its required anti-affinity terms,
and existing pods whose required anti-affinity terms match the incoming pod. Filter then checks, in this
order and with these codes:

1. required affinity: every term's key on the node, and a matching pod in the node's domain of every
   term - unless no pod anywhere matches and the pod matches its own terms (the first pod of a group with
   affinity to itself). UnschedulableAndUnresolvable.
2. required anti-affinity: no matching pod in the node's domain of any term. Unschedulable.
3. existing pods' anti-affinity: no pod whose term matches the incoming pod in any of the node's domains.
   Unschedulable.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.inter_pod_affinity.index import ClusterIndex
from kopf_scheduler.plugins.inter_pod_affinity.terms import AffinityTerm, matcher, matches_all, pod_terms
from kopf_scheduler.plugins.inter_pod_affinity.topology import Lookup, TopologyCounts

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

#: which check rejected a node (0: none)
PASSED, AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY = 0, 1, 2, 3


class PreFilterState:
    """What Filter reads; the counts change under add/remove-pod, hence ``clone``."""

    __slots__ = ("affinity", "affinity_counts", "anti", "anti_counts", "existing_counts", "namespace_labels",
                 "self_match")  # fmt: skip

    def __init__(
        self,
        affinity: tuple[AffinityTerm, ...],
        anti: tuple[AffinityTerm, ...],
        namespace_labels: Mapping[str, str],
        lookup: Lookup,
    ) -> None:
        #: the incoming pod's required terms, namespace selectors merged
        self.affinity = affinity
        self.anti = anti
        self.namespace_labels = namespace_labels
        self.affinity_counts = TopologyCounts(lookup)
        self.anti_counts = TopologyCounts(lookup)
        self.existing_counts = TopologyCounts(lookup)
        self.self_match = False

    def clone(self) -> PreFilterState:
        new = PreFilterState(self.affinity, self.anti, self.namespace_labels, self.affinity_counts.lookup)
        new.affinity_counts = self.affinity_counts.clone()
        new.anti_counts = self.anti_counts.clone()
        new.existing_counts = self.existing_counts.clone()
        new.self_match = self.self_match
        return new

    def update_with_pod(self, incoming: PodInfo, other: PodInfo, node: NodeInfo, multiplier: int) -> None:
        """Accounts for ``other`` added to (1) or removed from (-1) ``node``."""
        labels = node.labels
        for term in pod_terms(other).required_anti:
            value = labels.get(term.topology_key)
            if value is not None and term.matches(incoming, self.namespace_labels):
                self.existing_counts.add(term.topology_key, value, multiplier)
        if matches_all(self.affinity, other):
            for term in self.affinity:
                value = labels.get(term.topology_key)
                if value is not None:
                    self.affinity_counts.add(term.topology_key, value, multiplier)
        for term in self.anti:
            value = labels.get(term.topology_key)
            if value is not None and term.matches(other, None):
                self.anti_counts.add(term.topology_key, value, multiplier)


def compute(state: PreFilterState, incoming: PodInfo, index: ClusterIndex) -> None:
    """Fills the counts from the cluster index (synced with the snapshot)."""
    for term, rows in index.anti.items():
        if term.matches(incoming, state.namespace_labels):
            state.existing_counts.add_rows(term.topology_key, rows)
    affinity = state.affinity
    if affinity:
        rows = index.match_counts(("all", affinity), lambda pod: matches_all(affinity, pod))
        for term in affinity:
            state.affinity_counts.add_rows(term.topology_key, rows)
        state.self_match = matches_all(affinity, incoming)
    for term in state.anti:
        rows = index.match_counts(("one", term), matcher(term))
        state.anti_counts.add_rows(term.topology_key, rows)


def check_node(state: PreFilterState, labels: Mapping[str, str]) -> int:
    """Which check rejects the node with these labels (``PASSED`` when none does)."""
    if state.affinity:
        pods_exist = True
        for term in state.affinity:
            count = state.affinity_counts.get_for(term.topology_key, labels)
            if count is None:
                return AFFINITY
            if count <= 0:
                pods_exist = False
        if not pods_exist and not (state.affinity_counts.empty() and state.self_match):
            return AFFINITY
    if not state.anti_counts.empty():
        for term in state.anti:
            count = state.anti_counts.get_for(term.topology_key, labels)
            if count is not None and count > 0:
                return ANTI_AFFINITY
    existing = state.existing_counts
    if not existing.empty():
        for key in existing.pair_keys():
            count = existing.get_for(key, labels)
            if count is not None and count > 0:
                return EXISTING_ANTI_AFFINITY
    return PASSED


def check_rows(state: PreFilterState, rows: np.ndarray) -> np.ndarray:
    """``check_node(...) == PASSED`` for every table row in ``rows``."""
    ok = np.ones(len(rows), dtype=bool)
    if state.affinity:
        counts = state.affinity_counts
        for term in state.affinity:
            ok &= counts.row_has(term.topology_key, rows)
        if not (counts.empty() and state.self_match):
            for term in state.affinity:
                ok &= counts.row_counts(term.topology_key, rows) > 0
    if not state.anti_counts.empty():
        for term in state.anti:
            ok &= state.anti_counts.row_counts(term.topology_key, rows) <= 0
    existing = state.existing_counts
    if not existing.empty():
        for key in existing.arrays:
            ok &= existing.row_counts(key, rows) <= 0
    return ok
