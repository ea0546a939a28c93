"""Shadow profiles: the pods of their schedulerName are never queued nor bound; when another scheduler
binds one, the profile's verdict is taken against the cache before that binding (same: the node is among
its best; different; infeasible), counted in kopf_scheduler_shadow_decisions_total; nothing is written."""

from __future__ import annotations

from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.scheduling.shadow import ShadowDecision
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.testing import make_node, make_pod


def _shadowing() -> tuple[Scheduler, FakeAPI, list[ShadowDecision]]:
    client = FakeAPI()
    scheduler = Scheduler(client)
    scheduler.set_profile(
        parse_profile({"schedulerName": "default-scheduler", "shadow": True}, ProfileBounds())
    )
    for name, cpu in (("big", "8"), ("small", "2")):
        scheduler.add_node(make_node().name(name).capacity(cpu=cpu, memory="16Gi", pods=20).obj())
    decisions: list[ShadowDecision] = []
    scheduler.shadow_hooks.append(decisions.append)
    return scheduler, client, decisions


def _bound_by_another(scheduler: Scheduler, name: str, node: str, cpu: str = "1") -> None:
    pending = make_pod().name(name).scheduler_name("default-scheduler").req(cpu=cpu).obj()
    scheduler.add_pod(pending)
    bound: dict[str, Any] = {**pending, "spec": {**pending["spec"], "nodeName": node}}
    scheduler.update_pod(pending, bound)


async def test_pods_of_a_shadow_profile_are_never_queued_or_bound() -> None:
    scheduler, client, _ = _shadowing()
    scheduler.add_pod(make_pod().name("p").scheduler_name("default-scheduler").obj())
    assert scheduler.queue.pop_nowait() is None
    await scheduler.wait_for_bindings()
    assert client.requests == []  # nothing sent: no binding, no report


def test_verdicts_on_another_schedulers_bindings() -> None:
    scheduler, _client, decisions = _shadowing()
    _bound_by_another(scheduler, "agrees", "big")  # LeastAllocated: the big node scores highest
    _bound_by_another(scheduler, "differs", "small")
    _bound_by_another(scheduler, "nowhere", "big", cpu="64")
    assert [(d.pod.name, d.bound_node, d.result) for d in decisions] == [
        ("agrees", "big", "same"),
        ("differs", "small", "different"),
        ("nowhere", "big", "infeasible"),
    ]
    differs = decisions[1]
    assert differs.best == ("big",) and differs.scores["big"] > differs.scores["small"]
    assert "would pick big (scores: big" in differs.describe()
    assert decisions[2].message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    # each bound pod joined the cache after its verdict: the next one is judged with it counted
    assert {p.name for p in scheduler.cache.pods()} == {"agrees", "differs", "nowhere"}


def test_ties_count_as_the_same() -> None:
    scheduler, _client, decisions = _shadowing()
    scheduler.add_node(make_node().name("big-2").capacity(cpu="8", memory="16Gi", pods=20).obj())
    _bound_by_another(scheduler, "tied", "big-2")
    [decision] = decisions
    assert decision.result == "same" and set(decision.best) == {"big", "big-2"}


def test_the_metric_counts_verdicts_per_profile() -> None:
    scheduler, _client, _ = _shadowing()
    metrics = SchedulerMetrics()
    metrics.attach(scheduler)
    _bound_by_another(scheduler, "a", "big")
    _bound_by_another(scheduler, "b", "small")
    _bound_by_another(scheduler, "c", "big")
    value = metrics.registry.get_sample_value
    assert (
        value("kopf_scheduler_shadow_decisions_total", {"profile": "default-scheduler", "result": "same"})
        == 2
    )
    assert (
        value(
            "kopf_scheduler_shadow_decisions_total", {"profile": "default-scheduler", "result": "different"}
        )
        == 1
    )


async def test_run_shadow_makes_every_profile_a_shadow_and_a_pod_bound_before_is_not_judged() -> None:
    client = FakeAPI()
    scheduler = Scheduler(client)
    scheduler.shadow_all = True
    scheduler.set_profile(ProfileSpec(scheduler_name="kopf-scheduler"))
    scheduler.add_node(make_node().name("n1").obj())
    decisions: list[ShadowDecision] = []
    scheduler.shadow_hooks.append(decisions.append)
    scheduler.add_pod(make_pod().name("p").scheduler_name("kopf-scheduler").obj())
    assert scheduler.queue.pop_nowait() is None
    scheduler.add_pod(make_pod().name("old").scheduler_name("kopf-scheduler").node("n1").obj())
    assert decisions == []  # seen only bound: nobody knows the cache it was placed against


def test_a_shadow_profile_may_watch_a_reserved_name() -> None:
    spec = parse_profile({"schedulerName": "default-scheduler", "shadow": True}, ProfileBounds())
    assert spec.shadow and spec.scheduler_name == "default-scheduler"
