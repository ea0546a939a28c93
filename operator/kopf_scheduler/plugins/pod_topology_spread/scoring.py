"""PodTopologySpread pre-score, score and normalize: soft (``ScheduleAnyway``) constraints
(upstream's ``scoring.go``).

Pre-score takes the domains of each constraint from the nodes being scored (nodes lacking a topology key
are ignored, unless the constraints are the system defaults, where a missing key reads as the value "")
and counts the matching pods of all nodes of those domains that pass the inclusion policies. Each
constraint weighs ``ln(#domains + 2)`` (for the hostname key, #domains is the number of scored nodes
not ignored). A node's raw score is ``round(Σ count·weight + maxSkew - 1)`` over the constraints whose
key it has; the hostname key counts the node's own matching pods. Normalize maps the raw scores to
``100·(max + min - raw) / max`` (100 for all when max is 0) and ignored nodes to 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kopf_scheduler.framework.interface import MAX_NODE_SCORE
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.pod_topology_spread import counting
from kopf_scheduler.plugins.pod_topology_spread.constraints import (
    LABEL_HOSTNAME,
    Constraint,
    count_matching,
    has_all_keys,
    required_affinity,
)


@dataclass(slots=True)
class _Soft:
    constraint: Constraint
    weight: float
    #: per slot of the key's values: matching pods in the domain (None for the hostname key)
    counts: np.ndarray | None
    domains: counting.Domains


@dataclass(slots=True)
class PreScoreState:
    softs: list[_Soft]
    #: whether nodes lacking a topology key are ignored (not with the system default constraints)
    require_all: bool
    keys: tuple[str, ...]
    #: aligned with the scored nodes: True for nodes that get 0 after normalisation
    ignored: np.ndarray
    namespace: str

    def clone(self) -> PreScoreState:
        return self  # read-only after pre-score


def normalizing_weight(size: int) -> float:
    """``topologyNormalizingWeight``: the weight of a topology with ``size`` domains."""
    return math.log(size + 2)


def _round(value: float) -> int:
    """``math.Round`` for non-negative values: halves away from zero."""
    floor = math.floor(value)
    return int(floor + 1 if value - floor >= 0.5 else floor)


def compute(
    pod: PodInfo,
    constraints: tuple[Constraint, ...],
    require_all: bool,
    table: NodeTable,
    infos: Sequence[NodeInfo],
    rows: np.ndarray,
) -> PreScoreState:
    """``initPreScoreState`` over the scored ``rows``, then the counts over every node of the snapshot."""
    keys = tuple(sorted({c.topology_key for c in constraints}))
    all_keys = counting.keys_mask(table, infos, keys)
    ignored = ~all_keys[rows] if require_all else np.zeros(len(rows), dtype=bool)
    candidates = rows[~ignored]
    base = all_keys if require_all else np.ones(len(infos), dtype=bool)
    required = required_affinity(pod)
    softs = []
    for c in constraints:
        domains = counting.domains(table, infos, c.topology_key)
        if c.topology_key == LABEL_HOSTNAME:
            softs.append(_Soft(c, normalizing_weight(len(candidates)), None, domains))
            continue
        size = len(domains.values)
        candidate = np.zeros(size, dtype=bool)
        candidate[domains.dom_or_empty[candidates]] = True
        eligible = base
        if c.honor_affinity and not required.trivial:
            eligible = eligible & counting.affinity_mask(table, infos, required)
        if c.honor_taints:
            eligible = eligible & counting.taints_mask(table, infos, pod.tolerations)
        if c.counts_nothing or not size:
            counts = np.zeros(size, dtype=np.int64)
        else:
            per_node = counting.match_counts(table, infos, pod.namespace, c.selector)
            counts = np.bincount(
                domains.dom_or_empty[eligible], weights=per_node[eligible], minlength=size
            ).astype(np.int64)
            counts[~candidate] = 0  # upstream counts only domains of scored nodes
        softs.append(_Soft(c, normalizing_weight(int(candidate.sum())), counts, domains))
    return PreScoreState(softs, require_all, keys, ignored, pod.namespace)


def score_node(state: PreScoreState, node: NodeInfo) -> int:
    if state.require_all and not has_all_keys(node.labels, (s.constraint for s in state.softs)):
        return 0
    total = 0.0
    for soft in state.softs:
        c = soft.constraint
        value = node.labels.get(c.topology_key)
        if value is None:
            continue
        if soft.counts is None:
            count = count_matching(node.pods.values(), c.selector, state.namespace)
        else:
            slot = soft.domains.slot(value)
            count = 0 if slot is None else int(soft.counts[slot])
        total += float(count) * soft.weight + float(c.max_skew - 1)
    return _round(total)


def score_rows(
    state: PreScoreState, table: NodeTable, infos: Sequence[NodeInfo], rows: np.ndarray
) -> np.ndarray:
    total = np.zeros(len(rows), dtype=np.float64)
    for soft in state.softs:
        c = soft.constraint
        dom = soft.domains.dom[rows]
        has_key = dom >= 0
        if soft.counts is None:
            counts = counting.match_counts(table, infos, state.namespace, c.selector)[rows]
        elif not len(soft.counts):
            continue
        else:
            counts = soft.counts[np.where(has_key, dom, 0)]
        term = counts.astype(np.float64) * soft.weight + float(c.max_skew - 1)
        total = total + np.where(has_key, term, 0.0)
    floor = np.floor(total)
    out = np.where(total - floor >= 0.5, floor + 1, floor).astype(np.int64)
    if state.require_all:
        out[~counting.keys_mask(table, infos, state.keys)[rows]] = 0
    return out


def normalize(state: PreScoreState, scores: np.ndarray) -> None:
    valid = ~state.ignored
    if not valid.any():
        scores[:] = 0
        return
    highest = max(int(scores[valid].max()), 0)
    lowest = int(scores[valid].min())
    if highest == 0:
        scores[valid] = MAX_NODE_SCORE
    else:
        scores[valid] = MAX_NODE_SCORE * (highest + lowest - scores[valid]) // highest
    scores[~valid] = 0
