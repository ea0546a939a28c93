"""SchedulingProfiles steer the running operator, as a user sees it with kubectl: an applied profile gets
``Accepted=True`` for its generation and serves its schedulerName; an update changes placements without
a restart; an invalid update is refused (by the API server where the CRD schema can tell, else by the
operator with ``Accepted=False`` and a message naming the field) while the last good version keeps
serving; a deleted profile stops serving its name; of two profiles claiming one schedulerName the older
serves; the profiles shipped in ``profiles/`` are accepted by the API server and the operator; and a
restarted operator leaves statuses that are still true untouched.

Every "nothing happened" check first proves that the operator had its chance: a pod of a name nobody
serves is followed by a barrier pod the same operator serves, created after it (one pod watch, so the
operator has seen the first once it binds the second, and taken them from its queue in that order); a
restarted operator's silence on statuses is read once it has written the status of a profile created
after it started (every profile event reconciles all profiles, that one last).

Placements tell the scoring strategies apart: node "loaded" runs a pod holding half its cpu and memory,
node "empty" nothing, and the profiles score with NodeResourcesFit alone, so LeastAllocated picks
"empty" and MostAllocated picks "loaded" for every small pod here.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import (
    PROFILES,
    Operators,
    Scope,
    condition,
    get_profile,
    kubectl,
    wait_profile,
    wait_until,
)

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def two_nodes(scope: Scope) -> tuple[str, str]:
    """Nodes "loaded" (a pod requests 2 of 4 cpu and 16 of 32Gi) and "empty"."""
    [loaded] = scope.nodes(1, "loaded")
    [empty] = scope.nodes(1, "empty")
    scope.create_pod("load", requests={"cpu": "2", "memory": "16Gi"}, nodeName=loaded)
    return loaded, empty


def spec(scheduler_name: str, strategy: str, *, score: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A profile scoring with NodeResourcesFit alone, with ``strategy``."""
    return {
        "schedulerName": scheduler_name,
        "plugins": {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": score if score is not None else [{"name": "NodeResourcesFit", "weight": 1}],
            }
        },
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}],
    }


def manifest(name: str, body: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name},
        "spec": body,
    }


def apply(cp: ClusterHarness, name: str, body: dict[str, Any]) -> None:
    kubectl(cp, "apply", "-f", "-", input=json.dumps(manifest(name, body)))


def place(scope: Scope, name: str, scheduler_name: str) -> str:
    scope.create_pod(name, scheduler_name)
    return str(scope.wait_bound(name)["spec"]["nodeName"])


def after_the_second_of(timestamp: str) -> None:
    """Until the wall clock is past the whole second of ``timestamp`` (an API server's
    ``creationTimestamp``, whole seconds): an object created then is newer by creation time."""
    second = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    wait_until(lambda: time.time() >= second + 1.0, 5, f"the clock past {timestamp}", interval=0.02)


def barrier(scope: Scope, name: str) -> None:
    """A pod the built-in default profile serves, created now and bound (with its Scheduled event) by the
    operator: every pod created before it has been seen and, had it been served, taken from the queue
    first (same priority, earlier)."""
    scope.create_pod(name)
    scope.wait_bound(name)
    scope.wait_event("Scheduled", name)


def assert_serving(profile: dict[str, Any], generation: int) -> None:
    for kind, status in (("Accepted", "True"), ("Ready", "True"), ("Stalled", "False")):
        c = condition(profile, kind)
        got = (c.get("status"), c.get("observedGeneration"))
        assert got == (status, generation), dumps(profile["status"])
    assert profile["status"]["observedGeneration"] == generation


