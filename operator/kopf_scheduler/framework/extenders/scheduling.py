"""Where extenders take part in a scheduling cycle, as kube-scheduler's ``schedule_one.go`` involves them:

- filter (``findNodesThatPassExtenders``): after the filter plugins, each interested filter extender in
  turn, over the nodes that passed the ones before it; stops when no node is left. A failed node gets
  ``Unschedulable`` with the extender's reason, a failed-and-unresolvable one ``UnschedulableAndUnresolvable``
  (which wins when a node is in both); these statuses name no plugin, and their reasons count in the
  FailedScheduling message like any filter's. A call that fails is skipped for an ``ignorable`` extender,
  else the cycle ends with the error.
- prioritize (``prioritizeNodes``): after the score plugins, every interested extender at once; each node
  score ``s`` adds ``s x weight x (MaxNodeScore / MaxExtenderPriority)`` to the node's total. A failed call
  only costs that extender's scores. Upstream multiplies and adds in int64 and wraps around; here an
  extender whose weighted score for a node exceeds ``MAX_WEIGHTED_EXTENDER_SCORE`` (either sign) fails
  like a call that failed, so a node's total (at most ``MAX_EXTENDERS`` such scores and the plugins')
  always fits an int64.
- bind (``extendersBinding``): the first extender that binds and is interested binds the pod instead of
  the bind plugins; an ignorable one that fails hands over to the next.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

import numpy as np

from kopf_scheduler.api.schema import SPEC_SCHEMA
from kopf_scheduler.framework.extenders.extender import HTTPExtender
from kopf_scheduler.framework.extenders.replay import CURRENT, ExtenderCallNeeded, PendingCall
from kopf_scheduler.framework.extenders.transport import ExtenderError
from kopf_scheduler.framework.extenders.wire import INT64_MAX, MAX_EXTENDER_PRIORITY
from kopf_scheduler.framework.interface import MAX_NODE_SCORE, SnapshotLister
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error, unresolvable, unschedulable

log = logging.getLogger("kopf_scheduler.extenders")

#: the name recorded among a pod's rejecting plugins when extenders filtered nodes out
#: (``framework.ExtenderName``): any cluster event may then help it
EXTENDER_NAME = "Extender"
#: an extender's score ``s`` counts ``s x weight x SCORE_SCALE``
SCORE_SCALE = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
#: a profile has at most this many extenders (``spec.extenders`` ``maxItems``)
MAX_EXTENDERS: int = SPEC_SCHEMA["properties"]["extenders"]["maxItems"]
#: the largest weighted score (either sign) one extender may give one node: every extender's and the
#: score plugins' together still fit an int64 node total
MAX_WEIGHTED_EXTENDER_SCORE = INT64_MAX // (2 * (MAX_EXTENDERS + 1))


class ExtenderFailure(Exception):
    """A non-ignorable extender failed: the scheduling attempt ends with this error status."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def has_filters(extenders: Sequence[HTTPExtender]) -> bool:
    return any(e.is_filter for e in extenders)


def has_prioritizers(extenders: Sequence[HTTPExtender]) -> bool:
    return any(e.is_prioritizer for e in extenders)


async def find_nodes_that_pass_extenders(
    extenders: Sequence[HTTPExtender],
    pod: PodInfo,
    rows: np.ndarray,
    snapshot: SnapshotLister,
    set_status: Callable[[str, Status], None],
) -> np.ndarray:
    """The rows (of ``snapshot``) among ``rows`` that every interested filter extender passes, in the
    last extender's order; ``set_status`` receives the rejected nodes' statuses. Raises
    ``ExtenderFailure``."""
    infos = snapshot.node_infos
    for extender in extenders:
        if not len(rows):
            break
        if not extender.is_interested(pod):
            continue
        nodes: list[NodeInfo] = [infos[r] for r in rows.tolist()]
        try:
            passed, failed, unresolvable_nodes = await extender.filter(pod, nodes)
        except ExtenderError as e:
            if extender.is_ignorable:
                log.info(
                    "skipping extender %s as it returned an error and is ignorable: %s", extender.name, e
                )
                continue
            raise ExtenderFailure(error(str(e), cause=e)) from e
        for name, reason in unresolvable_nodes.items():
            set_status(name, unresolvable(reason))
        for name, reason in failed.items():
            if name not in unresolvable_nodes:
                set_status(name, unschedulable(reason))
        found = [snapshot.index_of(name) for name in passed]
        missing = [name for name, row in zip(passed, found, strict=True) if row is None]
        if missing:  # kube-scheduler would schedule onto a node it does not know; refuse instead
            problem = ExtenderError(
                f"extender {extender.name} passed node(s) unknown to the scheduler: {missing}"
            )
            if extender.is_ignorable:
                log.info("skipping extender %s: %s", extender.name, problem)
                continue
            raise ExtenderFailure(error(str(problem), cause=problem))
        rows = np.asarray(found, dtype=np.int64)
    return rows


