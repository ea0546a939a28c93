"""A stand-in for ``RestClient``: records requests, answers from a script, can be held back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.k8s.rest import Response
from kopf_scheduler.k8s.stats import ClientStats


@dataclass
class Call:
    method: str
    path: str
    body: Any
    content_type: str


@dataclass
class FakeRest:
    answer: Callable[[Call], Response] = lambda call: Response(201 if call.method == "POST" else 200, b"{}")
    stats: ClientStats = field(default_factory=ClientStats)
    calls: list[Call] = field(default_factory=list)
    gate: asyncio.Event | None = None
    timeout: float = 10.0

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "", **_: Any
    ) -> Response:
        call = Call(method, path, body, content_type)
        self.calls.append(call)
        if self.gate is not None:
            await self.gate.wait()
        response = self.answer(call)
        self.stats.requests[(method, response.status)] += 1
        return response
