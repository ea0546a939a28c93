"""PodTopologySpread pre-filter and filter: hard (``DoNotSchedule``) constraints (``filtering.go``).

Pre-filter counts, per constraint and topology value, the matching pods on the nodes that count: nodes
holding every constraint's topology key and passing the constraint's inclusion policies. Every value seen
on such a node is a domain, even with no matching pod. Filter then accepts a node when, for every
constraint, ``count(node's domain) + selfMatch - globalMin <= maxSkew``, where selfMatch is 1 when the
incoming pod matches the constraint's selector and globalMin is the smallest count over domains, or 0 when
there are fewer domains than ``minDomains``. A node without a constraint's key is unresolvable.

The global minimum is recomputed exactly after each add/remove-pod update; upstream tracks two
"critical paths" instead, which give the same minimum whenever the updates touch a single domain (as
nominated pods and preemption victims of one node do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable, unschedulable
from kopf_scheduler.plugins.pod_topology_spread import counting
from kopf_scheduler.plugins.pod_topology_spread.constraints import (
    Constraint,
    has_all_keys,
    node_included,
    required_affinity,
)

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"
#: the minimum before any domain is known (upstream's ``math.MaxInt32`` critical path).
NO_DOMAIN_MIN = 2**31 - 1


@dataclass(slots=True)
class Spread:
    """One hard constraint's counts, indexed by the slots of its topology key's values."""

    constraint: Constraint
    #: topology value -> slot; shared with the table memo until a value unknown to the table is added
    index: dict[str, int]
    #: per table row: slot of the node's value, -1 when the node lacks the key
    dom: np.ndarray
    counts: np.ndarray
    #: slots that are domains (a counted node has the value)
    present: np.ndarray
    domains_num: int
    min_match: int
    self_match: int

    def global_min(self) -> int:
        return 0 if self.domains_num < self.constraint.min_domains else self.min_match

    def refresh_min(self) -> None:
        self.min_match = int(self.counts[self.present].min()) if self.domains_num else NO_DOMAIN_MIN

    def slot_for(self, value: str) -> int:
        slot = self.index.get(value)
        if slot is None:  # a node the table does not know (only in simulations on foreign nodes)
            slot = len(self.counts)
            self.index = {**self.index, value: slot}
            self.counts = np.append(self.counts, 0)
            self.present = np.append(self.present, False)
        return slot

    def count_of(self, value: str) -> int:
        slot = self.index.get(value)
        return 0 if slot is None else int(self.counts[slot])

    def clone(self) -> Spread:
        return Spread(
            self.constraint,
            self.index,
            self.dom,
            self.counts.copy(),
            self.present.copy(),
            self.domains_num,
            self.min_match,
            self.self_match,
        )


@dataclass(slots=True)
class PreFilterState:
    spreads: list[Spread]

    def clone(self) -> PreFilterState:
        return PreFilterState([s.clone() for s in self.spreads])

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        return tuple(s.constraint for s in self.spreads)


def compute(
    pod: PodInfo, constraints: tuple[Constraint, ...], table: NodeTable, infos: Sequence[NodeInfo]
) -> PreFilterState:
    """``calPreFilterState`` over every node of the snapshot."""
    keys = tuple(sorted({c.topology_key for c in constraints}))
    base = counting.keys_mask(table, infos, keys)
    required = required_affinity(pod)
    spreads = []
    for c in constraints:
        eligible = base
        if c.honor_affinity and not required.trivial:
            eligible = eligible & counting.affinity_mask(table, infos, required)
        if c.honor_taints:
            eligible = eligible & counting.taints_mask(table, infos, pod.tolerations)
        domains = counting.domains(table, infos, c.topology_key)
        size = len(domains.values)
        everywhere = bool(eligible.all())
        dom = domains.dom if everywhere else domains.dom[eligible]
        present = np.bincount(dom, minlength=size) > 0
        if c.counts_nothing:
            counts = np.zeros(size, dtype=np.int64)
        else:
            per_node = counting.match_counts(table, infos, pod.namespace, c.selector)
            weights = per_node if everywhere else per_node[eligible]
            counts = np.bincount(dom, weights=weights, minlength=size).astype(np.int64)
        spread = Spread(
            c,
            domains.index,
            domains.dom,
            counts,
            present,
            int(present.sum()),
            0,
            1 if c.matches(pod.labels) else 0,
        )
        spread.refresh_min()
        spreads.append(spread)
    return PreFilterState(spreads)


def update_with_pod(
    state: PreFilterState, pod: PodInfo, changed: PodInfo, node: NodeInfo, delta: int
) -> None:
    """``updateWithPod``: ``changed`` was added to (delta 1) or removed from (delta -1) ``node``."""
    if changed.namespace != pod.namespace or node.node is None:
        return
    if not has_all_keys(node.labels, state.constraints):
        return
    required = required_affinity(pod)
    for spread in state.spreads:
        c = spread.constraint
        if not c.matches(changed.labels) or not node_included(c, pod, required, node):
            continue
        slot = spread.slot_for(node.labels[c.topology_key])
        spread.counts[slot] += delta
        if not spread.present[slot]:
            spread.present[slot] = True
            spread.domains_num += 1
        spread.refresh_min()


def filter_node(state: PreFilterState, node: NodeInfo) -> Status | None:
    for spread in state.spreads:
        c = spread.constraint
        value = node.labels.get(c.topology_key)
        if value is None:
            return unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
        skew = spread.count_of(value) + spread.self_match - spread.global_min()
        if skew > c.max_skew:
            return unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
    return None


def filter_rows(state: PreFilterState, rows: np.ndarray) -> np.ndarray:
    ok = np.ones(len(rows), dtype=bool)
    for spread in state.spreads:
        dom = spread.dom[rows]
        has_key = dom >= 0
        if not len(spread.counts):
            return np.zeros(len(rows), dtype=bool)
        limit = spread.constraint.max_skew - spread.self_match + spread.global_min()
        ok &= has_key & (spread.counts[np.where(has_key, dom, 0)] <= limit)
    return ok
