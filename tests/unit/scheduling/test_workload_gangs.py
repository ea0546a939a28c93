"""The Workload API's gangs through the whole scheduler with GenericWorkload on (the pod group queue, the pod
group scheduling cycle, GangScheduling's Permit, binding, pod group preemption), on kube-scheduler v1.37.2's
cases of docs/gangs.md: two nodes of 2 CPUs, gangs of ``minCount: 3``. With the gate off the same pods are
scheduled one by one, as today."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI
from workload_gangs import pod_group_object, run_active

from kopf_scheduler.api.feature_gates import BINARY_VERSION, FeatureGates
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue.pod_groups import INCOMPLETE, QueuedPodGroupInfo
from kopf_scheduler.framework.objects import WORKLOAD_POD_GROUPS
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

NS = "ml"
MIN_COUNT_UNSATISFIABLE = "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


def _scheduler(generic_workload: bool = True) -> tuple[Scheduler, FakeAPI]:
    client = FakeAPI()
    scheduler = Scheduler(client, clock=VirtualClock())
    gates = FeatureGates.resolve(BINARY_VERSION, {"GenericWorkload": generic_workload})
    scheduler.feature_gates = gates
    scheduler.defaults = default_plugins(gates)
    scheduler.use_pod_groups(gates.enabled("GenericWorkload"))
    scheduler.set_profile(ProfileSpec(scheduler_name="default-scheduler"))
    for name in ("n1", "n2"):
        scheduler.add_node(make_node().name(name).capacity(cpu="2", memory="8Gi", pods="110").obj())
    return scheduler, client


def _pod_group(scheduler: Scheduler, name: str, min_count: int = 3, priority: int | None = None) -> None:
    scheduler.update_object(WORKLOAD_POD_GROUPS, pod_group_object(name, NS, min_count, priority))


def _member(name: str, group: str, cpu: str, priority: int = 0) -> dict[str, Any]:
    pod = make_pod().name(name).namespace(NS).uid(name).req(cpu=cpu).priority(priority)
    return pod.set("spec.schedulingGroup", {"podGroupName": group}).obj()


def _bound(api: FakeAPI) -> dict[str, str]:
    return {key.partition("/")[2]: node for key, node in api.bound}


def _failures(api: FakeAPI) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, _, message in api.failures:
        out.setdefault(key.partition("/")[2], []).append(message)
    return out


def _conditions(api: FakeAPI, group: str) -> list[dict[str, Any]]:
    path = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NS}/podgroups/{group}/status"
    return [c for request in api.sent("PATCH", path) for c in request.body["status"]["conditions"]]


async def test_a_gang_that_fits_is_bound_whole_and_its_pod_group_scheduled() -> None:
    scheduler, api = _scheduler()
    _pod_group(scheduler, "fits")
    for i in range(3):
        scheduler.add_pod(_member(f"fits-{i}", "fits", "500m"))
    await run_active(scheduler)
    assert sorted(_bound(api)) == ["fits-0", "fits-1", "fits-2"]
    assert _failures(api) == {}
    [condition] = _conditions(api, "fits")
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "PodGroupInitiallyScheduled",
        "True",
        "Scheduled",
        "",
    )


async def test_a_gang_that_cannot_fit_binds_nothing_and_says_why() -> None:
    scheduler, api = _scheduler()
    _pod_group(scheduler, "big")
    for i in range(3):
        scheduler.add_pod(_member(f"big-{i}", "big", "1500m"))
    await run_active(scheduler)
    assert _bound(api) == {}
    failures = _failures(api)
    assert failures["big-2"][0] == "0/2 nodes are available: 2 Insufficient cpu."
    for name in ("big-0", "big-1"):
        assert failures[name][0] == f"pod group is unschedulable, {MIN_COUNT_UNSATISFIABLE}, {NO_VICTIMS}"
    condition = _conditions(api, "big")[0]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        f"{MIN_COUNT_UNSATISFIABLE}, {NO_VICTIMS}",
    )
    # the gang comes back whole after its backoff
    entity = scheduler.queue.get("podgroup/ml/big")
    assert isinstance(entity, QueuedPodGroupInfo)
    assert [m.pod.name for m in entity.members] == ["big-0", "big-1", "big-2"]


async def test_members_below_min_count_are_held_without_event() -> None:
    scheduler, api = _scheduler()
    scheduler.add_pod(_member("early-0", "late", "100m"))
    assert scheduler.queue.location("early-0") == INCOMPLETE
    _pod_group(scheduler, "late")
    scheduler.add_pod(_member("early-1", "late", "100m"))
    await run_active(scheduler)
    assert _bound(api) == {} and _failures(api) == {} and _conditions(api, "late") == []
    assert scheduler.queue.location("early-0") == "gated"


async def test_a_higher_priority_gang_preempts_lower_priority_pods() -> None:
    scheduler, api = _scheduler()
    for node in ("n1", "n2"):
        victim = make_pod().name(f"low-{node}").namespace(NS).uid(f"low-{node}").req(cpu="1500m").node(node)
        scheduler.add_pod(victim.obj())
    _pod_group(scheduler, "urgent", min_count=2, priority=100)
    for i in range(2):
        scheduler.add_pod(_member(f"urgent-{i}", "urgent", "1500m", priority=100))
    await run_active(scheduler)
    assert sorted(api.evicted) == ["ml/low-n1", "ml/low-n2"]
    failures = _failures(api)
    preempting = "pod group preemption: found a placement for podgroup, preempting 2 victims"
    unsatisfiable = "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    # the first pod fits nowhere, after which the second cannot make the gang: it is not tried
    assert failures["urgent-0"][0] == "0/2 nodes are available: 2 Insufficient cpu."
    assert failures["urgent-1"][0] == unsatisfiable
    condition = _conditions(api, "urgent")[0]
    assert condition["message"] == f"{unsatisfiable}, {preempting}"
    assert sorted(node for _, node in api.nominated) == ["n1", "n2"]


async def test_with_the_gate_off_members_are_pods_like_any_other() -> None:
    scheduler, api = _scheduler(generic_workload=False)
    _pod_group(scheduler, "ignored")
    scheduler.add_pod(_member("alone", "ignored", "500m"))
    await run_active(scheduler)
    assert _bound(api) == {"alone": "n1"} or _bound(api) == {"alone": "n2"}
    assert scheduler.cache.pod_groups.state(NS, "ignored") is None


async def test_a_gang_nominated_where_preemption_is_under_way_waits_for_it() -> None:
    scheduler, api = _scheduler()
    terminating = (
        make_pod()
        .name("leaving")
        .namespace(NS)
        .uid("leaving")
        .req(cpu="1500m")
        .node("n1")
        .set("metadata.deletionTimestamp", "2026-11-29T00:00:00Z")
        .set(
            "status.conditions",
            [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}],
        )
    )
    scheduler.add_pod(terminating.obj())
    scheduler.add_pod(make_pod().name("low").namespace(NS).uid("low").req(cpu="1500m").node("n2").obj())
    _pod_group(scheduler, "urgent", min_count=2, priority=100)
    first = _member("urgent-0", "urgent", "1500m", priority=100)
    first["status"] = {"nominatedNodeName": "n1"}
    scheduler.add_pod(first)
    scheduler.add_pod(_member("urgent-1", "urgent", "1500m", priority=100))
    await run_active(scheduler)
    assert api.evicted == []
    ongoing = "pod group preemption: ongoing preemption on nominated nodes"
    condition = _conditions(api, "urgent")[0]
    assert condition["message"] == f"minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, {ongoing}"


async def test_a_gang_with_a_pod_that_never_preempts_preempts_nothing() -> None:
    scheduler, api = _scheduler()
    for node in ("n1", "n2"):
        victim = make_pod().name(f"low-{node}").namespace(NS).uid(f"low-{node}").req(cpu="1500m").node(node)
        scheduler.add_pod(victim.obj())
    _pod_group(scheduler, "polite", min_count=2, priority=100)
    for i in range(2):
        member = _member(f"polite-{i}", "polite", "1500m", priority=100)
        member["spec"]["preemptionPolicy"] = "Never"
        scheduler.add_pod(member)
    await run_active(scheduler)
    assert api.evicted == []
    condition = _conditions(api, "polite")[0]
    # DynamicResources' step comes first (before DefaultPreemption) and says what it did
    assert condition["message"] == (
        "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, "
        "deallocation and deletion of ResourceClaims completed, "
        "pod group preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_a_gang_whose_pods_do_not_share_its_priority_is_a_scheduler_error() -> None:
    scheduler, api = _scheduler()
    _pod_group(scheduler, "mixed", min_count=2)
    for i in range(2):
        scheduler.add_pod(_member(f"mixed-{i}", "mixed", "100m", priority=5))
    await run_active(scheduler)
    message = (
        "all pods in a single pod group should have the same priority as the pod group's priority, "
        "got 5 and 0"
    )
    assert api.failures[:2] == [
        (f"{NS}/mixed-0", "SchedulerError", message),
        (f"{NS}/mixed-1", "SchedulerError", message),
    ]
    condition = _conditions(api, "mixed")[0]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "SchedulerError",
        message,
    )
    assert _bound(api) == {}


async def test_a_pod_the_cycle_did_not_try_keeps_its_nomination() -> None:
    scheduler, api = _scheduler()
    _pod_group(scheduler, "huge", min_count=2)
    scheduler.add_pod(_member("huge-0", "huge", "3"))
    nominated = _member("huge-1", "huge", "3")
    nominated["status"] = {"nominatedNodeName": "n2"}
    scheduler.add_pod(nominated)
    await run_active(scheduler)
    failures = _failures(api)
    assert failures["huge-0"][0] == "0/2 nodes are available: 2 Insufficient cpu."
    assert failures["huge-1"][0] == "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    assert [node for key, node in api.nominated if key == f"{NS}/huge-1"] == []


async def test_a_scheduled_gangs_extra_pod_that_fits_nowhere_leaves_the_condition_true() -> None:
    # the cached PodGroup never shows the True written (no watch here): the cycle remembers it
    scheduler, api = _scheduler()
    _pod_group(scheduler, "extra", min_count=2)
    for i in range(2):
        scheduler.add_pod(_member(f"extra-{i}", "extra", "1500m"))
    await run_active(scheduler)
    assert sorted(_bound(api)) == ["extra-0", "extra-1"]
    scheduler.add_pod(_member("extra-2", "extra", "1500m"))
    await run_active(scheduler)
    assert _failures(api)["extra-2"] == ["0/2 nodes are available: 2 Insufficient cpu."]
    assert [(c["status"], c["reason"]) for c in _conditions(api, "extra")] == [("True", "Scheduled")]
