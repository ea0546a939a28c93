"""TaintToleration: a pod fits only on nodes whose NoSchedule and NoExecute taints it tolerates, and
prefers nodes with fewer PreferNoSchedule taints it does not tolerate
(``tainttoleration/taint_toleration.go`` upstream).

Filter rejects (unresolvable) on the first untolerated NoSchedule/NoExecute taint. Score counts the
PreferNoSchedule taints that no toleration with effect PreferNoSchedule (or no effect) tolerates;
normalisation reverses it, so the node with the most such taints scores 0 and untainted nodes 100.

The vectorised forms group the snapshot's nodes by their taint list (memoised on the ``NodeTable`` until
labels or taints change) and judge each distinct list once per toleration set, so untainted nodes cost
nothing and tainted ones cost one check per distinct taint list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState, StateKey
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    EnqueueExtensions,
    FilterPlugin,
    NodeSet,
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
from kopf_scheduler.framework.status import Status, unresolvable
from kopf_scheduler.framework.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    first_untolerated,
    tolerated,
)
from kopf_scheduler.plugins import names
from kopf_scheduler.plugins._helpers import default_normalize_score

NAME = names.TAINT_TOLERATION
#: The filter's rejection reason as kube-scheduler v1.37.2 words it. Up to v1.34.1 the text named the
#: first untolerated taint (``node(s) had untolerated taint {KEY: VALUE}``); PR #134740 (v1.35) replaced
#: it with this generic text because taint keys and values may be sensitive, and its cherry-pick to
#: release-1.34 (PR #135023, merged November 2025) carries the generic text into the later v1.34 patches
#: (v1.34.10 words it so too).
ERR_REASON_UNTOLERATED = "node(s) had untolerated taint(s)"

#: the taint effects the filter enforces (upstream's ``DoNotScheduleTaintsFilterFunc``).
DO_NOT_SCHEDULE = frozenset({NO_SCHEDULE, NO_EXECUTE})

_MEMO_GROUPS = (NAME, "taint-groups")


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    """The pod's tolerations that can tolerate PreferNoSchedule taints (effect PreferNoSchedule or empty)."""

    tolerations: tuple[Toleration, ...]

    def clone(self) -> _PreScoreState:
        return self


_PRE_SCORE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)


def prefer_no_schedule_tolerations(tolerations: tuple[Toleration, ...]) -> tuple[Toleration, ...]:
    # An empty effect tolerates every effect, PreferNoSchedule included.
    return tuple(t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE)


def count_intolerable(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> int:
    return sum(1 for t in taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(t, tolerations))


@dataclass(frozen=True, slots=True)
class _TaintGroups:
    """Rows grouped by taint list: ``group[row]`` indexes ``taints``; untainted rows hold ``len(taints)``."""

    group: np.ndarray
    taints: tuple[tuple[Taint, ...], ...]


class TaintToleration(FilterPlugin, VectorFilter, PreScorePlugin, ScorePlugin, VectorScore,
                      EnqueueExtensions, SignPlugin):  # fmt: skip
    name = NAME
    has_normalize = True

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The pod's tolerations."""
        return [(signers.TOLERATIONS, signers.tolerations(pod))]

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    # -- filter ----------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if first_untolerated(node.taints, pod.tolerations, DO_NOT_SCHEDULE) is None:
            return None
        return unresolvable(ERR_REASON_UNTOLERATED)

    def filter_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        groups = self._groups(table)
        if not groups.taints:
            return np.ones(len(rows), dtype=bool)

        def build() -> np.ndarray:
            ok = [first_untolerated(t, pod.tolerations, DO_NOT_SCHEDULE) is None for t in groups.taints]
            return np.array([*ok, True], dtype=bool)

        verdicts: np.ndarray = table.memo((NAME, "filter", pod.tolerations), build)
        return verdicts[groups.group[rows]]

    def _groups(self, table: NodeTable) -> _TaintGroups:
        def build() -> _TaintGroups:
            infos = self.handle.snapshot().node_infos
            if len(infos) != table.size:
                raise RuntimeError("the node table does not describe the current snapshot")
            index: dict[tuple[Taint, ...], int] = {}
            group = np.empty(table.size, dtype=np.int64)
            for row, info in enumerate(infos):
                group[row] = index.setdefault(info.taints, len(index)) if info.taints else -1
            group[group < 0] = len(index)
            return _TaintGroups(group, tuple(index))

        groups: _TaintGroups = table.memo(_MEMO_GROUPS, build)
        return groups

    # -- score -----------------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeSet) -> Status | None:
        # Upstream never skips here (a Skip was proposed in PR #118324 and declined).
        state.write(_PRE_SCORE_KEY, _PreScoreState(prefer_no_schedule_tolerations(pod.tolerations)))
        return None

    def _tolerations(self, state: CycleState, pod: PodInfo) -> tuple[Toleration, ...]:
        found = state.get(_PRE_SCORE_KEY)
        if found is None:  # pre-score disabled in the profile
            return prefer_no_schedule_tolerations(pod.tolerations)
        return found.tolerations

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return count_intolerable(node.taints, self._tolerations(state, pod))

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        groups = self._groups(table)
        if not groups.taints:
            return np.zeros(len(rows), dtype=np.int64)
        tolerations = self._tolerations(state, pod)

        def build() -> np.ndarray:
            counts = [count_intolerable(t, tolerations) for t in groups.taints]
            return np.array([*counts, 0], dtype=np.int64)

        counts: np.ndarray = table.memo((NAME, "score", tolerations), build)
        return counts[groups.group[rows]]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    # -- requeueing ------------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_TAINT), node_changed
            ),
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_TOLERATION), toleration_added
            ),
        ]


def _untolerated(node: NodeInfo, pod: PodInfo) -> bool:
    return first_untolerated(node.taints, pod.tolerations, DO_NOT_SCHEDULE) is not None


def node_changed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """Queue when the node went from untolerated (or absent) to tolerated."""
    if not isinstance(new, NodeInfo) or (old is not None and not isinstance(old, NodeInfo)):
        return QueueingHint.QUEUE
    was_untolerated = old is None or _untolerated(old, pod)
    is_untolerated = _untolerated(new, pod)
    return QueueingHint.QUEUE if was_untolerated and not is_untolerated else QueueingHint.SKIP


def toleration_added(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
    """``isSchedulableAfterTargetPodTolerationChange``: the rejected pod got a new toleration."""
    return QueueingHint.QUEUE


def new(args: NoArgs, handle: Handle) -> TaintToleration:
    return TaintToleration(handle)
