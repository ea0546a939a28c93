"""Event intake of the scheduler: what goes to the cache, what to the queue, and pods of names no
profile serves (yet)."""

from __future__ import annotations

import copy
from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import make_node, make_pod


def _scheduler() -> tuple[Scheduler, FakeAPI]:
    client = FakeAPI()
    scheduler = Scheduler(client)
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    scheduler.add_node(make_node().name("n1").obj())
    return scheduler, client


async def _drain(scheduler: Scheduler) -> None:
    while (qp := scheduler.queue.pop_nowait()) is not None:
        scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()


async def test_pending_pod_of_a_served_name_is_scheduled() -> None:
    scheduler, client = _scheduler()
    scheduler.add_pod(make_pod().name("p").scheduler_name("kopf-scheduler").obj())
    await _drain(scheduler)
    assert client.bound == [("default/p", "n1")]


async def test_assigned_pod_goes_to_the_cache_not_the_queue() -> None:
    scheduler, _client = _scheduler()
    pod = make_pod().name("running").req(cpu="1").node("n1").obj()
    scheduler.add_pod(pod)
    assert pod["metadata"]["uid"] not in scheduler.queue
    assert scheduler.cache.node_info("n1").requested["cpu"] == 1000


async def test_pod_of_another_scheduler_waits_until_a_profile_serves_its_name() -> None:
    scheduler, client = _scheduler()
    scheduler.add_pod(make_pod().name("late").scheduler_name("later-scheduler").obj())
    await _drain(scheduler)
    assert client.bound == []
    scheduler.set_profile(ProfileSpec(scheduler_name="later-scheduler"))
    await _drain(scheduler)
    assert client.bound == [("default/late", "n1")]


async def test_pods_of_a_removed_profile_leave_the_queue_and_come_back() -> None:
    scheduler, client = _scheduler()
    scheduler.set_profile(ProfileSpec(scheduler_name="s"))
    scheduler.add_pod(make_pod().name("p").scheduler_name("s").req(cpu="100").obj())
    await _drain(scheduler)  # too big: unschedulable, waits in the queue
    assert len(client.failures) == 1
    scheduler.remove_profile("s")
    assert len(scheduler.queue) == 0
    scheduler.add_node(make_node().name("big").capacity(cpu="128", memory="64Gi", pods=110).obj())
    scheduler.set_profile(ProfileSpec(scheduler_name="s"))
    await _drain(scheduler)
    assert client.bound == [("default/p", "big")]


async def test_unreadable_pod_gets_a_failure_report_and_the_loop_goes_on() -> None:
    scheduler, client = _scheduler()
    bad: dict[str, Any] = make_pod().name("bad").scheduler_name("kopf-scheduler").req(cpu="lots").obj()
    scheduler.add_pod(bad)
    scheduler.add_pod(make_pod().name("good").scheduler_name("kopf-scheduler").obj())
    await _drain(scheduler)
    assert client.failures == [
        (
            "default/bad",
            "SchedulerError",
            "pod cannot be scheduled: spec.containers[0].resources.requests.cpu: invalid quantity 'lots'",
        )
    ]
    assert client.bound == [("default/good", "n1")]


async def test_wrong_typed_pod_gets_a_failure_report_naming_the_field_and_the_loop_goes_on() -> None:
    scheduler, client = _scheduler()
    bad = make_pod().name("bad").scheduler_name("kopf-scheduler").obj()
    bad["spec"]["containers"] = [None]
    bound = make_pod().name("bound").node("n1").obj()
    bound["status"] = ["x"]  # assigned: nothing to report on, only a warning
    scheduler.add_pod(bad)
    scheduler.add_pod(bound)
    scheduler.add_pod(make_pod().name("good").scheduler_name("kopf-scheduler").obj())
    await _drain(scheduler)
    assert client.failures == [
        (
            "default/bad",
            "SchedulerError",
            "pod cannot be scheduled: spec.containers[0]: must be an object, not null",
        )
    ]
    assert client.bound == [("default/good", "n1")]


async def test_wrong_typed_node_is_skipped_with_a_warning_naming_the_field(caplog: Any) -> None:
    scheduler, client = _scheduler()
    bad = make_node().name("n2").obj()
    bad["status"]["allocatable"] = "1n"
    scheduler.add_node(bad)
    assert scheduler.cache.node_info("n2") is None
    assert "ignoring node n2: status.allocatable: must be an object, not a string" in caplog.text
    scheduler.add_pod(make_pod().name("p").scheduler_name("kopf-scheduler").obj())
    await _drain(scheduler)
    assert client.bound == [("default/p", "n1")]


async def test_deleted_pending_pod_leaves_no_trace() -> None:
    scheduler, client = _scheduler()
    pod = make_pod().name("gone").scheduler_name("kopf-scheduler").obj()
    scheduler.add_pod(pod)
    scheduler.delete_pod(pod)
    await _drain(scheduler)
    assert client.bound == []
    assert len(scheduler.queue) == 0


