"""DefaultBinder: POST the pod's ``binding`` subresource (``defaultbinder/default_binder.go``)."""

from __future__ import annotations

from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import BindPlugin
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status, error
from kopf_scheduler.plugins import names

NAME = names.DEFAULT_BINDER


class DefaultBinder(BindPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        try:
            await self.handle.client.bind(pod, node_name)
        except APIError as e:
            return error(str(e), plugin=NAME, cause=e)
        return None


def new(args: NoArgs, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle)