def test_profile_updates_change_placements_live(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    loaded, empty = two_nodes(scope)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    name, sched = scope.name("profile"), scope.name("sched")
    scope.profiles.append(name)

    apply(control_plane, name, spec(sched, "LeastAllocated"))
    profile = wait_profile(control_plane, name, "True")
    assert_serving(profile, 1)
    assert profile["status"]["effectivePlugins"]["score"] == [{"name": "NodeResourcesFit", "weight": 1}]
    assert place(scope, "p1", sched) == empty

    apply(control_plane, name, spec(sched, "MostAllocated"))
    assert_serving(wait_profile(control_plane, name, "True"), 2)
    assert place(scope, "p2", sched) == loaded

    # an invalid update the API server accepts (the CRD cannot know the plugins): refused by the
    # operator, naming the field; generation 2 keeps serving
    apply(control_plane, name, spec(sched, "LeastAllocated", score=[{"name": "NoSuchPlugin", "weight": 1}]))
    profile = wait_profile(control_plane, name, "False", reason="InvalidSpec")
    accepted = condition(profile, "Accepted")
    assert accepted["observedGeneration"] == 3, dumps(profile["status"])
    message = accepted["message"]
    assert message.startswith("spec.plugins.score.enabled[0].name: unknown plugin 'NoSuchPlugin'"), message
    assert message.endswith(f"(generation 2 keeps serving {sched!r})"), message
    assert condition(profile, "Ready")["status"] == "True", dumps(profile["status"])
    assert condition(profile, "Stalled")["status"] == "True", dumps(profile["status"])
    # and `kubectl describe sprof` shows why, as a Warning event on the profile (cluster-scoped: its
    # event lives in namespace default)
    warning = wait_until(lambda: _profile_events(control_plane, name), 15, "the refused profile's event")
    assert [(e["type"], e["reason"], e["note"]) for e in warning] == [("Warning", "InvalidSpec", message)]
    assert warning[0]["regarding"]["kind"] == "SchedulingProfile"
    assert place(scope, "p3", sched) == loaded  # still MostAllocated

    # weight 0: already the API server refuses it (the CRD schema), naming the field; nothing changes
    zero = spec(sched, "LeastAllocated", score=[{"name": "NodeResourcesFit", "weight": 0}])
    refused = kubectl(control_plane, "apply", "-f", "-", check=False, input=json.dumps(manifest(name, zero)))
    assert refused.returncode != 0 and "spec.plugins.score.enabled[0].weight" in refused.stderr, (
        refused.stderr
    )
    assert get_profile(control_plane, name)["metadata"]["generation"] == 3
    assert place(scope, "p4", sched) == loaded

    # deleted: its schedulerName is served no more; a new pod gets neither a node nor an event from us
    kubectl(control_plane, "delete", "schedulingprofile", name)
    operator.wait_for_log(f"schedulerName {sched!r} is no longer served", timeout=10)
    scope.create_pod("orphan", sched)
    barrier(scope, "after-orphan")
    orphan = scope.get_pod("orphan")
    assert not orphan["spec"].get("nodeName") and not condition(orphan, "PodScheduled"), dumps(orphan)
    assert not scope.events(pod="orphan"), dumps(scope.events(pod="orphan"))
    # applied again, the profile picks up the pod that waited for its name
    apply(control_plane, name, spec(sched, "MostAllocated"))
    assert_serving(wait_profile(control_plane, name, "True"), 1)
    assert scope.wait_bound("orphan")["spec"]["nodeName"] == loaded

    # all of it live: one process, one initial list
    assert operator.alive and operator.log().count("initial lists:") == 1
    assert not operator.problems(), operator.problems()


def test_older_profile_wins_a_scheduler_name(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    loaded, empty = two_nodes(scope)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    sched = scope.name("sched")
    older, newer = scope.name("a-older"), scope.name("b-newer")
    created = scope.create_profile(older, spec(sched, "LeastAllocated"))
    assert_serving(wait_profile(control_plane, older, "True"), 1)
    after_the_second_of(created["metadata"]["creationTimestamp"])
    scope.create_profile(newer, spec(sched, "MostAllocated"))
    assert (
        get_profile(control_plane, newer)["metadata"]["creationTimestamp"]
        > created["metadata"]["creationTimestamp"]
    )

    profile = wait_profile(control_plane, newer, "False", reason="SchedulerNameConflict")
    accepted = condition(profile, "Accepted")
    assert (
        accepted["message"]
        == f"schedulerName {sched!r} is already served by SchedulingProfile {older!r} (older)"
    )
    assert condition(profile, "Ready")["status"] == "False", dumps(profile["status"])
    assert_serving(get_profile(control_plane, older), 1)
    assert place(scope, "p1", sched) == empty  # the older one's LeastAllocated

    control_plane.delete(f"{PROFILES}/{older}")
    assert_serving(wait_profile(control_plane, newer, "True"), 1)
    assert place(scope, "p2", sched) == loaded  # now the newer one's MostAllocated
    assert not operator.problems(), operator.problems()


def test_shipped_profiles_are_accepted(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    loaded, empty = two_nodes(scope)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    files = sorted((REPO / "profiles").glob("*.yaml"))
    assert files
    names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in files]
    scope.profiles.extend(names)  # deleted at the end, whatever fails from here on
    out = kubectl(control_plane, "apply", "-f", str(REPO / "profiles")).stdout
    applied = [line.split()[0].split("/", 1)[1] for line in out.splitlines()]
    assert sorted(applied) == sorted(names), out

    for name in names:
        profile = wait_profile(control_plane, name, "True")
        assert_serving(profile, profile["metadata"]["generation"])
        assert profile["status"]["effectivePlugins"]["bind"] == ["DefaultBinder"], dumps(profile["status"])
    # `default` now serves kopf-scheduler (the built-in one steps aside); both do what they say
    served = {get_profile(control_plane, n)["spec"]["schedulerName"]: n for n in names}
    assert served == {
        "kopf-scheduler": "default",
        "kopf-scheduler-bin-packing": "bin-packing",
        "kopf-scheduler-fast": "fast-and-simple",
        "kopf-scheduler-gang": "gang-scheduling",
        "kopf-scheduler-spreading": "spreading",
    }, served
    assert place(scope, "packed", "kopf-scheduler-bin-packing") == loaded
    assert place(scope, "spread", "kopf-scheduler") == empty
    printed = kubectl(control_plane, "get", "sprof", *names).stdout  # the printer columns
    assert all(line.split()[2] == "True" for line in printed.splitlines()[1:]), printed
    assert not operator.problems(), operator.problems()


def test_restart_leaves_profile_statuses_alone(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    # a served profile, and a conflicting pair whose older one has the later name (the API lists by name)
    served, sched = scope.name("profile"), scope.name("sched")
    older, newer, shared = scope.name("z-older"), scope.name("a-newer"), scope.name("shared")
    first = operators.start("op-1", lease_namespace=scope.namespace)
    first.wait_leading()
    scope.create_profile(served, spec(sched, "LeastAllocated"))
    created = scope.create_profile(older, spec(shared, "LeastAllocated"))
    after_the_second_of(created["metadata"]["creationTimestamp"])
    scope.create_profile(newer, spec(shared, "MostAllocated"))
    wait_profile(control_plane, served, "True")
    wait_profile(control_plane, older, "True")
    wait_profile(control_plane, newer, "False", reason="SchedulerNameConflict")
    before = {name: get_profile(control_plane, name) for name in (served, older, newer)}
    assert first.terminate() == 0, first.tail()

    second = operators.start("op-2", lease_namespace=scope.namespace)
    second.wait_leading()
    second.wait_for_log(f"serving schedulerName {shared!r}")
    # a profile created now: once its status is written, so is any the restart wanted to rewrite (its
    # event reconciles every profile, the newest last)
    late = scope.name("late")
    scope.create_profile(late, spec(scope.name("late-sched"), "LeastAllocated"))
    assert_serving(wait_profile(control_plane, late, "True"), 1)
    after = {name: get_profile(control_plane, name) for name in (served, older, newer)}
    # nothing changed, so nothing was written (the resourceVersion would have moved): what kubectl
    # describe shows, lastTransitionTime included, stays as it was
    for name in (served, older, newer):
        old, new = before[name], after[name]
        assert new["status"] == old["status"], dumps({"before": old["status"], "after": new["status"]})
        assert new["metadata"]["resourceVersion"] == old["metadata"]["resourceVersion"], name
    assert not second.problems(), second.problems()


def _profile_events(cp: ClusterHarness, name: str) -> list[dict[str, Any]]:
    events = cp.api.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events").json()["items"]
    return [
        e
        for e in events
        if e["regarding"].get("kind") == "SchedulingProfile" and e["regarding"]["name"] == name
    ]
