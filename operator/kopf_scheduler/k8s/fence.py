"""Fencing: the scheduler's writes to pods (bindings, preemption's status patches and DELETEs, the
``PodScheduled`` condition) are sent only while this instance holds the leader Lease with time left.

``FencedRest`` stands in for the ``RestClient`` of the binder, the pod status writer and preemption: a
read passes, a write asks ``may_write`` (``LeaderElector.is_leader``: leading, and within the renew
deadline of the last successful renewal on the monotonic clock) and raises ``FencedWrite`` instead of
sending when the answer is no. The elector's own Lease writes and the events do not go through it.

The question is asked at the wire: on a ready connection, right before the request's bytes are written
(``HttpPool``'s ``before_write``), so a write that waited for a pool slot, a new connection's TLS
handshake or a credential rebuild after a 401 is judged when it leaves, and each resend is judged again.
It is also asked once before the request starts, so a write already refused waits for nothing. What the
fence cannot stop is a write that left in time and is delayed on the network: the Lease's slack (its
duration less the renew deadline, 5 s with kube-scheduler's timings) is what covers that.
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
        if method == "GET":
            return await self.rest.request(method, path, body, **options)

        def at_the_wire() -> None:
            if not self.may_write():
                self.refused += 1
                raise FencedWrite(method, path)

        at_the_wire()
        return await self.rest.request(method, path, body, before_write=at_the_wire, **options)
