"""The PodScheduled condition and nominatedNodeName: upstream's UpdatePodCondition/updatePod semantics,
and the background writer that skips repeats and merges waiting patches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.conditions import (
    merge_patches,
    pod_scheduled_false,
    status_patch,
    update_pod_condition,
)
from kopf_scheduler.k8s.pod_status import PodStatusWriter
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, Response

T0, T1 = "2024-01-01T00:00:00Z", "2024-01-01T00:05:00Z"
MSG = "0/3 nodes are available: 3 Insufficient cpu."


def cond(
    status: str = "False", reason: str = "Unschedulable", message: str = MSG, **extra: Any
) -> dict[str, Any]:
    return {"type": "PodScheduled", "status": status, "reason": reason, "message": message, **extra}


@pytest.mark.parametrize(
    ("old", "new", "changed", "transition"),
    [
        pytest.param(None, cond(), True, T1, id="added"),
        pytest.param(cond(lastTransitionTime=T0), cond(), False, T0, id="same-keeps-transition-time"),
        pytest.param(cond(lastTransitionTime=T0), cond(message="other"), True, T0, id="message-changed"),
        pytest.param(
            cond(lastTransitionTime=T0), cond(reason="SchedulerError"), True, T0, id="reason-changed"
        ),
        pytest.param(cond("True", "", "", lastTransitionTime=T0), cond(), True, T1, id="status-changed"),
    ],
)
def test_update_pod_condition(old: dict | None, new: dict, changed: bool, transition: str) -> None:
    ready = {"type": "Ready", "status": "False"}
    status: dict[str, Any] = {"conditions": [ready] + ([old] if old else [])}
    assert update_pod_condition(status, new, T1) is changed
    assert status["conditions"][0] == ready
    assert status["conditions"][-1]["lastTransitionTime"] == transition
    assert len(status["conditions"]) == 2


def test_status_patch_carries_only_what_changes() -> None:
    old = {"phase": "Pending", "conditions": [cond(lastTransitionTime=T0)], "nominatedNodeName": "n1"}
    assert status_patch(old, cond(), None, T1) is None
    assert status_patch(old, cond(), "n1", T1) is None
    assert status_patch(old, cond(), "n2", T1) == {"status": {"nominatedNodeName": "n2"}}
    assert status_patch(old, cond(), "", T1) == {"status": {"nominatedNodeName": None}}
    assert status_patch(old, cond(message="new"), None, T1) == {
        "status": {"conditions": [cond(message="new", lastTransitionTime=T0)]}
    }
    assert status_patch({}, cond(), "", T1) == {"status": {"conditions": [cond(lastTransitionTime=T1)]}}


def test_condition_carries_the_generation_when_known() -> None:
    assert pod_scheduled_false("Unschedulable", MSG, 3)["observedGeneration"] == 3
    assert "observedGeneration" not in pod_scheduled_false("Unschedulable", MSG, None)


def test_merge_patches_keeps_the_latest_of_each_field() -> None:
    older = {"status": {"conditions": [cond(message="a")], "nominatedNodeName": "n1"}}
    newer = {"status": {"conditions": [cond(message="b")]}}
    assert merge_patches(older, newer) == {
        "status": {"conditions": [cond(message="b")], "nominatedNodeName": "n1"}
    }


def pod(name: str = "p", uid: str = "u1", status: dict | None = None) -> PodInfo:
    raw = {
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "generation": 1},
        "spec": {"containers": [{"name": "c"}]},
        "status": status or {"phase": "Pending"},
    }
    return PodInfo(raw)


@pytest.fixture
def rest() -> FakeAPI:
    return FakeAPI()


@pytest.fixture
def writer(rest: FakeAPI) -> PodStatusWriter:
    return PodStatusWriter(rest, VirtualClock(), workers=1, wall=lambda: 1_700_000_000.0)  # type: ignore[arg-type]


async def test_repeated_failure_with_the_same_message_is_patched_once(
    rest: FakeAPI, writer: PodStatusWriter
) -> None:
    p = pod()
    for _ in range(20):
        writer.record_failure(p, "Unschedulable", MSG, None)
        await asyncio.sleep(0)
    assert await writer.close(1.0)
    assert len(rest.requests) == 1
    call = rest.requests[0]
    assert (call.method, call.path, call.content_type) == ("PATCH", "/api/v1/namespaces/ns/pods/p/status",
                                                           STRATEGIC_MERGE_PATCH)  # fmt: skip
    assert call.body == {
        "status": {"conditions": [cond(lastTransitionTime="2023-11-14T22:13:20Z", observedGeneration=1)]}
    }
    assert rest.stats.status_patches_sent == 1 and rest.stats.status_patches_skipped == 19


async def test_pod_already_saying_the_same_is_not_patched(rest: FakeAPI, writer: PodStatusWriter) -> None:
    writer.record_failure(
        pod(status={"conditions": [cond(lastTransitionTime=T0)]}), "Unschedulable", MSG, None
    )
    assert await writer.close(1.0)
    assert rest.requests == []


async def test_waiting_patches_for_one_pod_merge(rest: FakeAPI, writer: PodStatusWriter) -> None:
    p = pod()
    writer.record_failure(p, "Unschedulable", "first", "n1")  # no await: still waiting when the next comes
    writer.record_failure(p, "Unschedulable", "second", None)
    assert await writer.close(1.0)
    assert len(rest.requests) == 1
    status = rest.requests[0].body["status"]
    assert status["nominatedNodeName"] == "n1" and status["conditions"][0]["message"] == "second"
    assert rest.stats.status_patches_coalesced == 1


async def test_a_patch_in_flight_is_followed_not_overtaken(rest: FakeAPI) -> None:
    gate = rest.hold()
    writer = PodStatusWriter(rest, VirtualClock(), workers=4)  # type: ignore[arg-type]
    p = pod()
    writer.record_failure(p, "Unschedulable", "first", None)
    async with asyncio.timeout(5):
        while not rest.requests:
            await asyncio.sleep(0)
    writer.record_failure(p, "Unschedulable", "second", None)
    for _ in range(50):  # every free worker has had its turn
        await asyncio.sleep(0)
    assert len(rest.requests) == 1  # the second waits for the first although workers are free
    gate.set()
    assert await writer.close(1.0)
    assert [c.body["status"]["conditions"][0]["message"] for c in rest.requests] == ["first", "second"]


async def test_binding_cancels_a_waiting_patch_and_forgets(rest: FakeAPI, writer: PodStatusWriter) -> None:
    p = pod()
    writer.record_failure(p, "Unschedulable", MSG, None)
    writer.forget(p.uid)
    assert await writer.close(1.0)
    assert rest.requests == []
    assert writer.known == {}


async def test_failed_patch_is_retried_then_forgotten(rest: FakeAPI) -> None:
    rest.script(None, None, Response(500, b'{"message":"etcd is sad"}'))  # the first request only
    writer = PodStatusWriter(rest, VirtualClock(), workers=1, retry_delays=())  # type: ignore[arg-type]
    p = pod()
    writer.record_failure(p, "Unschedulable", MSG, None)
    assert await writer.pool.drain(1.0)
    assert rest.stats.status_patch_errors == 1 and writer.known == {}
    # the next identical failure is tried again (and answered 200), since the pod's state is unknown
    writer.record_failure(p, "Unschedulable", MSG, None)
    assert await writer.close(1.0)
    assert rest.stats.status_patches_sent == 1


async def test_nothing_is_accepted_after_close(rest: FakeAPI, writer: PodStatusWriter) -> None:
    assert await writer.close(1.0)
    writer.record_failure(pod(), "Unschedulable", MSG, None)
    assert writer.pending == {} and rest.requests == []


async def test_nominate_waits_for_the_patch_and_the_ones_before_it(rest: FakeAPI) -> None:
    # the binding cycle's announcement of its node (NominatedNodeNameForExpectation): sent after the pod's
    # earlier patch, and answered before the cycle goes on
    gate = rest.hold()
    writer = PodStatusWriter(rest, VirtualClock(), workers=4)  # type: ignore[arg-type]
    p = pod()
    writer.record_failure(p, "Unschedulable", "first", None)
    nominating = asyncio.ensure_future(writer.nominate(p, "n1"))
    for _ in range(50):
        await asyncio.sleep(0)
    assert not nominating.done() and len(rest.requests) == 1
    gate.set()
    async with asyncio.timeout(5):
        await nominating
    assert [c.body["status"] for c in rest.requests][1] == {"nominatedNodeName": "n1"}
    assert writer.view(p)["nominatedNodeName"] == "n1"
    await writer.nominate(p, "n1")  # holds it already: nothing sent, nothing awaited
    assert len(rest.requests) == 2
    writer.record_failure(p, "SchedulerError", "bind failed", "")  # a failure clears it again
    assert await writer.close(1.0)
    assert rest.requests[2].body["status"]["nominatedNodeName"] is None


async def test_nominate_is_not_queued_behind_other_pods_patches(rest: FakeAPI) -> None:
    # A gang's members wait at Permit after announcing their node; the announcement must not wait for the
    # failures of other pods written meanwhile (hundreds in a busy queue: the gang's release then held its
    # bindings for seconds). kube-scheduler sends it from the binding goroutine itself.
    gate = rest.hold("PATCH", "/api/v1/namespaces/ns/pods/other/status")
    writer = PodStatusWriter(rest, VirtualClock(), workers=1)  # type: ignore[arg-type]
    writer.record_failure(pod("other", "u0"), "Unschedulable", MSG, None)  # holds the only worker
    writer.record_failure(pod("third", "u2"), "Unschedulable", MSG, None)  # queued behind it
    member = pod("member", "u1")
    async with asyncio.timeout(5):
        await writer.nominate(member, "n1")
    sent = [(c.path, c.body["status"]) for c in rest.requests]
    assert ("/api/v1/namespaces/ns/pods/member/status", {"nominatedNodeName": "n1"}) in sent
    gate.set()
    assert await writer.close(1.0)
    sent_to = [c.path.split("/")[-2] for c in rest.requests]
    assert sorted(sent_to) == ["member", "other", "third"] and sent_to.index("member") < sent_to.index(
        "third"
    )


async def test_nominate_merges_the_pods_own_waiting_patch(rest: FakeAPI) -> None:
    gate = rest.hold("PATCH", "/api/v1/namespaces/ns/pods/other/status")
    writer = PodStatusWriter(rest, VirtualClock(), workers=1)  # type: ignore[arg-type]
    writer.record_failure(pod("other", "u0"), "Unschedulable", MSG, None)  # holds the only worker
    member = pod("member", "u1")
    writer.record_failure(member, "Unschedulable", "earlier", None)  # still waiting in the queue
    async with asyncio.timeout(5):
        await writer.nominate(member, "n1")
    own = [c.body["status"] for c in rest.requests if c.path.endswith("/member/status")]
    assert len(own) == 1
    assert own[0]["nominatedNodeName"] == "n1" and own[0]["conditions"][0]["message"] == "earlier"
    gate.set()
    assert await writer.close(1.0)
    assert len(rest.requests) == 2  # the member's queued entry sends nothing more
