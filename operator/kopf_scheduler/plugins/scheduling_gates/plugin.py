"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of the active queue
(``schedulinggates/scheduling_gates.go``)."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.events import Action, ClusterEvent, ClusterEventWithHint, QueueingHint, Resource
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import EnqueueExtensions, PreEnqueuePlugin
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, unresolvable
from kopf_scheduler.plugins import names

NAME = names.SCHEDULING_GATES


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        if not pod.scheduling_gates:
            return None
        return unresolvable(f"waiting for scheduling gates: [{' '.join(pod.scheduling_gates)}]")

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(Resource.TARGET_POD, Action.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                self._gates_removed,
            )
        ]

    @staticmethod
    def _gates_removed(pod: PodInfo, old: Any, new: Any) -> QueueingHint:
        """``isSchedulableAfterUpdateTargetPodSchedulingGatesEliminated``: the pod's last gate is gone."""
        return QueueingHint.QUEUE


def new(args: NoArgs, handle: Handle) -> SchedulingGates:
    return SchedulingGates()
