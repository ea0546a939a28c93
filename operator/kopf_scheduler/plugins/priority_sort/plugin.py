"""PrioritySort: higher priority first, then the earlier queue timestamp (``queuesort/priority_sort.go``)."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import QueueSortPlugin
from kopf_scheduler.framework.pod_info import QueuedPodInfo
from kopf_scheduler.plugins import names

NAME = names.PRIORITY_SORT


class PrioritySort(QueueSortPlugin):
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        if a.pod.priority != b.pod.priority:
            return a.pod.priority > b.pod.priority
        return a.timestamp < b.timestamp

    def sort_key(self, qp: QueuedPodInfo) -> Any:
        return (-qp.pod.priority, qp.timestamp)


def new(args: NoArgs, handle: Handle) -> PrioritySort:
    return PrioritySort()
