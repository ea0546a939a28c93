"""Acting on a preemption (``prepareCandidateAsync``) and the preemptor's way to its node: victims
evicted (pods waiting at Permit preempted there, terminating ones left alone), lower-priority
nominations taken away, the preemptor kept in flight until the evictions are sent, then nominated,
requeued and bound there once its victims are gone."""

from __future__ import annotations

import asyncio
from typing import Any

from _preemption_kit import Harness, node

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.preemption import PREEMPTED, Candidate
from kopf_scheduler.testing import make_pod


def pod(name: str, priority: int, node_name: str = "", cpu: str = "1", nominated: str = "") -> dict[str, Any]:
    builder = make_pod().name(name).uid(name).priority(priority).req(cpu=cpu)
    if node_name:
        builder = builder.node(node_name)
    if nominated:
        builder = builder.nominated(nominated)
    return builder.obj()


class RecordingWaitingPod:
    def __init__(self, pod: PodInfo, waiting: bool = True) -> None:
        self.pod = pod
        self.waiting = waiting
        self.rejected: list[tuple[str, str]] = []
        self.preempted: list[tuple[str, str]] = []

    def reject(self, plugin: str, message: str) -> bool:
        self.rejected.append((plugin, message))
        return self.waiting

    def preempt(self, plugin: str, message: str) -> bool:
        self.preempted.append((plugin, message))
        return self.waiting

    def allow(self, plugin: str) -> None:
        return None

    def pending_plugins(self) -> list[str]:
        return []


PLACEMENT_MESSAGE = (
    "0/1 nodes are available: 1 Insufficient cpu. "
    "preemption: found a potential placement for pod on node n1, preempting 1 victims"
)


async def test_prepare_candidate_evicts_rejects_and_clears_nominations() -> None:
    harness = Harness([node("n1", cpu="4")], [pod("v1", 0, "n1"), pod("v2", 0, "n1"), pod("v3", 0, "n1")])
    deleting = make_pod().name("v4").uid("v4").priority(0).node("n1").set("metadata.deletionTimestamp", "x")
    harness.sched.add_pod(deleting.obj())
    preemptor = PodInfo(pod("p", 100))
    # A lower-priority pod nominated to n1 (in the API too), and one of equal priority that keeps it.
    for obj in (pod("lower", 10, nominated="n1"), pod("equal", 100, nominated="n1")):
        harness.cluster.pods[obj["metadata"]["uid"]] = obj
        harness.sched.add_pod(obj)
    waiting = RecordingWaitingPod(PodInfo(pod("v2", 0, "n1")))
    harness.framework.waiting_pods.get = lambda uid: waiting if uid == "v2" else None  # type: ignore[method-assign]
    victims = [harness.sched.cache.get_pod(uid) for uid in ("v1", "v2", "v4")]
    candidate = Candidate("n1", [v for v in victims if v is not None])

    activated: list[str] = []
    harness.framework.activate_pods = lambda pods: activated.extend(p.name for p in pods)

    status = await harness.plugin.evaluator.prepare_candidate(candidate, preemptor)

    assert status is None
    assert harness.cluster.evictions == [("default/v1", "default/p", "n1")]
    # v2, the last victim, waits at Permit: it is preempted there (kube-scheduler v1.36 on), with no
    # deletion to wake the preemptor, which is activated instead
    assert (waiting.rejected, waiting.preempted) == ([], [("DefaultPreemption", PREEMPTED)])
    assert harness.cluster.outcomes["p"].victims == ["default/v1", "default/v2"]
    assert activated == ["p"]
    assert harness.sched.cache.get_pod("v1") is None  # the watch told the scheduler
    nominated = [p.name for p in harness.sched.queue.nominated_pods_for_node("n1")]
    assert nominated == ["equal"]
    assert "nominatedNodeName" not in harness.cluster.pods["lower"].get("status", {})


class FailingCluster:
    """Evictions fail with a 500."""

    async def evict(self, victim: PodInfo, preemptor: PodInfo, node_name: str) -> None:
        raise APIError(500, "etcd is sulking")


