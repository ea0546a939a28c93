"""Why a pod did not fit: ``FitError`` and its message, assembled exactly as kube-scheduler's
``FitError.Error`` does (``0/N nodes are available: ...``; reasons counted per node and sorted as
strings; the pre-filter message instead of the histogram when pre-filter rejected; the post-filter
message appended)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kopf_scheduler.framework.interface import NodeStatusMap
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status

NO_NODE_AVAILABLE = "0/{} nodes are available"
#: kube-scheduler truncates event messages to this many characters.
EVENT_MESSAGE_LIMIT = 1024


@dataclass(slots=True)
class Diagnosis:
    node_statuses: NodeStatusMap | None = None
    #: the status of every node not in ``node_statuses`` (pre-filter rejection or result)
    absent_status: Status | None = None
    pre_filter_message: str = ""
    post_filter_message: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    #: post-filter plugins' victims etc. for reporting
    notes: list[str] = field(default_factory=list)


def verdict_counts(statuses: NodeStatusMap) -> list[tuple[Status, int]]:
    """Each distinct verdict in ``statuses`` and how many nodes have it (the map's own ``verdict_counts``
    when it keeps them: ``NodeStatuses`` counts once per cycle, not once per reader)."""
    counted = getattr(statuses, "verdict_counts", None)
    if counted is not None:
        return counted()  # type: ignore[no-any-return]
    return count_verdicts([status for _, status in statuses.items()])


def count_verdicts(values: Sequence[Status]) -> list[tuple[Status, int]]:
    """Nodes rejected alike share one status object (vectorised filters, ``Status.with_plugin``), so
    thousands of verdicts are counted by identity first and only the few distinct objects are compared
    by value."""
    objects = dict(zip(map(id, values), values, strict=True))
    return merge_counts((objects[key], count) for key, count in Counter(map(id, values)).items())


def merge_counts(pairs: Iterable[tuple[Status, int]]) -> list[tuple[Status, int]]:
    """Verdicts and their counts, the counts of verdicts equal by value (distinct objects) added up."""
    merged: dict[Status, int] = {}
    for status, count in pairs:
        merged[status] = merged.get(status, 0) + count
    return list(merged.items())


class FitError(Exception):
    def __init__(self, pod: PodInfo, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def histogram(self) -> Counter[str]:
        reasons: Counter[str] = Counter()
        statuses = self.diagnosis.node_statuses
        counted = 0
        if statuses is not None:
            for status, nodes in verdict_counts(statuses):
                counted += nodes
                for reason in status.reasons:
                    reasons[reason] += nodes
        absent = self.diagnosis.absent_status
        if absent is not None and counted < self.num_all_nodes:
            for reason in absent.reasons:
                reasons[reason] += self.num_all_nodes - counted
        return reasons

    def __str__(self) -> str:
        return fit_error_message(self)


def fit_error_message(err: FitError) -> str:
    message = NO_NODE_AVAILABLE.format(err.num_all_nodes) + ":"
    if err.diagnosis.pre_filter_message:
        message += f" {err.diagnosis.pre_filter_message}."
    else:
        counted = sorted(f"{count} {reason}" for reason, count in err.histogram().items())
        if counted:
            message += f" {', '.join(counted)}."
    if err.diagnosis.post_filter_message:
        message += f" {err.diagnosis.post_filter_message}"
    return message


def truncate_event_message(message: str) -> str:
    if len(message) <= EVENT_MESSAGE_LIMIT:
        return message
    suffix = " ..."
    return message[: EVENT_MESSAGE_LIMIT - len(suffix)] + suffix
