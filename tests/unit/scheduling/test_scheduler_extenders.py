"""Scheduling cycles of profiles with extenders (the simulator's loop, real HTTP on loopback): how
extender verdicts enter the FailedScheduling message, which nodes each verb is sent, nominated nodes,
preemption's preempt verb, binding by an extender, ``ignoredByScheduler``, requeueing after an extender
rejection, and that the cycle is awaited, not run eagerly."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from waiting import until

from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.framework.events import Action, ClusterEvent, Resource
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.simulate.client import SimulatedCluster
from kopf_scheduler.simulate.loader import ClusterInput
from kopf_scheduler.simulate.run import SimulationResult, simulate
from kopf_scheduler.testing import make_node, make_pod
from kopf_scheduler.testing.extender_server import Answer, FakeExtender

NAME = "with-extenders"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"


def _nodes(*names: str, cpu: str = "2") -> list[dict[str, Any]]:
    return [make_node().name(n).capacity(cpu=cpu, memory="8Gi", pods=20).obj() for n in names]


def _pod(name: str, cpu: str = "1", priority: int = 0) -> Any:
    return make_pod().name(name).uid(f"uid-{name}").scheduler_name(NAME).req(cpu=cpu).priority(priority)


def _profile(*extenders: dict[str, Any], **spec: Any) -> list[tuple[str, Any]]:
    return [("test", parse_profile({"schedulerName": NAME, "extenders": list(extenders), **spec}))]


async def _run(
    nodes: list[dict[str, Any]], pending: list[Any], profiles: list[tuple[str, Any]], bound: list[Any] = ()
) -> SimulationResult:
    cluster = ClusterInput(
        nodes=nodes, pending_pods=[p.obj() for p in pending], bound_pods=[b.obj() for b in bound]
    )
    return await simulate(cluster, profiles, seed=1)


def _outcome(result: SimulationResult, name: str) -> Any:
    uid = next(p["metadata"]["uid"] for p in result.pods if p["metadata"]["name"] == name)
    return result.outcomes[uid]


async def test_extender_reasons_count_in_the_failed_scheduling_message() -> None:
    answer = {
        "NodeNames": [],
        "FailedAndUnresolvableNodes": {"n1": "too far", "n2": "too far", "n3": "no gpu"},
    }
    with FakeExtender({"filter": Answer(answer)}) as ext:
        result = await _run(
            _nodes("n1", "n2", "n3", "n4", cpu="1"),
            [_pod("p")],
            _profile({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True}),
            bound=[make_pod().name("load").req(cpu="1").node("n4")],
        )
    outcome = _outcome(result, "p")
    assert (outcome.node, outcome.reason) == (None, "Unschedulable")
    assert outcome.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 no gpu, 2 too far. "
        "preemption: 0/4 nodes are "
        f"available: 1 No preemption victims found for incoming pod, 3 {PREEMPTION_NOT_HELPFUL}."
    )
    # the extender saw the nodes the filter plugins passed
    assert ext.requests[0][1]["NodeNames"] == ["n1", "n2", "n3"]


async def test_unschedulable_extender_verdict_without_victims_ends_preemption_with_an_error() -> None:
    """As kube-scheduler: the dry run does not ask extenders, so the node fits with its lower-priority
    pod reprieved: no victim, an error that ends the message; the pod stays Unschedulable."""
    low = make_pod().name("low").req(cpu="100m").node("n1")
    with FakeExtender({"filter": Answer({"NodeNames": [], "FailedNodes": {"n1": "busy"}})}) as ext:
        result = await _run(
            _nodes("n1"),
            [_pod("p", priority=10)],
            _profile({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True}),
            bound=[low],
        )
    outcome = _outcome(result, "p")
    assert (outcome.reason, outcome.message) == (
        "Unschedulable",
        # A post-filter error ends the post-filter phase with that error alone, as upstream's
        # RunPostFilterPlugins does.
        '0/1 nodes are available: 1 busy. preemption: expected at least one victim pod on node "n1"',
    )


@pytest.mark.parametrize(
    ("extender", "nodes_seen"),
    [
        ({"filterVerb": "filter"}, 5),
        ({"prioritizeVerb": "prioritize", "weight": 1}, 5),
        ({}, 1),
    ],
    ids=["filter-extender", "prioritize-extender", "neither"],
)
async def test_without_score_plugins_extenders_still_see_every_feasible_node(
    extender: dict[str, Any], nodes_seen: int
) -> None:
    """``numFeasibleNodesToFind``: one node is enough only without score plugins, filtering extenders and
    prioritizing extenders; the bind request shows which node one examined node led to."""
    verbs = {
        "filter": lambda body: Answer({"NodeNames": body["NodeNames"]}),
        "prioritize": lambda body: Answer([{"Host": n, "Score": 0} for n in body["NodeNames"]]),
        "bind": Answer({"Error": ""}),
    }
    with FakeExtender(verbs) as ext:
        config = {"urlPrefix": ext.url, "nodeCacheCapable": True, "bindVerb": "bind", **extender}
        result = await _run(
            _nodes("n1", "n2", "n3", "n4", "n5"),
            [_pod("p")],
            _profile(config, plugins={"score": {"disabled": [{"name": "*"}]}}),
        )
    node = _outcome(result, "p").node
    seen = {n for verb, body in ext.requests if verb != "bind" for n in body["NodeNames"]}
    assert len(seen) == (nodes_seen if extender else 0)
    assert [body["Node"] for verb, body in ext.requests if verb == "bind"] == [node]
    if not extender:  # only the bind extender: the first feasible node from the rotating start
        assert [v for v, _ in ext.requests] == ["bind"]
        assert node == "n1"


async def test_prioritize_extender_decides_between_equal_nodes() -> None:
    scores = [{"Host": "n1", "Score": 2}, {"Host": "n2", "Score": 9}, {"Host": "n3", "Score": 5}]
    with FakeExtender({"prioritize": Answer(scores)}) as ext:
        result = await _run(
            _nodes("n1", "n2", "n3"),
            [_pod("p")],
            _profile({"urlPrefix": ext.url, "prioritizeVerb": "prioritize", "weight": 3}),
        )
    assert _outcome(result, "p").node == "n2"


async def test_nominated_node_is_tried_alone_first() -> None:
    def filter_(body: dict[str, Any]) -> Answer:
        names = [n["metadata"]["name"] for n in body["Nodes"]["items"]]
        if names == ["n2"]:
            return Answer({"Nodes": {"items": []}, "FailedNodes": {"n2": "not now"}})
        return Answer({"Nodes": {"items": [{"metadata": {"name": "n3"}}]}})

    with FakeExtender({"filter": filter_}) as ext:
        result = await _run(
            _nodes("n1", "n2", "n3"),
            [_pod("p").nominated("n2")],
            _profile({"urlPrefix": ext.url, "filterVerb": "filter"}),
        )
    assert _outcome(result, "p").node == "n3"
    sent = [[n["metadata"]["name"] for n in body["Nodes"]["items"]] for _, body in ext.requests]
    assert sent == [["n2"], ["n1", "n2", "n3"]]


async def test_preempt_verb_prunes_candidates() -> None:
    nodes = _nodes("n1", cpu="1")
    low = make_pod().name("low").uid("low-uid").req(cpu="1").node("n1")
    with FakeExtender({"preempt": Answer({"NodeNameToMetaVictims": {}})}) as ext:
        result = await _run(
            nodes,
            [_pod("high", priority=10)],
            _profile({"urlPrefix": ext.url, "preemptVerb": "preempt"}),
            [low],
        )
    assert _outcome(result, "high").message == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: no candidate node for preemption"
    )
    [(verb, body)] = ext.requests
    assert verb == "preempt"
    assert [p["metadata"]["uid"] for p in body["NodeNameToVictims"]["n1"]["Pods"]] == ["low-uid"]

    # an extender that keeps the candidate: the victim is evicted and the preemptor lands there
    keep = {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "low-uid"}], "NumPDBViolations": 0}}}
    with FakeExtender({"preempt": Answer(keep)}) as ext:
        result = await _run(
            nodes,
            [_pod("high", priority=10)],
            _profile({"urlPrefix": ext.url, "preemptVerb": "preempt"}),
            [low],
        )
    assert _outcome(result, "high").node == "n1"
    assert _outcome(result, "high").victims == ["default/low"]


async def test_preempt_verb_failure() -> None:
    low = make_pod().name("low").req(cpu="1").node("n1")
    with FakeExtender({"preempt": Answer({}, status=500)}) as ext:
        result = await _run(
            _nodes("n1", cpu="1"),
            [_pod("high", priority=10)],
            _profile({"urlPrefix": ext.url, "preemptVerb": "preempt"}),
            [low],
        )
    assert _outcome(result, "high").message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        f"preemption: failed preempt with extender at URL {ext.url}/preempt, code 500"
    )


async def test_extender_binds_instead_of_the_default_binder() -> None:
    with FakeExtender({"bind": Answer({"Error": ""}), "broken": Answer({"Error": "no quota"})}) as ext:
        result = await _run(_nodes("n1"), [_pod("p")], _profile({"urlPrefix": ext.url, "bindVerb": "bind"}))
        assert _outcome(result, "p").node == "n1"
        assert ext.requests == [
            ("bind", {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n1"})
        ]
        result = await _run(_nodes("n1"), [_pod("p")], _profile({"urlPrefix": ext.url, "bindVerb": "broken"}))
    outcome = _outcome(result, "p")
    assert (outcome.node, outcome.reason, outcome.message) == (None, "SchedulerError", "no quota")


async def test_ignored_by_scheduler_resources_skip_the_fit_check() -> None:
    gpu_pod = make_pod().name("p").scheduler_name(NAME).req(**{"example.com/gpu": "1"})
    managed = {"urlPrefix": "http://127.0.0.1:9", "managedResources": [{"name": "example.com/gpu"}]}
    result = await _run(_nodes("n1"), [gpu_pod], _profile(managed))
    assert _outcome(result, "p").message.startswith(
        "0/1 nodes are available: 1 Insufficient example.com/gpu."
    )
    ignored = {**managed, "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}]}
    result = await _run(_nodes("n1"), [gpu_pod], _profile(ignored))
    assert _outcome(result, "p").node == "n1"


async def test_extender_rejection_requeues_on_any_event() -> None:
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    with FakeExtender({"filter": Answer({"NodeNames": [], "FailedNodes": {"n1": "no"}})}) as ext:
        [(_, spec)] = _profile({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True})
        sched.set_profile(spec)
        for node in _nodes("n1"):
            sched.add_node(node)
        pod = _pod("p").obj()
        cluster.pods[pod["metadata"]["uid"]] = pod
        sched.add_pod(pod)
        qp = sched.queue.pop_nowait()
        assert qp is not None
        with pytest.raises(RuntimeError, match="has extenders"):
            sched.schedule_one(qp)  # the eager form refuses: this cycle needs HTTP answers
        await sched.schedule_one_async(qp)  # asks the extender in the background, puts the pod aside
        assert sched.queue.location(qp.pod.uid) not in ("unschedulable", "backoff", "active")
        await sched.wait_for_bindings()
        assert sched.queue.pop_nowait() is qp  # handed back as the same attempt, ahead of the queue
        await sched.schedule_one_async(qp)  # replayed with the answer
        await sched.close_extenders()
    assert len(ext.requests) == 1
    assert qp.unschedulable_plugins == {"Extender"}
    assert sched.queue.location(qp.pod.uid) == "unschedulable"
    # a change no plugin registered for (an unrelated node label) still moves it: extenders say nothing
    node = make_node().name("n1").capacity(cpu="2", memory="8Gi", pods=20).label("any", "thing").obj()
    sched.update_node(node)
    assert sched.queue.location(qp.pod.uid) in ("backoff", "active")
    # what makes that so: the profile registers "any event" for the extenders, as upstream's default
    registered = sched.profiles[NAME].events_to_register()
    assert registered[-1] == ("Extender", ClusterEvent(Resource.WILDCARD, Action.all(), "ExtenderAny"), None)


async def test_a_cycle_cancelled_while_waiting_on_an_extender_requeues_the_pod() -> None:
    """Leadership lost while a pod's extender call is in flight: nothing was assumed yet; the pod goes
    back to the queue."""
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    with FakeExtender({"filter": Answer({"NodeNames": ["n1"]}, delay=10.0)}) as ext:
        [(_, spec)] = _profile({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True})
        sched.set_profile(spec)
        for node in _nodes("n1"):
            sched.add_node(node)
        pod = _pod("p").obj()
        cluster.pods[pod["metadata"]["uid"]] = pod
        sched.add_pod(pod)
        loop = asyncio.create_task(sched.run())
        async with asyncio.timeout(5):  # the filter request is on its way: the cycle waits on it
            while not ext.requests:
                await asyncio.sleep(0.01)
        loop.cancel()  # then the calls in flight, as the service does when the Lease is lost
        with pytest.raises(asyncio.CancelledError):
            await loop
        assert await sched.cancel_bindings() == 1
        await sched.close_extenders()
    assert sched.queue.location("uid-p") == "backoff"
    assert sched.cache.node_info("n1").pods == {}
    assert cluster.bindings == []


@contextlib.asynccontextmanager
async def _running(
    sched: Scheduler, cluster: SimulatedCluster, pods: list[tuple[str, str]]
) -> AsyncIterator[None]:
    """``pods`` ((name, schedulerName)) added, the scheduling loop running until the block ends; then the
    loop and the calls in flight stopped."""
    for name, scheduler_name in pods:
        pod = _pod(name).scheduler_name(scheduler_name).obj()
        cluster.pods[pod["metadata"]["uid"]] = pod
        sched.add_pod(pod)
    loop = asyncio.create_task(sched.run())
    try:
        yield
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
        await sched.cancel_bindings()
        await sched.close_extenders()


async def _bound(cluster: SimulatedCluster, count: int, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        while len(cluster.bindings) < count:
            await asyncio.sleep(0.01)


def _held(answer: Answer) -> tuple[Callable[[Any], Answer], threading.Event]:
    """A verb's reply that comes only once the event returned is set (the extender's handler thread
    waits for it): the test, not the clock, decides when a slow extender answers."""
    release = threading.Event()

    def reply(body: Any) -> Answer:
        release.wait(60)
        return answer

    return reply, release


async def test_a_slow_extender_holds_neither_the_loop_nor_the_order_of_its_own_pods() -> None:
    """While one pod's filter extender holds its answer, another profile's pods are bound; the extender
    profile's second pod waits behind its first, and both are bound in their order once it answers."""
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    reply, release = _held(Answer({"NodeNames": ["n1"]}))
    with FakeExtender({"filter": reply}) as ext:
        [(_, spec)] = _profile(
            {"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True, "httpTimeout": "60s"}
        )
        sched.set_profile(spec)
        sched.set_profile(ProfileSpec(scheduler_name="plain"))
        for node in _nodes("n1", cpu="8"):
            sched.add_node(node)
        for name, scheduler_name in (
            ("slow-1", NAME),
            ("slow-2", NAME),
            ("quick-1", "plain"),
            ("quick-2", "plain"),
        ):
            pod = _pod(name).scheduler_name(scheduler_name).obj()
            cluster.pods[pod["metadata"]["uid"]] = pod
            sched.add_pod(pod)
        loop = asyncio.create_task(sched.run())
        try:
            await _bound(cluster, 2, timeout=10)  # while the extender has not answered
            assert [key for key, _ in cluster.bindings] == ["default/quick-1", "default/quick-2"]
            await until(lambda: ext.requests)
            assert len(ext.requests) == 1  # slow-2 waits behind slow-1 without a call of its own
            release.set()
            await _bound(cluster, 4, timeout=10)
        finally:
            release.set()
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            await sched.cancel_bindings()
            await sched.close_extenders()
    assert [key for key, _ in cluster.bindings][2:] == ["default/slow-1", "default/slow-2"]


async def test_every_try_of_an_attempt_asks_the_extender_about_the_same_nodes() -> None:
    """With 200 nodes only 100 are filtered per cycle, from a start that rotates with every cycle. A
    cycle of another profile runs while the extender answers; the replay still asks nothing new."""
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    with FakeExtender({"filter": lambda args: Answer({"NodeNames": args["NodeNames"]}, delay=0.3)}) as ext:
        [(_, spec)] = _profile(
            {"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True},
            percentageOfNodesToScore=5,
        )
        sched.set_profile(spec)
        sched.set_profile(ProfileSpec(scheduler_name="plain"))
        for node in _nodes(*(f"n{i:03d}" for i in range(200))):
            sched.add_node(node)
        async with _running(sched, cluster, [("slow", NAME), ("quick", "plain")]):
            await _bound(cluster, 2, timeout=10)
    assert [key for key, _ in cluster.bindings] == ["default/quick", "default/slow"]
    [(verb, args)] = ext.requests
    assert verb == "filter" and len(args["NodeNames"]) == 100


async def test_a_cycle_that_raises_during_a_replay_ends_its_extender_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One pod's replayed cycle raises (here: a bug once the answers are in, stood in for by a prioritize
    step that raises for the pod "poison"; no extender answer makes a cycle raise): that pod's attempt
    ends with a SchedulerError and backoff, and the pods of extender profiles queued behind its wait are
    still scheduled."""
    from kopf_scheduler.framework.extenders import scheduling as extending

    prioritize_with_extenders = extending.prioritize

    async def buggy(extenders: Any, pod: Any, nodes: Any) -> Any:
        result = await prioritize_with_extenders(extenders, pod, nodes)  # the replay's calls first
        if pod.name == "poison":
            raise RuntimeError("a bug")
        return result

    monkeypatch.setattr(extending, "prioritize", buggy)

    def prioritize(body: Any) -> Answer:
        return Answer([{"Host": n, "Score": 5} for n in body["NodeNames"]])

    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    with FakeExtender({"prioritize": prioritize}) as ext:
        [(_, spec)] = _profile(
            {"urlPrefix": ext.url, "prioritizeVerb": "prioritize", "weight": 1, "nodeCacheCapable": True}
        )
        sched.set_profile(spec)
        for node in _nodes("n1", "n2", cpu="8"):
            sched.add_node(node)
        async with _running(sched, cluster, [("poison", NAME), ("after-1", NAME), ("after-2", NAME)]):
            await _bound(cluster, 2, timeout=10)
    assert sorted(key for key, _ in cluster.bindings) == ["default/after-1", "default/after-2"]
    poisoned = cluster.outcomes["uid-poison"]
    assert (poisoned.node, poisoned.reason) == (None, "SchedulerError")
    assert sched.queue.location("uid-poison") in ("backoff", "unschedulable", "active")


@pytest.mark.parametrize(
    ("verb", "poison", "fails"),
    [
        ("filter", b"[" * 200_000, True),
        ("prioritize", b'[{"Host": "n1", "Score": 100000000000000000000}]', False),
        ("prioritize", b'[{"Host": "n1", "Score": 1e20}]', False),
    ],
    ids=["filter-nested-200KB", "prioritize-10**20", "prioritize-1e20"],
)
async def test_a_bad_answer_is_that_extenders_error_and_the_loop_goes_on(
    verb: str, poison: bytes, fails: bool
) -> None:
    """Answers upstream's decoder refuses are errors of the extender that sent them, as upstream: a
    filter error fails the pod's attempt with an error that names the extender; a prioritize error costs
    only that extender's scores. Nothing raises out of the cycle, and the pods behind are scheduled."""

    def answer(body: Any) -> Answer:
        if body["Pod"]["metadata"]["name"] == "poison":
            return Answer(poison)
        if verb == "filter":
            return Answer({"NodeNames": body["NodeNames"]})
        return Answer([{"Host": n, "Score": 5} for n in body["NodeNames"]])

    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    with FakeExtender({verb: answer}) as ext:
        extender = {"urlPrefix": ext.url, f"{verb}Verb": verb, "nodeCacheCapable": True}
        [(_, spec)] = _profile({**extender, "weight": 1} if verb == "prioritize" else extender)
        sched.set_profile(spec)
        for node in _nodes("n1", "n2", cpu="8"):
            sched.add_node(node)
        async with _running(sched, cluster, [("poison", NAME), ("after-1", NAME), ("after-2", NAME)]):
            await _bound(cluster, 2 if fails else 3, timeout=10)
    bound = sorted(key for key, _ in cluster.bindings)
    assert bound == (["default/after-1", "default/after-2"] if fails else [
        "default/after-1", "default/after-2", "default/poison"])  # fmt: skip
    if fails:
        poisoned = cluster.outcomes["uid-poison"]
        assert (poisoned.node, poisoned.reason) == (None, "SchedulerError")
        assert poisoned.message == (
            f"decoding the filter answer of extender {ext.url}: invalid JSON: exceeded max depth"
        )


async def test_a_slow_extender_holds_only_its_own_profile() -> None:
    """Two profiles with extenders: while the first one's extender holds its answer, the second
    profile's pods are asked about and bound."""
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    reply, release = _held(Answer({"NodeNames": ["n1"]}))
    with (
        FakeExtender({"filter": reply}) as slow,
        FakeExtender({"filter": Answer({"NodeNames": ["n1"]})}) as quick,
    ):
        for name, ext in ((NAME, slow), ("quick", quick)):
            extender = {
                "urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True, "httpTimeout": "60s",
            }  # fmt: skip
            sched.set_profile(parse_profile({"schedulerName": name, "extenders": [extender]}))
        for node in _nodes("n1", cpu="8"):
            sched.add_node(node)
        pods = [("slow-1", NAME), ("slow-2", NAME), ("quick-1", "quick"), ("quick-2", "quick")]
        try:
            async with _running(sched, cluster, pods):
                await _bound(cluster, 2, timeout=10)  # while the slow extender has not answered
                assert [key for key, _ in cluster.bindings] == ["default/quick-1", "default/quick-2"]
                release.set()
                await _bound(cluster, 4, timeout=10)
        finally:
            release.set()
    assert [key for key, _ in cluster.bindings][2:] == ["default/slow-1", "default/slow-2"]


async def test_extender_answers_that_never_settle_fail_the_attempt_without_holding_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every answer comes after the cluster changed what the cycle asks (a node added meanwhile): after
    MAX_REPLAY_ROUNDS rounds the attempt fails with an error and backoff; the loop never awaited the
    extender itself, so another profile's pod was bound meanwhile."""
    from kopf_scheduler.scheduling import scheduler as scheduler_module

    monkeypatch.setattr(scheduler_module, "MAX_REPLAY_ROUNDS", 2)
    cluster = SimulatedCluster()
    sched = Scheduler(cluster)
    cluster.on_update = sched.update_pod
    added = []

    def answer(body: Any) -> Answer:
        added.append(f"n{len(added) + 2}")  # the cluster changes while the call is in flight
        return Answer({"NodeNames": body["NodeNames"]}, delay=0.2)

    with FakeExtender({"filter": answer}) as ext:
        [(_, spec)] = _profile({"urlPrefix": ext.url, "filterVerb": "filter", "nodeCacheCapable": True})
        sched.set_profile(spec)
        sched.set_profile(ProfileSpec(scheduler_name="plain"))
        for node in _nodes("n1", cpu="8"):
            sched.add_node(node)
        async with _running(sched, cluster, [("unsettled", NAME), ("plain-1", "plain")]):
            async with asyncio.timeout(10):
                while cluster.outcomes.get("uid-unsettled") is None or not cluster.bindings:
                    for name in added:
                        if sched.cache.node_info(name) is None:
                            sched.add_node(_nodes(name, cpu="8")[0])
                    await asyncio.sleep(0.01)
    assert [key for key, _ in cluster.bindings] == ["default/plain-1"]
    outcome = cluster.outcomes["uid-unsettled"]
    assert outcome.reason == "SchedulerError"
    assert "did not settle in 2 rounds" in outcome.message
    assert len(ext.requests) == 2  # two rounds of calls, none awaited by the loop; the third is not made