async def test_a_failed_eviction_keeps_the_nomination_and_retries_the_preemptor_at_once() -> None:
    # upstream's asynchronous preemption: the attempt already ended with the nomination; a failed API
    # call is logged and the preemptor activated
    harness = Harness([node("n1", cpu="1")], [pod("low", 0, "n1")])
    harness.cluster.evict = FailingCluster().evict  # type: ignore[method-assign]
    harness.sched.add_pod(pod("p", 100))
    qp = harness.sched.queue.pop_nowait()
    assert qp is not None
    harness.sched.schedule_one(qp)
    await harness.sched.wait_for_bindings()
    outcome = harness.cluster.outcomes["p"]
    assert (outcome.reason, outcome.message, outcome.nominated_node) == (
        "Unschedulable",
        PLACEMENT_MESSAGE,
        "n1",
    )
    assert [p.name for p in harness.sched.queue.nominated_pods_for_node("n1")] == ["p"]
    assert harness.sched.queue.location("p") == "active"


async def test_a_victim_waiting_at_permit_is_preempted_in_memory_and_not_deleted() -> None:
    harness = Harness([node("n1", cpu="4")], [pod("v1", 0, "n1")])
    waiting = RecordingWaitingPod(PodInfo(pod("v1", 0, "n1")))
    harness.framework.waiting_pods.get = lambda uid: waiting if uid == "v1" else None  # type: ignore[method-assign]
    victim = harness.sched.cache.get_pod("v1")
    assert victim is not None
    in_memory = await harness.plugin.evaluator.preempt_pod(victim, PodInfo(pod("p", 100)), "n1")
    assert in_memory and waiting.preempted == [("DefaultPreemption", "preempted")]
    assert harness.cluster.evictions == []


async def test_a_victim_whose_wait_just_ended_is_deleted() -> None:
    harness = Harness([node("n1", cpu="4")], [pod("v1", 0, "n1")])
    waiting = RecordingWaitingPod(PodInfo(pod("v1", 0, "n1")), waiting=False)
    harness.framework.waiting_pods.get = lambda uid: waiting if uid == "v1" else None  # type: ignore[method-assign]
    victim = harness.sched.cache.get_pod("v1")
    assert victim is not None
    in_memory = await harness.plugin.evaluator.preempt_pod(victim, PodInfo(pod("p", 100)), "n1")
    assert not in_memory
    assert harness.cluster.evictions == [("default/v1", "default/p", "n1")]


async def test_a_victim_in_pre_bind_has_its_binding_cancelled_unless_pre_bind_is_over() -> None:
    harness = Harness([node("n1", cpu="4")], [pod("v1", 0, "n1"), pod("v2", 0, "n1")])
    cancelled = harness.framework.pods_in_pre_bind.add("v1")
    prebound = harness.framework.pods_in_pre_bind.add("v2")
    assert prebound.mark_prebound()
    preemptor = PodInfo(pod("p", 100))
    for uid in ("v1", "v2"):
        victim = harness.sched.cache.get_pod(uid)
        assert victim is not None
        await harness.plugin.evaluator.preempt_pod(victim, preemptor, "n1")
    assert cancelled.cancelled and cancelled.message == "preempted by DefaultPreemption"
    assert not cancelled.mark_prebound()
    assert harness.cluster.evictions == [("default/v2", "default/p", "n1")]


class SlowCluster:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.release = asyncio.Event()

    async def evict(self, victim: PodInfo, preemptor: PodInfo, node_name: str) -> None:
        await self.release.wait()
        await self.inner(victim, preemptor, node_name)


async def test_the_preemptor_waits_in_flight_then_lands_on_its_nominated_node() -> None:
    harness = Harness(
        [node("n1", cpu="2"), node("n2", cpu="2")],
        [pod("a", 5, "n1", cpu="2"), pod("b", 0, "n2", cpu="1500m")],
    )
    slow = SlowCluster(harness.cluster.evict)
    harness.cluster.evict = slow.evict  # type: ignore[method-assign]
    harness.cluster.pods["p"] = pod("p", 100)
    harness.sched.add_pod(pod("p", 100))
    qp = harness.sched.queue.pop_nowait()
    assert qp is not None
    harness.sched.schedule_one(qp)
    await asyncio.sleep(0)
    # Nominated at once, so nobody else takes the room; still in flight while the evictions are sent.
    assert [p.name for p in harness.sched.queue.nominated_pods_for_node("n2")] == ["p"]
    assert harness.sched.queue.location("p") == "in_flight"
    assert "p" not in harness.cluster.outcomes
    slow.release.set()
    await harness.sched.wait_for_bindings()

    outcome = harness.cluster.outcomes["p"]
    assert outcome.victims == ["default/b"]
    assert outcome.nominated_node == "n2"
    assert outcome.message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: found a potential placement for pod on node n2, preempting 1 victims"
    )
    assert harness.cluster.pods["p"]["status"]["nominatedNodeName"] == "n2"
    # The victim's deletion arrived while the pod was in flight: it is requeued, not left waiting.
    assert harness.sched.queue.location("p") in ("active", "backoff")
    qp = harness.sched.queue.pop_nowait()
    assert qp is not None and qp.pod.nominated_node_name == "n2"
    harness.sched.schedule_one(qp)
    await harness.sched.wait_for_bindings()
    assert harness.cluster.bindings == [("default/p", "n2")]


