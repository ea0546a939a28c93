"""Fencing: the scheduler's writes to pods (bindings, preemption's status patches and DELETEs, the
``PodScheduled`` condition) are sent only while this instance holds the leader Lease with time left.

``FencedRest`` stands in for the ``RestClient`` of the binder, the pod status writer and preemption: a
read passes, a write first asks ``may_write`` (``LeaderElector.is_leader``: leading, and within the renew
deadline of the last successful renewal on the monotonic clock) and raises ``FencedWrite`` instead of
sending when the answer is no. The elector's own Lease writes and the events do not go through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.k8s.rest import Response, RestClient

NOT_LEADING = "not sent: this instance does not hold the leader Lease"


class FencedWrite(APIError):
    """A write not sent because this instance does not (or no longer) hold the Lease."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(0, f"{method} {path}: {NOT_LEADING}")


class FencedRest:
    """A ``RestClient`` whose writes are sent only while ``may_write()`` says so."""

    def __init__(self, rest: RestClient | Callable[[], RestClient], may_write: Callable[[], bool]) -> None:
        """``rest``: the client, or a function returning the one to use now (the owner's, replaceable)."""
        self._rest = rest
        self.may_write = may_write
        #: writes refused so far
        self.refused = 0

    @property
    def rest(self) -> RestClient:
        return self._rest if isinstance(self._rest, RestClient) else self._rest()

    def __getattr__(self, name: str) -> Any:  # stats, info, get_json, ...: the wrapped client's
        return getattr(self.rest, name)

    async def request(self, method: str, path: str, body: Any = None, **options: Any) -> Response:
        if method != "GET" and not self.may_write():
            self.refused += 1
            raise FencedWrite(method, path)
        return await self.rest.request(method, path, body, **options)
