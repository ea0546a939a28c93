"""Gang scheduling on a real API server: PodGroups (scheduling.x-k8s.io/v1alpha1, the CRD in crds/) and a
SchedulingProfile with the Coscheduling plugin, as a training operator's job would use them.

- A gang that fits is bound all at once: while its fourth member fits nowhere, the three that fit are
  assumed and wait at Permit, none bound; once the fourth fits, all four are bound.
- A gang of four where only three fit binds none (the fourth rejects the gang); after a node is added,
  all four are bound.
- minResources the cluster cannot hold: refused at PreFilter with the resource gap, nothing bound.
- A gang that times out at Permit releases its reservations, and another pod takes the room.
- Two gangs competing for room for one: one is bound whole, the other waits with none bound; sampled
  from the API server while it runs, no gang is ever half bound once settled, and never both at once.
  Once the winner goes, the waiting gang is bound whole.
- A member deleted while its siblings wait at Permit releases them: they return to the queue (held
  there, the gang now short of members), nothing is bound, and another pod takes the room they held.
- The PodGroup's status shows the phase and the member counts, as `kubectl get podgroups` does.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from operator_harness import Operators, Scope, kubectl, wait_profile, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
READY = "e2e.kopf-scheduler.dev/gang-ready"


def on_one_node(reason: str) -> str:
    """kube-scheduler's report of a pod rejected at Permit: a FitError of the one node tried."""
    return f"0/1 nodes are available: 1 {reason}."


def _three_wait_at_permit(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, timeout: int, ports: bool = False
) -> tuple[Any, Any, list[str]]:
    """One node with room for three members of a gang of four (the fourth fits nowhere); the three wait
    at Permit holding the node, so a pod needing all of it cannot go there. Returns the node, the operator
    and the members' names."""
    (node,) = scope.nodes(1, cpu="3", memory="8Gi", pods="110")
    operator = operators.start("op", lease_namespace=scope.namespace, ports=ports)
    operator.wait_leading()
    # 100 %: the member that fits nowhere does not reject the gang
    scheduler = _gang_profile(control_plane, scope, podGroupRejectPercentage=100)
    _pod_group(control_plane, scope, "train", 4, scheduleTimeoutSeconds=timeout)
    members = [f"worker-{i}" for i in range(4)]
    for name in members[:3]:
        _member(scope, name, "train", scheduler)
    _member(scope, members[3], "train", scheduler, selector={**scope.label, READY: "never"})
    scope.wait_event("FailedScheduling", members[3])

    scope.create_pod("other", requests={"cpu": "3", "memory": "100Mi"})
    event = scope.wait_event("FailedScheduling", "other")
    assert "Insufficient cpu" in event["message"], dumps(event)
    assert scope.bound() == []
    return node, operator, members


def _podgroups(namespace: str) -> str:
    return f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"


def _gang_profile(cp: ClusterHarness, scope: Scope, **args: int) -> str:
    """A gang-scheduling profile of this test; returns its schedulerName."""
    scheduler = scope.name("gang")
    scope.create_profile(
        scope.name("gang"),
        {
            "schedulerName": scheduler,
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [{"name": "Coscheduling", "args": args}],
        },
    )
    wait_profile(cp, scope.name("gang"), "True")
    return scheduler


def _pod_group(cp: ClusterHarness, scope: Scope, name: str, min_member: int, **spec: Any) -> None:
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": scope.namespace},
        "spec": {"minMember": min_member, **spec},
    }
    cp.post(_podgroups(scope.namespace), body)


def _member(
    scope: Scope,
    name: str,
    group: str,
    scheduler: str,
    cpu: str = "1",
    selector: dict[str, str] | None = None,
) -> None:
    body = scope.pod(name, scheduler, requests={"cpu": cpu, "memory": "100Mi"}, selector=selector)
    body["metadata"]["labels"] = {GROUP_LABEL: group}
    scope.cp.post(f"/api/v1/namespaces/{scope.namespace}/pods", body)


def _status(cp: ClusterHarness, scope: Scope, name: str) -> dict[str, Any]:
    return dict(cp.get(f"{_podgroups(scope.namespace)}/{name}").get("status") or {})


def _wait_status(cp: ClusterHarness, scope: Scope, name: str, timeout: float = 15.0, **want: Any) -> None:
    wait_until(
        lambda: (s := _status(cp, scope, name)) and all(s.get(k, 0) == v for k, v in want.items()) and s,
        timeout,
        f"PodGroup {name} status {want}",
    )