async def test_no_candidate_clears_a_stale_nomination() -> None:
    harness = Harness([node("n1", cpu="1")], [pod("peer", 100, "n1")])
    obj = pod("p", 100, nominated="n1")
    harness.cluster.pods["p"] = obj
    harness.sched.add_pod(obj)
    qp = harness.sched.queue.pop_nowait()
    assert qp is not None
    harness.sched.schedule_one(qp)
    await harness.sched.wait_for_bindings()
    outcome = harness.cluster.outcomes["p"]
    assert outcome.nominated_node is None
    assert outcome.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )
    assert "nominatedNodeName" not in harness.cluster.pods["p"].get("status", {})
    assert harness.sched.queue.nominated_pods_for_node("n1") == []
    assert outcome.reason == "Unschedulable"


async def test_a_preemptor_deleted_during_its_evictions_leaves_no_nomination() -> None:
    harness = Harness([node("n1", cpu="1")], [pod("low", 0, "n1")])
    slow = SlowCluster(harness.cluster.evict)
    harness.cluster.evict = slow.evict  # type: ignore[method-assign]
    obj = pod("p", 100)
    harness.cluster.pods["p"] = obj
    harness.sched.add_pod(obj)
    qp = harness.sched.queue.pop_nowait()
    assert qp is not None
    harness.sched.schedule_one(qp)
    await asyncio.sleep(0)
    harness.sched.delete_pod(obj)
    slow.release.set()
    await harness.sched.wait_for_bindings()
    assert harness.sched.queue.nominated_pods_for_node("n1") == []
    assert harness.sched.queue.location("p") is None
    # its FailedScheduling event is still written (as upstream), but it nominates nothing
    assert harness.cluster.outcomes["p"].nominated_node is None


async def test_with_every_victim_terminating_nothing_is_done() -> None:
    # upstream's prepareCandidateAsync returns before clearing lower-priority nominations
    harness = Harness([node("n1", cpu="4")])
    deleting = make_pod().name("v1").uid("v1").priority(0).node("n1").set("metadata.deletionTimestamp", "x")
    harness.sched.add_pod(deleting.obj())
    lower = pod("lower", 10, nominated="n1")
    harness.cluster.pods["lower"] = lower
    harness.sched.add_pod(lower)
    victim = harness.sched.cache.get_pod("v1")
    assert victim is not None
    status = await harness.plugin.evaluator.prepare_candidate(
        Candidate("n1", [victim]), PodInfo(pod("p", 100))
    )
    assert status is None
    assert harness.cluster.evictions == []
    assert [p.name for p in harness.sched.queue.nominated_pods_for_node("n1")] == ["lower"]


async def test_nominations_are_cleared_before_the_victims_are_preempted() -> None:
    harness = Harness([node("n1", cpu="4")], [pod("v1", 0, "n1")])
    lower = pod("lower", 10, nominated="n1")
    harness.cluster.pods["lower"] = lower
    harness.sched.add_pod(lower)
    order: list[str] = []
    clear, evict = harness.cluster.clear_nominated_node_name, harness.cluster.evict

    def clearing(p: PodInfo) -> None:
        order.append(f"clear {p.name}")
        clear(p)

    async def evicting(victim: PodInfo, preemptor: PodInfo, node_name: str) -> None:
        order.append(f"evict {victim.name}")
        await evict(victim, preemptor, node_name)

    harness.cluster.clear_nominated_node_name = clearing  # type: ignore[method-assign]
    harness.cluster.evict = evicting  # type: ignore[method-assign]
    victim = harness.sched.cache.get_pod("v1")
    assert victim is not None
    await harness.plugin.evaluator.prepare_candidate(Candidate("n1", [victim]), PodInfo(pod("p", 100)))
    assert order == ["clear lower", "evict v1"]
