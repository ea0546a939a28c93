"""Consulting extenders without holding the scheduling loop: a cycle replayed with the answers it needs.

kube-scheduler's one scheduling goroutine waits for every extender call, so one slow or hanging extender
delays every other profile's pods by up to its ``httpTimeout``. Here a cycle of a profile with extenders
runs synchronously in a ``Replay``: an extender call whose answer is recorded returns it at once (or
raises the error recorded for it); a call not made yet ends the cycle with ``ExtenderCallNeeded`` before
anything was assumed. The scheduler then makes the call in the background and tries the pod again, as
the same attempt, once the answer is in, against the cache as it is then (the in-tree plugins judge the
nodes afresh; an extender's answer is reused only for exactly the request it answered). Meanwhile the
loop schedules other profiles' pods. The calls a cycle needs come out one step at a time (filter, then
prioritize, then a preempt verb), so a cycle is tried once more per step.

``ExtenderCallNeeded`` derives from ``BaseException`` so that no ``except Exception`` on the way (a plugin
error turned into a status) mistakes it for a failure. The bind verb is outside the scheduling cycle
and is awaited by the binding cycle as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from kopf_scheduler.framework.extenders.transport import ExtenderError

#: rounds of background calls an attempt may take; later ones are awaited in the cycle
MAX_REPLAY_ROUNDS = 8

#: the replay of the cycle running now (None: extender calls are made and awaited as they come)
CURRENT: ContextVar[Replay | None] = ContextVar("extender_replay", default=None)


@dataclass(frozen=True)
class PendingCall:
    key: str
    post: Callable[[], Awaitable[bytes]]


class ExtenderCallNeeded(BaseException):
    """The replayed cycle needs these calls answered before it can go on."""

    def __init__(self, calls: list[PendingCall]) -> None:
        super().__init__(f"{len(calls)} extender call(s) to make")
        self.calls = calls


@dataclass
class Replay:
    """The extender answers of one pod's attempt, by request."""

    #: when the attempt started (its first try), for the attempt's duration
    started: float
    #: where its first try started filtering (``percentageOfNodesToScore``'s rotation): every try asks
    #: the extenders about the same nodes unless the cluster changed
    start_node_index: int = 0
    answers: dict[str, bytes | ExtenderError] = field(default_factory=dict)
    #: how many times a try of this attempt ended waiting for calls
    rounds: int = 0

    @staticmethod
    def key(url: str, verb: str, body: bytes) -> str:
        return hashlib.sha256(b"\0".join((url.encode(), verb.encode(), body))).hexdigest()

    def answer(self, key: str, post: Callable[[], Awaitable[bytes]]) -> bytes:
        """The recorded answer to the request ``key``; raises its recorded error, or
        ``ExtenderCallNeeded`` when the request was not made yet."""
        if key not in self.answers:
            raise ExtenderCallNeeded([PendingCall(key, post)])
        answer = self.answers[key]
        if isinstance(answer, ExtenderError):
            raise answer
        return answer

    async def fetch(self, call: PendingCall) -> None:
        """Makes ``call`` and records its answer or its error."""
        try:
            self.answers[call.key] = await call.post()
        except ExtenderError as e:
            self.answers[call.key] = e
