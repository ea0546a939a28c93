"""Gangs through the whole scheduler (queue, cycle, Permit, binding) in virtual time: bound only once every
member is assumed, none bound while one member fits nowhere, held out of the queue until enough members
exist, released together when the wait times out, requeued together when their profile is updated while
they wait at Permit; nothing of a deleted gang kept; and the one queue sort every profile shares."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import yaml
from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.backend.queue import GATED
from kopf_scheduler.framework.objects import POD_GROUPS
from kopf_scheduler.framework.objects.podgroups import POD_GROUP_LABEL
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.framework import profile_replaced_message
from kopf_scheduler.plugins.coscheduling import REJECTED_IN_POST_FILTER, Coscheduling, gang_rejected_message
from kopf_scheduler.plugins.priority_sort import PrioritySort
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = Path(__file__).resolve().parents[3] / "profiles" / "gang-scheduling.yaml"
GANG = "kopf-scheduler-gang"


class _GangAPI(FakeAPI):
    """The fake API server, also counting at each binding how many members of the pod's gang the
    scheduler's cache holds (assumed or bound) at that moment: what "bound only once every member is
    assumed" is about, and only the moment of the binding shows it."""

    def __init__(self) -> None:
        super().__init__()
        self.scheduler: Scheduler | None = None
        self.held_at_bind: list[int] = []

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        assert self.scheduler is not None
        group = pod.labels.get(POD_GROUP_LABEL, "")
        members = self.scheduler.group_members.members(pod.namespace, group) if group else [pod]
        self.held_at_bind.append(sum(1 for m in members if self.scheduler.cache.get_pod(m.uid)))
        await super().bind(pod, node_name)


def _bound(api: FakeAPI) -> list[str]:
    """The names of the pods bound, in order."""
    return [key.partition("/")[2] for key, _ in api.bound]


def _failures(api: FakeAPI) -> dict[str, list[str]]:
    """Every FailedScheduling message, by pod name."""
    out: dict[str, list[str]] = {}
    for key, _, message in api.failures:
        out.setdefault(key.partition("/")[2], []).append(message)
    return out


def on_one_node(reason: str) -> str:
    """kube-scheduler's report of a pod rejected at Permit: a FitError of the one node tried."""
    return f"0/1 nodes are available: 1 {reason}."


def _scheduler(args: dict[str, Any] | None = None) -> tuple[Scheduler, _GangAPI, VirtualClock]:
    client, clock = _GangAPI(), VirtualClock()
    scheduler = Scheduler(client, clock=clock)
    client.scheduler = scheduler
    doc = yaml.safe_load(PROFILE.read_text())
    if args:
        doc["spec"]["pluginConfig"][0]["args"].update(args)
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    scheduler.set_profile(parse_profile(doc))
    return scheduler, client, clock


def _group(scheduler: Scheduler, name: str, min_member: int, **spec: Any) -> None:
    raw = {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member, **spec}}
    scheduler.update_object(POD_GROUPS, raw)


def _member(name: str, group: str, cpu: str = "1", **selector: str) -> dict[str, Any]:
    pod = make_pod().name(name).uid(name).label(POD_GROUP_LABEL, group).scheduler_name(GANG).req(cpu=cpu)
    return (pod.node_selector(**selector) if selector else pod).obj()


async def _run(scheduler: Scheduler, rounds: int = 50) -> None:
    """Schedules what the active queue holds and lets bindings run, until nothing is left to try."""
    for _ in range(rounds):
        qp = scheduler.queue.pop_nowait()
        if qp is not None:
            scheduler.schedule_one(qp)
            continue
        for _ in range(10):
            await asyncio.sleep(0)
        if scheduler.queue.counts()["active"] == 0 and scheduler.queue.counts()["backoff"] == 0:
            return


async def test_a_gang_is_bound_only_once_every_member_is_assumed() -> None:
    scheduler, client, _ = _scheduler()
    scheduler.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 4)
    for i in range(4):
        scheduler.add_pod(_member(f"w{i}", "train"))
    await _run(scheduler)
    assert sorted(_bound(client)) == ["w0", "w1", "w2", "w3"]
    assert client.held_at_bind == [4, 4, 4, 4]


