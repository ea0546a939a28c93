"""Scheduler extenders on a real control plane: the operator (``kopf-scheduler run``) and the upstream
kube-scheduler v1.37, configured with the same extenders, schedule twin pods; both must send the
extenders the same requests (verb, pod, node names) and reach the same decision: the node, or the same
FailedScheduling message and PodScheduled condition.

The extenders are HTTP servers in this test process: the example extender (``examples/extender``:
filter by label, prioritize by label value, bind through the API server) and a broken one that answers
500, consulted only for pods requesting its managed resource (``ignoredByScheduler``). kube-scheduler
gets them in its KubeSchedulerConfiguration (``extenders:``), the operator in a SchedulingProfile's
``spec.extenders``: the very same list.

This module runs its own control plane: kube-scheduler's extenders see every node it knows, so the
module's nodes must be the only ones. Twins are scheduled one after the other (kube-scheduler's first),
each against the same nodes; a bound twin is deleted before the next pod is created.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from operator_harness import Operators, condition, wait_profile, wait_until

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import DevCluster, create_nodes
from kopf_scheduler.devcluster.cluster import default_crds_dir
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.testing.extender_server import Answer, FakeExtender

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "extender" / "extender.py"
UPSTREAM = "default-scheduler"
OURS = "kopf-scheduler-extenders"
BROKEN_RESOURCE = "example.com/broken"
LABEL = "example.com/extender"
SCORE = "example.com/extender-score"
#: role -> (labels, cpu): two nodes the example extender rejects (one for good), three it allows
NODES = {
    "deny": ({}, "16"),
    "never": ({LABEL: "never"}, "16"),
    "low": ({LABEL: "allow", SCORE: "2"}, "4"),
    "high": ({LABEL: "allow", SCORE: "9"}, "4"),
    "mid": ({LABEL: "allow", SCORE: "5"}, "4"),
}


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("example_extender", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def extenders_config(example: str, broken: str) -> list[dict[str, Any]]:
    """The one ``extenders`` list both schedulers get."""
    return [
        {
            "urlPrefix": f"{example}/example",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 100,  # the extender's scores decide between the allowed nodes
            "bindVerb": "bind",
            "httpTimeout": "10s",
        },
        {
            "urlPrefix": f"{broken}/broken",
            "filterVerb": "filter",
            "managedResources": [{"name": BROKEN_RESOURCE, "ignoredByScheduler": True}],
        },
    ]


@dataclass
class Setup:
    cp: ClusterHarness
    example: Any
    broken: FakeExtender
    namespace: str
    nodes: dict[str, str]  # role -> node name
    total: int


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    workdir = tmp_path_factory.mktemp("extenders")
    example = load_example().ExampleExtender().start()
    broken = FakeExtender({"filter": Answer({}, status=500)}).__enter__()
    dev = DevCluster(workdir / "cluster", crds_dir=default_crds_dir(), die_with_parent=True)
    atexit.register(dev.down)
    operators = Operators(dev.kubeconfig, workdir)
    try:
        try:
            dev.up()
        except UsageError as e:  # binaries missing: `make controlplane` was not run
            pytest.fail(f"control plane not available: {e}", pytrace=False)
        example.api_server, example.token, example.ca_file = dev.server, dev.token, str(dev.ca_file)
        config = extenders_config(example.url, broken.url)
        dev.start_kube_scheduler(config={"extenders": config})
        cp = ClusterHarness.of(dev)
        namespace = cp.create_namespace("ext")
        nodes: dict[str, str] = {}
        for role, (labels, cpu) in NODES.items():
            template = {
                "metadata": {"labels": labels},
                "status": {
                    "capacity": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                    "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
                },
            }
            [name] = asyncio.run(create_nodes(cp.api, 1, prefix=f"ext-{role}-", template=template)).names
            nodes[role] = name
        operator = operators.start("op", lease_namespace=namespace)
        operator.wait_leading()
        cp.post(
            "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles",
            {
                "apiVersion": "kopf-scheduler.io/v1alpha1",
                "kind": "SchedulingProfile",
                "metadata": {"name": "extenders"},
                "spec": {"schedulerName": OURS, "extenders": config},
            },
        )
        wait_profile(cp, "extenders", "True")
        yield Setup(cp, example, broken, namespace, nodes, len(NODES))
        assert not operator.problems(), operator.problems()
    finally:
        operators.stop_all()
        dev.down()
        atexit.unregister(dev.down)
        example.stop()
        broken.__exit__(None, None, None)


# -- one twin ----------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    uid: str
    node: str | None
    reason: str | None  # PodScheduled reason when not bound
    condition: str | None  # PodScheduled message
    event: str | None  # the FailedScheduling note
    requests: list[tuple[str, str, tuple[str, ...]]]  # (extender, verb, node names) of the first attempt


def first_attempt(s: Setup, uid: str, node: str | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """What the extenders were asked for this pod, up to its bind or its first error."""
    asked = [("example", r["verb"], tuple(sorted(r["nodes"]))) for r in s.example.requests if r["uid"] == uid]
    broken = [
        ("broken", verb, tuple(sorted(n["metadata"]["name"] for n in body["Nodes"]["items"])))
        for verb, body in s.broken.requests
        if body["Pod"]["metadata"]["uid"] == uid
    ]
    if broken:  # the broken extender ends the attempt: cut at its first call
        first_filter = next(i for i, a in enumerate(asked) if a[1] == "filter")
        return [asked[first_filter], broken[0]]
    if node is not None:
        return asked
    return asked[:1]  # unschedulable: later attempts (any event requeues it) repeat the first


def schedule(
    s: Setup,
    name: str,
    scheduler: str,
    *,
    limits: dict[str, str] | None = None,
    timeout: float = 30.0,
    **options: Any,
) -> Outcome:
    body = pod_manifest(name, s.namespace, schedulerName=scheduler, **options)
    if limits:  # extended resources need them (equal to the requests)
        body["spec"]["containers"][0]["resources"]["limits"] = dict(limits)
    created = s.cp.post(f"/api/v1/namespaces/{s.namespace}/pods", body)
    uid = created["metadata"]["uid"]
    path = f"/api/v1/namespaces/{s.namespace}/pods/{name}"

    def settled() -> dict[str, Any] | None:
        pod = s.cp.get(path)
        scheduled = condition(pod, "PodScheduled")
        if pod["spec"].get("nodeName") or (scheduled.get("status") == "False" and scheduled.get("message")):
            return dict(pod)
        return None

    pod = wait_until(settled, timeout, f"{scheduler} deciding on {name}")
    node = pod["spec"].get("nodeName")
    scheduled = condition(pod, "PodScheduled")
    event = None if node else failed_scheduling_note(s, uid, scheduled.get("message"))
    broken = BROKEN_RESOURCE in (limits or {})
    wait_until(
        lambda: attempt_recorded(s, uid, node, broken), 10, f"the extenders' record of {name}'s attempt"
    )
    return Outcome(
        uid=uid,
        node=node,
        reason=None if node else scheduled.get("reason"),
        condition=None if node else scheduled.get("message"),
        event=event,
        requests=first_attempt(s, uid, node),
    )


def attempt_recorded(s: Setup, uid: str, node: str | None, broken: bool) -> bool:
    """Whether the extenders recorded the request that ends the pod's first attempt: the broken
    extender's call, the bind (which bound it), or the example's filter (which left it unschedulable).
    Each is noted before it is answered, and the scheduler waits for the answer, so this holds once the
    pod is decided; it is checked rather than assumed."""
    asked = [r["verb"] for r in s.example.requests if r["uid"] == uid]
    if broken:
        return "filter" in asked and any(b["Pod"]["metadata"]["uid"] == uid for _, b in s.broken.requests)
    return bool(asked) and (node is None or asked[-1] == "bind")


def failed_scheduling_note(s: Setup, uid: str, expected: str | None) -> str | None:
    deadline = time.monotonic() + 5.0
    while True:
        events = [
            e
            for e in s.cp.get(f"/apis/events.k8s.io/v1/namespaces/{s.namespace}/events")["items"]
            if e["regarding"].get("uid") == uid and e.get("reason") == "FailedScheduling"
        ]
        note = events[-1]["note"] if events else None
        if note == expected or time.monotonic() > deadline:
            return note
        time.sleep(0.1)


def delete(s: Setup, name: str) -> None:
    s.cp.delete(f"/api/v1/namespaces/{s.namespace}/pods/{name}")
    wait_until(
        lambda: s.cp.api.request("GET", f"/api/v1/namespaces/{s.namespace}/pods/{name}").status == 404,
        10,
        f"pod {name} gone",
    )


def twins(s: Setup, name: str, **options: Any) -> tuple[Outcome, Outcome]:
    """The same pod through kube-scheduler, then (the first one deleted) through the operator."""
    theirs = schedule(s, f"{name}-upstream", UPSTREAM, **options)
    delete(s, f"{name}-upstream")
    ours = schedule(s, f"{name}-ours", OURS, **options)
    delete(s, f"{name}-ours")
    return theirs, ours


def test_filter_prioritize_and_bind_match_kube_scheduler(setup: Setup) -> None:
    theirs, ours = twins(setup, "web", requests={"cpu": "100m", "memory": "100Mi"})
    n = setup.nodes
    allowed = tuple(sorted((n["low"], n["high"], n["mid"])))
    expected = [
        ("example", "filter", tuple(sorted(n.values()))),
        ("example", "prioritize", allowed),
        ("example", "bind", (n["high"],)),
    ]
    assert theirs.requests == expected, dumps(theirs.__dict__)
    assert ours.requests == expected, dumps(ours.__dict__)
    assert theirs.node == ours.node == n["high"]
    # the extender bound both; each scheduler then reported it, named after the profile as upstream
    for outcome, name, controller in (
        (theirs, "web-upstream", UPSTREAM),
        (ours, "web-ours", OURS),
    ):
        events = [
            e
            for e in setup.cp.get(f"/apis/events.k8s.io/v1/namespaces/{setup.namespace}/events")["items"]
            if e["regarding"].get("uid") == outcome.uid and e.get("reason") == "Scheduled"
        ]
        assert [(e["note"], e["reportingController"]) for e in events] == [
            (f"Successfully assigned {setup.namespace}/{name} to {n['high']}", controller)
        ], dumps(events)


def test_extender_rejections_in_the_message_match_kube_scheduler(setup: Setup) -> None:
    # 8 cpu fit only the two nodes the example extender rejects
    theirs, ours = twins(setup, "big", requests={"cpu": "8"})
    n = setup.nodes
    assert theirs.node is None and ours.node is None
    assert theirs.requests == ours.requests == [("example", "filter", tuple(sorted((n["deny"], n["never"]))))]
    expected = (
        f"0/{setup.total} nodes are available: 1 node(s) didn't have label {LABEL}=allow, "
        f"1 node(s) had label {LABEL}=never, 3 Insufficient cpu. preemption: 0/{setup.total} "
        "nodes are "
        "available: 1 No preemption victims found for incoming pod, 4 Preemption is not helpful for "
        "scheduling."
    )
    assert (theirs.condition, theirs.event) == (expected, expected), dumps(theirs.__dict__)
    assert (ours.condition, ours.event) == (expected, expected), dumps(ours.__dict__)
    assert theirs.reason == ours.reason == "Unschedulable"


def test_failing_extender_error_matches_kube_scheduler(setup: Setup) -> None:
    theirs, ours = twins(
        setup, "gpu", requests={"cpu": "100m", BROKEN_RESOURCE: "1"}, limits={BROKEN_RESOURCE: "1"}
    )
    n = setup.nodes
    allowed = tuple(sorted((n["low"], n["high"], n["mid"])))
    expected_requests = [("example", "filter", tuple(sorted(n.values()))), ("broken", "filter", allowed)]
    assert theirs.requests == expected_requests, dumps(theirs.__dict__)
    assert ours.requests == expected_requests, dumps(ours.__dict__)
    message = f"failed filter with extender at URL {setup.broken.url}/broken/filter, code 500"
    assert (theirs.reason, theirs.condition, theirs.event) == ("SchedulerError", message, message)
    assert (ours.reason, ours.condition, ours.event) == ("SchedulerError", message, message)