async def prioritize(
    extenders: Sequence[HTTPExtender], pod: PodInfo, nodes: Sequence[NodeInfo]
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """The extenders' combined scores aligned with ``nodes`` (int64), and per extender that answered its
    (raw, weighted) scores, for explanations."""
    total = np.zeros(len(nodes), dtype=np.int64)
    per_extender: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    interested = [e for e in extenders if e.is_interested(pod) and e.is_prioritizer]
    if not interested or not nodes:
        return total, per_extender
    answers = await _prioritize_all(interested, pod, nodes)
    positions: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        positions.setdefault(node.name, []).append(i)
    for extender, answer in zip(interested, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, Exception):
                raise answer
            log.debug(
                "extender %s failed to prioritize %s, no score from it: %s", extender.name, pod.key, answer
            )
            continue
        scores, weight = answer
        sums: dict[int, int] = {}  # Python ints: nothing wraps before the bound is checked
        for host, score in scores:
            for i in positions.get(host, ()):
                sums[i] = sums.get(i, 0) + score
        worst = max((abs(s) for s in sums.values()), default=0)
        if max(worst, 1) * abs(weight) * SCORE_SCALE > MAX_WEIGHTED_EXTENDER_SCORE:
            log.debug(
                "extender %s scored %s with %d x weight %d, beyond %d: no score from it",
                extender.name, pod.key, worst, weight, MAX_WEIGHTED_EXTENDER_SCORE,
            )  # fmt: skip
            continue
        raw = np.zeros(len(nodes), dtype=np.int64)
        for i, s in sums.items():
            raw[i] = s
        weighted = raw * weight * SCORE_SCALE
        total += weighted
        per_extender[extender.name] = (raw, weighted)
    return total, per_extender


async def _prioritize_all(
    interested: Sequence[HTTPExtender], pod: PodInfo, nodes: Sequence[NodeInfo]
) -> list[tuple[list[tuple[str, int]], int] | BaseException]:
    """Every interested extender's answer (or error), asked at once; in a replayed cycle one after the
    other without waiting (recorded answers), the calls still to make raised together."""
    if CURRENT.get() is None:
        return await asyncio.gather(*(e.prioritize(pod, nodes) for e in interested), return_exceptions=True)
    answers: list[tuple[list[tuple[str, int]], int] | BaseException] = []
    needed: list[PendingCall] = []
    for extender in interested:
        try:
            answers.append(await extender.prioritize(pod, nodes))
        except ExtenderCallNeeded as e:
            needed += e.calls
        except Exception as e:
            answers.append(e)
    if needed:
        raise ExtenderCallNeeded(needed)
    return answers


async def extenders_binding(
    extenders: Sequence[HTTPExtender], pod: PodInfo, node_name: str
) -> tuple[bool, Status | None]:
    """(whether an extender took the binding, its error status if it failed)."""
    for extender in extenders:
        if not extender.is_binder or not extender.is_interested(pod):
            continue
        try:
            await extender.bind(pod, node_name)
        except ExtenderError as e:
            if extender.is_ignorable:
                log.info(
                    "skipping extender %s in bind as it returned an error and is ignorable: %s",
                    extender.name,
                    e,
                )
                continue
            return True, error(str(e), cause=e)
        return True, None
    return False, None