async def test_members_wait_out_of_the_queue_until_min_member_pods_exist() -> None:
    scheduler, client, _ = _scheduler()
    scheduler.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 3)
    for i in range(2):
        scheduler.add_pod(_member(f"w{i}", "train"))
    await _run(scheduler)
    assert [scheduler.queue.location(f"w{i}") for i in range(2)] == [GATED, GATED]
    assert _bound(client) == [] and _failures(client) == {}  # held back, never attempted
    scheduler.add_pod(_member("w2", "train"))  # the third member arrives
    await _run(scheduler)
    assert sorted(_bound(client)) == ["w0", "w1", "w2"]


async def test_a_gang_where_only_three_fit_binds_none_until_a_node_is_added() -> None:
    scheduler, client, clock = _scheduler()
    scheduler.add_node(make_node().name("n1").capacity(cpu="3", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 4)
    for i in range(4):
        scheduler.add_pod(_member(f"w{i}", "train"))
    await _run(scheduler)
    assert _bound(client) == []
    # the member that fits nowhere rejects the gang; the waiting ones are released
    messages = [m for i in range(4) for m in _failures(client).get(f"w{i}", ())]
    gang_rejected = {
        gang_rejected_message("default/train", PodInfo(_member(f"w{i}", "train"))) for i in range(4)
    }
    rejected = [m for m in messages if any(m.endswith(r) for r in gang_rejected)]
    assert rejected and on_one_node(REJECTED_IN_POST_FILTER) in messages
    scheduler.add_node(make_node().name("n2").capacity(cpu="3", memory="8Gi", pods="110").obj())
    for _ in range(5):  # the failing member's backoff, in virtual time
        await _run(scheduler)
        clock.advance(10.0)
        scheduler.queue.flush_due()
    await _run(scheduler)
    assert sorted(_bound(client)) == ["w0", "w1", "w2", "w3"]
    assert client.held_at_bind == [4, 4, 4, 4]


async def test_a_timed_out_gang_releases_its_room_for_another_pod() -> None:
    scheduler, client, clock = _scheduler({"podGroupRejectPercentage": 100})
    scheduler.add_node(make_node().name("n1").capacity(cpu="3", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 4, scheduleTimeoutSeconds=10)
    for i in range(3):
        scheduler.add_pod(_member(f"w{i}", "train"))
    scheduler.add_pod(_member("w3", "train", **{"gpu": "none-has-it"}))
    await _run(scheduler)
    assert len(scheduler.cache.pods()) == 3  # three members assumed, waiting for the fourth
    scheduler.add_pod(make_pod().name("other").uid("other").scheduler_name(GANG).req(cpu="3").obj())
    await _run(scheduler)
    assert _bound(client) == [] and "Insufficient cpu" in _failures(client)["other"][0]
    clock.advance(10.0)
    await _run(scheduler)
    timed_out = on_one_node("rejected due to timeout after waiting 10s at plugin Coscheduling")
    assert any(timed_out in _failures(client).get(f"w{i}", ()) for i in range(3))
    for _ in range(3):
        clock.advance(10.0)
        scheduler.queue.flush_due()
        await _run(scheduler)
    assert _bound(client) == ["other"]


async def test_minresources_the_cluster_cannot_hold_are_refused_at_pre_filter() -> None:
    scheduler, client, _ = _scheduler()
    scheduler.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 2, minResources={"cpu": "16"})
    for i in range(2):
        scheduler.add_pod(_member(f"w{i}", "train"))
    await _run(scheduler)
    assert _bound(client) == []
    message = _failures(client)["w0"][0]
    assert message.startswith("0/1 nodes are available: resource gap: map[cpu:12]."), message


async def test_a_profile_update_requeues_a_gang_waiting_at_permit_together() -> None:
    """The new generation's framework does not know the members the old one holds at Permit: a member
    tried under it would wait alone while its siblings wait in the old one until the gang's timeout.
    Installing it rejects every pod waiting in the old one at once, the reason in their events."""
    scheduler, client, clock = _scheduler({"podGroupRejectPercentage": 100})
    scheduler.add_node(make_node().name("n1").capacity(cpu="3", memory="8Gi", pods="110").obj())
    _group(scheduler, "train", 4, scheduleTimeoutSeconds=300)
    for i in range(3):
        scheduler.add_pod(_member(f"w{i}", "train"))
    scheduler.add_pod(_member("w3", "train", gpu="yes"))  # fits nowhere yet
    await _run(scheduler)
    old = scheduler.profiles[GANG]
    assert sorted(w.pod.name for w in old.waiting_pods.all()) == ["w0", "w1", "w2"]

    doc = copy.deepcopy(yaml.safe_load(PROFILE.read_text()))
    doc["metadata"]["generation"] = 2
    doc["spec"]["pluginConfig"][0]["args"]["podGroupRejectPercentage"] = 100
    new = scheduler.set_profile(parse_profile(doc))
    await _run(scheduler)
    assert old.waiting_pods.all() == []  # all three retried at once: they wait together in the new one
    assert sorted(w.pod.name for w in new.waiting_pods.all()) == ["w0", "w1", "w2"]
    reason = on_one_node(profile_replaced_message(GANG, 2))
    assert all(reason in _failures(client)[f"w{i}"] for i in range(3)), _failures(client)

    # the node w3 needs arrives: the whole gang is placed under the new profile, long before its timeout
    scheduler.add_node(
        make_node().name("n2").label("gpu", "yes").capacity(cpu="4", memory="8Gi", pods="110").obj()
    )
    for _ in range(6):
        clock.advance(5.0)
        scheduler.queue.flush_due()
        await _run(scheduler)
    assert sorted(_bound(client)) == ["w0", "w1", "w2", "w3"]
    assert client.held_at_bind == [4, 4, 4, 4]


async def test_gangs_bound_then_deleted_leave_nothing_behind_in_coscheduling() -> None:
    """Coscheduling remembers the members it permitted, the members it sent back and when each gang last
    failed; a gang whose pods are all deleted (and its PodGroup with them) leaves none of it behind, as
    scheduler-plugins forgets a bound pod when its informer sees it deleted."""
    scheduler, client, _ = _scheduler()
    scheduler.add_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods="110").obj())
    plugin = scheduler.profiles[GANG].plugins["Coscheduling"]
    assert isinstance(plugin, Coscheduling)
    for g in range(20):
        name = f"g{g}"
        _group(scheduler, name, 2)
        # every fifth gang fails: one member fits nowhere, so the gang is rejected and remembered as failed
        selector = {"gpu": "none-has-it"} if g % 5 == 4 else {}
        members = [_member(f"{name}-0", name), _member(f"{name}-1", name, **selector)]
        for pod in members:
            scheduler.add_pod(pod)
        await _run(scheduler)
        for pod in members:
            bound = next(
                (node for key, node in client.bound if key == f"default/{pod['metadata']['name']}"), ""
            )
            if bound:  # the watch shows the binding, then the deletion
                scheduler.update_pod(None, {**pod, "spec": {**pod["spec"], "nodeName": bound}})
            scheduler.delete_pod(pod)
        scheduler.delete_object(POD_GROUPS, "default", name)
    assert len(_bound(client)) == 32
    # any pod of the profile, gang or not, passes through the plugin again
    scheduler.add_pod(make_pod().name("plain").uid("plain").scheduler_name(GANG).req(cpu="1").obj())
    await _run(scheduler)
    groups = plugin.groups
    held = (groups._assumed, groups._refused, groups._last_failed, groups._permitted, groups._backed_off)
    assert held == ({}, {}, {}, {}, {})


def test_one_queue_sort_for_every_profile_whatever_the_install_order() -> None:
    scheduler, _, _ = _scheduler()
    assert isinstance(scheduler.queue._queue_sort, Coscheduling)
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))  # the default profile again
    assert isinstance(scheduler.queue._queue_sort, Coscheduling)
    scheduler.remove_profile(GANG)
    assert isinstance(scheduler.queue._queue_sort, PrioritySort)
