"""One binding against an API server that answers badly: 429 waits what ``Retry-After`` asks, an
ambiguous answer (none, 5xx) is resolved by reading the pod before anything is decided or sent again, a
409 on a pod that is still unbound is a failure to report (not a quiet conflict), and all attempts end
within the binder's deadline. Time is a fake clock: the waits are asserted, never slept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import binding
from kopf_scheduler.k8s.binding import Binder
from kopf_scheduler.k8s.rest import Response

POD = PodInfo({"metadata": {"name": "web", "namespace": "ns", "uid": "u1"}, "spec": {"containers": []}})
BINDING = "/api/v1/namespaces/ns/pods/web/binding"
READ = "/api/v1/namespaces/ns/pods/web"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(binding.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(binding.asyncio, "sleep", fake.sleep)
    yield fake


def pod_record(node: str | None = None, uid: str = "u1") -> Response:
    spec: dict[str, Any] = {"containers": []}
    if node:
        spec["nodeName"] = node
    return Response(200, json.dumps({"metadata": {"name": "web", "uid": uid}, "spec": spec}).encode())


def status(code: int, message: str = "", retry_after: float | None = None) -> Response:
    return Response(
        code, json.dumps({"kind": "Status", "message": message}).encode(), retry_after=retry_after
    )


def scripted(posts: list[Response], reads: list[Response] | None = None) -> FakeAPI:
    """Answers the binding POSTs and the pod reads in order; a request beyond its script fails the test."""
    return FakeAPI(strict=True).script("POST", BINDING, *posts).script("GET", READ, *(reads or []))


def sent(rest: FakeAPI) -> list[str]:
    return [call.method for call in rest.requests]


async def test_429_waits_as_long_as_retry_after_asks(clock: Clock) -> None:
    rest = scripted([status(429, "too many requests", retry_after=3), Response(201)])
    await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert clock.waits == [3]
    assert sent(rest) == ["POST", "POST"]
    assert dict(rest.stats.binds) == {"retried": 1, "ok": 1}


async def test_a_very_long_retry_after_is_capped(clock: Clock) -> None:
    rest = scripted([status(429, retry_after=3600), Response(201)])
    await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert clock.waits == [binding.MAX_RETRY_AFTER]


async def test_no_answer_then_the_pod_reads_bound_here_is_success_without_a_second_post(clock: Clock) -> None:
    rest = scripted([Response(0, error="POST: timed out")], [pod_record("n1")])
    await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert sent(rest) == ["POST", "GET"]
    assert clock.waits == []
    assert dict(rest.stats.binds) == {"ok": 1}


async def test_a_503_on_an_unbound_pod_is_sent_again_after_a_backoff(clock: Clock) -> None:
    rest = scripted([status(503, "etcd leader changed"), Response(201)], [pod_record()])
    await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert sent(rest) == ["POST", "GET", "POST"]
    assert clock.waits == [binding.FIRST_BACKOFF]


async def test_no_answer_then_bound_elsewhere_is_a_quiet_conflict(clock: Clock) -> None:
    rest = scripted([Response(0, error="timed out")], [pod_record("n2")])
    with pytest.raises(APIError) as info:
        await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert info.value.is_gone_or_conflict and info.value.status == 409
    assert "bound to n2" in info.value.message
    assert dict(rest.stats.binds) == {"conflict": 1}


@pytest.mark.parametrize(
    ("read", "expected_status"),
    [
        pytest.param(Response(404, b"{}"), 404, id="deleted"),
        pytest.param(pod_record(uid="u2"), 409, id="re-created"),
        pytest.param(pod_record("n2"), 409, id="bound-elsewhere"),
    ],
)
async def test_a_409_is_quiet_when_the_pod_is_gone_or_bound_elsewhere(
    clock: Clock, read: Response, expected_status: int
) -> None:
    rest = scripted([status(409, "Operation cannot be fulfilled")], [read])
    with pytest.raises(APIError) as info:
        await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert info.value.is_gone_or_conflict and info.value.status == expected_status
    assert "Operation cannot be fulfilled" in info.value.message


async def test_a_409_on_a_pod_still_unbound_is_a_failure_to_report(clock: Clock) -> None:
    """An admission webhook refusing the binding with 409: the pod must not be forgotten as if bound."""
    rest = scripted([status(409, 'admission webhook "deny.example" denied the request')], [pod_record()])
    with pytest.raises(APIError) as info:
        await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert not info.value.is_gone_or_conflict
    assert info.value.status == 409 and "denied the request" in info.value.message
    assert sent(rest) == ["POST", "GET"]
    assert dict(rest.stats.binds) == {"error": 1}


async def test_a_409_whose_pod_reads_bound_here_is_success(clock: Clock) -> None:
    """A previous attempt timed out but was stored: sending it again answers 409 'already assigned'."""
    rest = scripted(
        [Response(0, error="timed out"), status(409, "already assigned")], [Response(500), pod_record("n1")]
    )
    await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert sent(rest) == ["POST", "GET", "POST", "GET"]
    assert clock.waits == [binding.FIRST_BACKOFF]


@pytest.mark.parametrize("code", [400, 403, 422])
async def test_other_refusals_fail_at_once_without_a_read(clock: Clock, code: int) -> None:
    rest = scripted([status(code, "forbidden or invalid")])
    with pytest.raises(APIError) as info:
        await Binder(rest).bind(POD, "n1")  # type: ignore[arg-type]
    assert info.value.status == code and not info.value.is_gone_or_conflict
    assert sent(rest) == ["POST"]


async def test_attempts_end_within_the_deadline(clock: Clock) -> None:
    """Worked by hand: backoffs 0.2, 0.4, 0.8, 1.6, 3.2, then 5 s each; with a 30 s deadline the ninth
    wait ends at 0.2 + 0.4 + 0.8 + 1.6 + 3.2 + 4 * 5 = 26.2 s, a tenth would end at 31.2 s: ten POSTs."""
    rest = scripted([status(503, "unavailable")] * 10, [pod_record()] * 10)
    started = clock.now
    with pytest.raises(APIError) as info:
        await Binder(rest, deadline=30.0).bind(POD, "n1")  # type: ignore[arg-type]
    assert info.value.status == 503 and not info.value.is_gone_or_conflict
    assert sent(rest).count("POST") == 10
    assert clock.waits == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0, 5.0]
    assert clock.now - started < 30.0


class HeldFirst(FakeAPI):
    """Holds the first request until ``release`` is set; records each request's timeout."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.held = asyncio.Event()
        self.timeouts: list[float] = []

    async def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Response:
        self.timeouts.append(kwargs["timeout"])
        if len(self.timeouts) == 1:
            self.held.set()
            await self.release.wait()
        return Response(201, b"{}")


async def test_a_binding_waiting_its_turn_past_the_deadline_is_still_sent_with_its_whole_timeout(
    clock: Clock,
) -> None:
    rest = HeldFirst()
    binder = Binder(rest, concurrency=1, deadline=30.0)  # type: ignore[arg-type]
    first = asyncio.create_task(binder.bind(POD, "n1"))
    second = asyncio.create_task(binder.bind(POD, "n2"))
    await rest.held.wait()  # (asyncio.sleep is the fake clock's here)
    clock.now += 45.0  # the first binding's server is slow: the second waits longer than a deadline
    rest.release.set()
    await asyncio.gather(first, second)
    assert rest.timeouts == [10.0, 10.0]
    assert rest.stats.binds["ok"] == 2