def _stays_unbound(scope: Scope, names: list[str], scheduler: str) -> None:
    """None of ``names`` is bound, checked once a barrier pod created after them has been bound by the
    same scheduler: the loop had its chance to take them (their events came first; a pod without a
    group needs nothing from them), so their absence is a decision, not a slow start."""
    barrier = scope.name(f"barrier-{len(scope.bound())}")
    scope.create_pod(barrier, scheduler, requests={"cpu": "1m", "memory": "1Mi"})
    scope.wait_bound(barrier, timeout=20)
    bound = sorted(set(scope.bound()) & set(names))
    assert not bound, f"bound before the gang was complete: {bound}"
    scope.cp.delete(f"/api/v1/namespaces/{scope.namespace}/pods/{barrier}")
    wait_until(lambda: barrier not in scope.pods(), 15, f"barrier pod {barrier} deleted")


def _label_nodes(cp: ClusterHarness, nodes: list[str], labels: dict[str, str]) -> None:
    for node in nodes:
        resp = cp.api.request(
            "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        assert resp.status == 200, resp.text()


def _set_phase(cp: ClusterHarness, scope: Scope, name: str, phase: str) -> None:
    """What a kubelet would report (there is none here)."""
    resp = cp.api.request(
        "PATCH", f"/api/v1/namespaces/{scope.namespace}/pods/{name}/status", {"status": {"phase": phase}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert resp.status == 200, resp.text()


def test_a_gang_that_fits_is_bound_at_once_and_only_once_every_member_is_assumed(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(2, cpu="2", memory="8Gi", pods="110")
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    scheduler = _gang_profile(control_plane, scope, podGroupRejectPercentage=50)
    _pod_group(control_plane, scope, "train", 4)
    members = [f"worker-{i}" for i in range(4)]
    for name in members[:3]:
        _member(scope, name, "train", scheduler)
    _stays_unbound(scope, members, scheduler)  # three of four exist: held back before any attempt
    _member(scope, members[3], "train", scheduler, selector={**scope.label, READY: "yes"})

    # the fourth fits nowhere yet; the other three are assumed and wait for it at Permit
    event = scope.wait_event("FailedScheduling", members[3])
    assert "didn't match Pod's node affinity/selector" in event["message"], dumps(event)
    _stays_unbound(scope, members, scheduler)
    _wait_status(control_plane, scope, "train", phase="Scheduling", scheduled=0)

    _label_nodes(control_plane, nodes, {READY: "yes"})
    for name in members:
        scope.wait_bound(name, timeout=20)
    _wait_status(control_plane, scope, "train", phase="Scheduling", scheduled=4, running=0)
    status = _status(control_plane, scope, "train")
    assert status.get("scheduleStartTime"), dumps(status)

    for name in members:  # a kubelet starts them
        _set_phase(control_plane, scope, name, "Running")
    _wait_status(control_plane, scope, "train", phase="Running", scheduled=4, running=4)
    table = kubectl(control_plane, "get", "podgroups", "-n", scope.namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "PHASE",
        "MINMEMBER",
        "SCHEDULED",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "AGE",
    ]
    assert table[1].split()[:5] == ["train", "Running", "4", "4", "4"], table
    assert not operator.problems(), operator.problems()


def test_a_gang_where_only_three_fit_binds_none_and_all_once_a_node_is_added(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(1, cpu="3", memory="8Gi", pods="110")
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    scheduler = _gang_profile(control_plane, scope)
    _pod_group(control_plane, scope, "train", 4)
    members = [f"worker-{i}" for i in range(4)]
    for name in members:
        _member(scope, name, "train", scheduler)

    rejected = re.compile(r"PodGroup \S+/train gets rejected due to Pod worker-\d is unschedulable")
    wait_until(
        lambda: [e for e in scope.events("FailedScheduling") if rejected.search(e["message"])],
        20,
        "the gang rejected by its member that fits nowhere",
    )
    # the members waiting at Permit are released by that PostFilter: their binding cycles end as tasks of
    # their own, so their events are written just after the rejecting member's
    released_message = on_one_node("optimistic rejection in PostFilter")
    wait_until(
        lambda: [e for e in scope.events("FailedScheduling") if e["message"] == released_message],
        20,
        "the waiting members released by the gang's rejection",
    )
    _stays_unbound(scope, members, scheduler)

    scope.nodes(1, "extra", cpu="2", memory="8Gi", pods="110")
    for name in members:
        scope.wait_bound(name, timeout=40)
    _wait_status(control_plane, scope, "train", phase="Scheduling", scheduled=4)
    assert not operator.problems(), operator.problems()


def test_min_resources_the_cluster_cannot_hold_are_refused_at_pre_filter(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(1, cpu="4", memory="8Gi", pods="110")
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    scheduler = _gang_profile(control_plane, scope)
    _pod_group(control_plane, scope, "huge", 2, minResources={"cpu": "100000"})
    for name in ("worker-0", "worker-1"):
        _member(scope, name, "huge", scheduler)
    event = scope.wait_event("FailedScheduling", "worker-0", timeout=20)
    assert re.search(r"^0/\d+ nodes are available: resource gap: map\[cpu:\d+\]\.", event["message"]), dumps(
        event
    )
    assert "PodGroup " in event["message"] and "gets rejected due to Pod worker-0" in event["message"], dumps(
        event
    )
    _stays_unbound(scope, ["worker-0", "worker-1"], scheduler)
    _wait_status(control_plane, scope, "huge", phase="Scheduling", scheduled=0)
    assert not operator.problems(), operator.problems()


def test_a_timed_out_gang_releases_its_reservations_for_another_pod(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    node, operator, _ = _three_wait_at_permit(control_plane, operators, scope, timeout=4)

    timed_out = on_one_node("rejected due to timeout after waiting 4s at plugin Coscheduling")
    wait_until(
        lambda: [
            e
            for e in scope.events("FailedScheduling")
            if e["message"] in (timed_out, on_one_node("rejection in Unreserve"))
        ],
        20,
        "the gang's members released when their wait timed out",
    )
    pod = scope.wait_bound("other", timeout=20)
    assert pod["spec"]["nodeName"] == node
    assert sorted(scope.bound()) == ["other"]
    assert not operator.problems(), operator.problems()


def _bound_by_gang(scope: Scope, gangs: dict[str, list[str]]) -> dict[str, int]:
    bound = set(scope.bound())
    return {gang: len(bound & set(members)) for gang, members in gangs.items()}


def test_two_gangs_competing_for_room_for_one_bind_one_whole_and_leave_the_other_waiting(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    # room for six pods: three of each gang would fit, which is what pod-by-pod scheduling would do
    scope.nodes(2, cpu="3", memory="8Gi", pods="110")
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    scheduler = _gang_profile(control_plane, scope)
    gangs = {gang: [f"{gang}-{i}" for i in range(4)] for gang in ("blue", "green")}
    for gang in gangs:
        _pod_group(control_plane, scope, gang, 4)
    for blue, green in zip(gangs["blue"], gangs["green"], strict=True):  # interleaved, as they arrive
        _member(scope, blue, "blue", scheduler)
        _member(scope, green, "green", scheduler)

    samples: list[dict[str, int]] = []

    def sample() -> dict[str, int] | None:
        counts = _bound_by_gang(scope, gangs)
        samples.append(counts)
        assert not all(counts.values()), f"members of both gangs bound: {samples}"
        return counts if 4 in counts.values() else None

    settled = wait_until(sample, 30, "one gang bound whole", interval=0.05)
    winner = next(gang for gang, n in settled.items() if n == 4)
    loser = next(gang for gang in gangs if gang != winner)
    # the loser was tried and rejected as a whole (a positive signal that it waits, not that it was slow)
    rejected = re.compile(rf"PodGroup \S+/{loser} gets rejected due to Pod {loser}-\d is unschedulable")
    wait_until(
        lambda: sample() and [e for e in scope.events("FailedScheduling") if rejected.search(e["message"])],
        20,
        f"gang {loser} rejected",
    )
    # settled: the winner whole, the loser with no member bound, also after the loop took a later pod
    _stays_unbound(scope, gangs[loser], scheduler)
    sample()
    after = samples[samples.index(settled) :]
    assert all(s == {winner: 4, loser: 0} for s in after), after
    assert all(n in (0, 4) for s in after for n in s.values()), after
    _wait_status(control_plane, scope, winner, phase="Scheduling", scheduled=4)
    _wait_status(control_plane, scope, loser, phase="Scheduling", scheduled=0)

    # the waiting gang was waiting: once the winner is gone it is bound, all four
    for name in gangs[winner]:
        control_plane.request(
            "DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/{name}", {"gracePeriodSeconds": 0},
            expect=(200,),
        )  # fmt: skip
    for name in gangs[loser]:
        scope.wait_bound(name, timeout=40)
    assert sorted(scope.bound()) == sorted(gangs[loser])
    assert not operator.problems(), operator.problems()


def test_deleting_a_member_waiting_at_permit_releases_its_siblings_and_their_room(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    # a long timeout: it does not expire here
    node, operator, members = _three_wait_at_permit(control_plane, operators, scope, timeout=300, ports=True)

    control_plane.request(
        "DELETE", f"/api/v1/namespaces/{scope.namespace}/pods/{members[0]}", {"gracePeriodSeconds": 0},
        expect=(200,),
    )  # fmt: skip
    # its waiting siblings are rejected and go back to the queue ...
    released = wait_until(
        lambda: (
            {
                e["involvedObject"]["name"]
                for e in scope.events("FailedScheduling")
                if e["message"] == on_one_node("rejection in Unreserve")
            }
            >= set(members[1:3])
            or None
        ),
        20,
        "the waiting siblings released",
    )
    assert released
    # ... and the room they held is free: the other pod is bound there, and no member is
    pod = scope.wait_bound("other", timeout=20)
    assert pod["spec"]["nodeName"] == node
    assert sorted(scope.bound()) == ["other"]
    assert sorted(scope.unbound()) == sorted(members[1:])
    assert not operator.problems(), operator.problems()