async def test_bound_pod_confirms_the_assumed_one() -> None:
    scheduler, _client = _scheduler()
    pod = make_pod().name("p").scheduler_name("kopf-scheduler").obj()
    scheduler.add_pod(pod)
    await _drain(scheduler)
    uid = pod["metadata"]["uid"]
    assert scheduler.cache.is_assumed(uid)
    bound = dict(pod, spec=dict(pod["spec"], nodeName="n1"))
    scheduler.update_pod(pod, bound)
    assert not scheduler.cache.is_assumed(uid)
    assert scheduler.cache.get_pod(uid) is not None


async def test_a_failing_cycle_costs_one_attempt_not_the_loop() -> None:
    import asyncio

    scheduler, client = _scheduler()
    framework = scheduler.profiles["kopf-scheduler"]
    calls = 0

    def explode(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        raise AssertionError("a plugin bug")

    original = framework.run_pre_filter
    framework.run_pre_filter = explode  # type: ignore[method-assign]
    scheduler.add_pod(make_pod().name("victim").scheduler_name("kopf-scheduler").obj())
    loop = asyncio.create_task(scheduler.run())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if client.failures:
            break
    assert client.failures and client.failures[0][:2] == ("default/victim", "SchedulerError")
    assert "a plugin bug" in client.failures[0][2]
    victim = next(p.uid for p in scheduler.known_pods() if p.name == "victim")
    assert scheduler.queue.location(victim) == "backoff"  # kept, to be retried after its backoff
    framework.run_pre_filter = original  # type: ignore[method-assign]
    scheduler.add_pod(make_pod().name("next").scheduler_name("kopf-scheduler").obj())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if client.bound:
            break
    assert ("default/next", "n1") in client.bound
    assert not loop.done()
    scheduler.close()
    await loop
    assert calls == 1


async def test_watch_intake_that_is_ready_runs_before_the_next_cycle() -> None:
    """An event that takes several hops through the event loop (a watch stream, Kopf's per-object queue,
    the handler) reaches the cache before the next pod is tried: here a node that arrives while the first
    pod is being scheduled is there for the second."""
    import asyncio

    scheduler, client = _scheduler()
    full = make_pod().name("fill").req(cpu="1").node("n1").obj()
    scheduler.add_node(make_node().name("n1").capacity(cpu="1", memory="1Gi", pods="10").obj())
    scheduler.add_pod(full)
    for name in ("first", "second"):
        scheduler.add_pod(make_pod().name(name).req(cpu="1").scheduler_name("kopf-scheduler").obj())

    async def intake() -> None:
        for _ in range(10):  # the hops one watch event takes
            await asyncio.sleep(0)
        scheduler.add_node(make_node().name("n2").capacity(cpu="1", memory="1Gi", pods="10").obj())

    framework = scheduler.profiles["kopf-scheduler"]
    original = framework.run_pre_filter
    cycles = 0

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal cycles
        cycles += 1
        if cycles == 1:  # the node is created while the first pod is tried
            asyncio.get_running_loop().create_task(intake())
        return original(*args, **kwargs)

    framework.run_pre_filter = counting  # type: ignore[method-assign]
    loop = asyncio.create_task(scheduler.run())
    for _ in range(200):
        await asyncio.sleep(0.01)
        if client.bound:
            break
    scheduler.close()
    await loop
    assert client.bound == [("default/second", "n2")]
    assert client.failures and client.failures[0][0] == "default/first"


async def test_a_relisted_copy_of_a_held_node_or_bound_pod_changes_nothing() -> None:
    """The watch's own first list (and any re-list) repeats what the scheduler's start-up list gave it:
    the same resourceVersions. Nothing is recounted, so the next snapshot copies no node again; a new
    version is taken in full."""
    scheduler, _client = _scheduler()
    node = make_node().name("n2").capacity(cpu="4").obj()
    node["metadata"]["resourceVersion"] = "7"
    pod = make_pod().name("running").uid("u1").req(cpu="1").node("n2").obj()
    pod["metadata"]["resourceVersion"] = "8"
    scheduler.add_node(node)
    scheduler.add_pod(pod)
    scheduler.cache.update_snapshot(scheduler.snapshot)
    before = scheduler.snapshot.get("n2")
    held = scheduler.cache.get_pod("u1")

    scheduler.add_node(copy.deepcopy(node))
    scheduler.update_pod(None, copy.deepcopy(pod))
    scheduler.cache.update_snapshot(scheduler.snapshot)
    assert scheduler.snapshot.get("n2") is before
    assert scheduler.cache.get_pod("u1") is held

    newer = copy.deepcopy(pod)
    newer["metadata"]["resourceVersion"] = "9"
    newer["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    scheduler.update_pod(None, newer)
    scheduler.cache.update_snapshot(scheduler.snapshot)
    after = scheduler.snapshot.get("n2")
    assert after is not before and after is not None and after.requested["cpu"] == 2000


def _bound(pod: dict[str, Any], node: str, version: str = "2") -> dict[str, Any]:
    """``pod`` as the API server has it after a binding: the node, the PodScheduled condition, a new
    resourceVersion."""
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node
    bound.setdefault("status", {})["conditions"] = [{"type": "PodScheduled", "status": "True"}]
    bound["metadata"]["resourceVersion"] = version
    return bound


async def test_a_confirmed_binding_holds_the_bound_version_as_a_fresh_read_would() -> None:
    scheduler, client = _scheduler()
    pod = make_pod().name("p").scheduler_name("kopf-scheduler").req(cpu="1").label("app", "a").obj()
    scheduler.add_pod(pod)
    await _drain(scheduler)
    assert client.bound == [("default/p", "n1")]
    uid = pod["metadata"]["uid"]
    assert scheduler.cache.is_assumed(uid)
    bound = _bound(pod, "n1")
    scheduler.update_pod(None, bound)
    held = scheduler.cache.get_pod(uid)
    assert held is not None and not scheduler.cache.is_assumed(uid)
    assert held.raw["metadata"]["resourceVersion"] == "2"
    assert (held.node_name, held.labels, held.requests) == ("n1", {"app": "a"}, {"cpu": 1000})
    assert scheduler.cache.node_info("n1").requested["cpu"] == 1000


async def test_a_binding_confirmed_with_other_labels_is_read_again() -> None:
    scheduler, _client = _scheduler()
    pod = make_pod().name("p").scheduler_name("kopf-scheduler").label("app", "a").obj()
    scheduler.add_pod(pod)
    await _drain(scheduler)
    bound = _bound(pod, "n1")
    bound["metadata"]["labels"] = {"app": "b"}
    scheduler.update_pod(None, bound)
    held = scheduler.cache.get_pod(pod["metadata"]["uid"])
    assert held is not None and held.labels == {"app": "b"}


def _deleting(pod: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(pod)
    raw["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    raw["metadata"]["resourceVersion"] = "9"
    return raw


async def test_assumed_pod_whose_deletion_starts_frees_its_room() -> None:
    """Upstream v1.37's handleAssumedPodDeletion: an assumed pod being deleted (not waiting at Permit)
    leaves the cache at once, and the pods its room may help are requeued (AssignedPodDelete)."""
    scheduler = Scheduler(FakeAPI())
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    scheduler.add_node(make_node().name("n1").capacity(cpu="1", memory="1Gi", pods="10").obj())
    held = make_pod().name("held").scheduler_name("kopf-scheduler").req(cpu="1").obj()
    scheduler.add_pod(held)
    await _drain(scheduler)
    uid = held["metadata"]["uid"]
    assert scheduler.cache.is_assumed(uid)
    waiting = make_pod().name("waiting").scheduler_name("kopf-scheduler").req(cpu="1").obj()
    scheduler.add_pod(waiting)
    await _drain(scheduler)
    assert scheduler.queue.location(waiting["metadata"]["uid"]) == "unschedulable"
    scheduler.update_pod(held, _deleting(held))
    assert scheduler.cache.get_pod(uid) is None
    assert scheduler.cache.node_info("n1").requested.get("cpu", 0) == 0
    assert scheduler.queue.location(waiting["metadata"]["uid"]) in ("active", "backoff")


async def test_assumed_pod_deleted_before_its_binding_is_seen_frees_its_room() -> None:
    scheduler, _client = _scheduler()
    held = make_pod().name("held").scheduler_name("kopf-scheduler").req(cpu="1").obj()
    scheduler.add_pod(held)
    await _drain(scheduler)
    uid = held["metadata"]["uid"]
    assert scheduler.cache.is_assumed(uid)
    scheduler.delete_pod(held)
    assert scheduler.cache.get_pod(uid) is None
    assert not scheduler.pod_known(uid)


async def test_a_relisted_pending_pod_is_not_an_update() -> None:
    """Upstream's updatePodInSchedulingQueue drops an update carrying the resourceVersion it holds: a
    re-list's copy of a waiting pod is no TargetPod event."""
    scheduler, _client = _scheduler()
    pod = make_pod().name("p").scheduler_name("kopf-scheduler").req(cpu="100").obj()
    pod["metadata"]["resourceVersion"] = "7"
    scheduler.add_pod(pod)
    await _drain(scheduler)  # too big: waits in the pool
    uid = pod["metadata"]["uid"]
    held = scheduler.queue.get(uid)
    assert held is not None
    before = held.pod
    scheduler.add_pod(copy.deepcopy(pod))
    assert scheduler.queue.get(uid) is held and held.pod is before
    changed = copy.deepcopy(pod)
    changed["metadata"]["resourceVersion"] = "8"
    scheduler.add_pod(changed)
    assert scheduler.queue.get(uid).pod.raw["metadata"]["resourceVersion"] == "8"
