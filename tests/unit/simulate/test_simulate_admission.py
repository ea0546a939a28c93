"""What ``simulate`` fills in or refuses as the API server would: priorities from PriorityClasses (the
Priority admission plugin, with the built-in system classes and the global default), ``disruptionsAllowed``
of budgets given without a status (the disruption controller), and negative resource quantities (pod
validation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.simulate.admission import (
    AdmissionError,
    PriorityClass,
    builtin_priority_classes,
    default_disruptions_allowed,
    default_replication_controller,
    parse_priority_class,
    resolve_priority,
    validate_pod_resources,
)
from kopf_scheduler.simulate.loader import load_cluster
from kopf_scheduler.testing import make_pod


def classes(*extra: PriorityClass) -> dict[str, PriorityClass]:
    out = builtin_priority_classes()
    out.update({c.name: c for c in extra})
    return out


HIGH = PriorityClass("high", 1000)
NEVER = PriorityClass("patient", 500, preemption_policy="Never")
DEFAULT = PriorityClass("fallback", 7, global_default=True)
OTHER_DEFAULT = PriorityClass("fallback-2", 3, global_default=True)


@pytest.mark.parametrize(
    ("spec", "known", "expected"),
    [
        pytest.param({}, classes(), {}, id="no-class-no-default"),
        pytest.param({"priority": 5}, classes(DEFAULT), {"priority": 5}, id="already-resolved"),
        pytest.param(
            {"priorityClassName": "high"},
            classes(HIGH),
            {"priorityClassName": "high", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"},
            id="named-class",
        ),
        pytest.param(
            {"priorityClassName": "patient"},
            classes(NEVER),
            {"priorityClassName": "patient", "priority": 500, "preemptionPolicy": "Never"},
            id="class-policy-never",
        ),
        pytest.param(
            {"priorityClassName": "system-node-critical"},
            classes(),
            {
                "priorityClassName": "system-node-critical",
                "priority": 2000001000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
            id="system-node-critical",
        ),
        pytest.param(
            {"priorityClassName": "system-cluster-critical", "priority": 2000000000},
            classes(),
            {
                "priorityClassName": "system-cluster-critical",
                "priority": 2000000000,
                "preemptionPolicy": "PreemptLowerPriority",
            },
            id="consistent-priority-given",
        ),
        pytest.param(
            {},
            classes(DEFAULT, OTHER_DEFAULT),
            {"priorityClassName": "fallback-2", "priority": 3, "preemptionPolicy": "PreemptLowerPriority"},
            id="lowest-global-default",
        ),
    ],
)
def test_resolve_priority(
    spec: dict[str, Any], known: dict[str, PriorityClass], expected: dict[str, Any]
) -> None:
    pod = {"spec": dict(spec)}
    resolve_priority(pod, known)
    assert pod["spec"] == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"priorityClassName": "missing"}, "no PriorityClass with name missing was found", id="missing"
        ),
        pytest.param(
            {"priorityClassName": "high", "priority": 5},
            "the integer value of priority (5) must not be provided in pod spec; priority admission "
            "controller computed 1000 from the given PriorityClass name",
            id="priority-contradicts",
        ),
        pytest.param(
            {"priorityClassName": "patient", "preemptionPolicy": "PreemptLowerPriority"},
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; "
            "priority admission controller computed Never from the given PriorityClass name",
            id="policy-contradicts",
        ),
    ],
)
def test_resolve_priority_refusals(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(AdmissionError) as caught:
        resolve_priority({"spec": dict(spec)}, classes(HIGH, NEVER))
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param({"metadata": {"name": "a"}, "value": 3}, PriorityClass("a", 3), id="plain"),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 3, "globalDefault": True, "preemptionPolicy": "Never"},
            PriorityClass("a", 3, True, "Never"),
            id="all-fields",
        ),
        pytest.param(
            {"metadata": {"name": "system-node-critical"}, "value": 2000001000},
            PriorityClass("system-node-critical", 2000001000),
            id="exported-system-class",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": "3"}, "value: must be an integer, not '3'", id="bad-value"
        ),
        pytest.param(
            {"metadata": {"name": "system-mine"}, "value": 3},
            "metadata.name: 'system-mine': the 'system-' prefix is reserved for system use",
            id="reserved-prefix",
        ),
        pytest.param(
            {"metadata": {"name": "a"}, "value": 3, "preemptionPolicy": "Sometimes"},
            "preemptionPolicy: must be one of PreemptLowerPriority, Never, not 'Sometimes'",
            id="bad-policy",
        ),
    ],
)
def test_parse_priority_class(obj: dict[str, Any], expected: PriorityClass | str) -> None:
    if isinstance(expected, str):
        with pytest.raises(AdmissionError) as caught:
            parse_priority_class(obj)
        assert str(caught.value) == expected
    else:
        assert parse_priority_class(obj) == expected


def member(name: str, bound: bool = True, namespace: str = "default", app: str = "x") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
        "spec": {"nodeName": "n1"} if bound else {},
    }


MEMBERS = [
    member("a"),
    member("b"),
    member("c"),
    member("pending", bound=False),
    member("o", namespace="other"),
]


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param({"minAvailable": 2}, None, 1, id="min-available"),
        pytest.param({"minAvailable": 3}, None, 0, id="min-available-all-healthy-needed"),
        pytest.param({"minAvailable": "50%"}, None, 1, id="min-available-percent-rounds-up"),
        pytest.param({"maxUnavailable": 1}, None, 0, id="max-unavailable-pending-counts-as-down"),
        pytest.param({"maxUnavailable": 2}, None, 1, id="max-unavailable"),
        pytest.param({"maxUnavailable": "100%"}, None, 3, id="max-unavailable-everything"),
        pytest.param({}, None, 3, id="neither"),
        pytest.param({"minAvailable": 2}, {"disruptionsAllowed": 0}, 0, id="status-given"),
    ],
)
def test_default_disruptions_allowed(spec: dict[str, Any], status: Any, expected: int) -> None:
    obj: dict[str, Any] = {
        "metadata": {"name": "b", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, **spec},
    }
    if status is not None:
        obj["status"] = status
    default_disruptions_allowed(obj, MEMBERS)
    assert obj["status"]["disruptionsAllowed"] == expected


def write(tmp_path: Path, *objs: dict[str, Any]) -> Path:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    return path


def test_loader_resolves_classes_defined_after_the_pods(tmp_path: Path) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"priorityClassName": "late", "containers": []}}
    budget = {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"},
        "spec": {"minAvailable": 0, "selector": {"matchLabels": {"app": "x"}}},
    }
    cluster = load_cluster(
        [write(tmp_path, pod, budget, {"kind": "PriorityClass", "metadata": {"name": "late"}, "value": 9})]
    )
    assert cluster.pending_pods[0]["spec"]["priority"] == 9
    assert cluster.pdbs[0]["status"] == {"disruptionsAllowed": 0}
    assert cluster.pdbs[0]["metadata"]["namespace"] == "default"


def test_loader_names_the_refused_pod(tmp_path: Path) -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"priorityClassName": "nope", "containers": []}}
    with pytest.raises(UsageError, match="Pod default/p: no PriorityClass with name nope was found"):
        load_cluster([write(tmp_path, pod)])
    twice = {"kind": "PriorityClass", "metadata": {"name": "dup"}, "value": 1}
    with pytest.raises(UsageError, match="PriorityClass dup: defined twice"):
        load_cluster([write(tmp_path, twice, twice)])


def _negative(path: str, shown: str) -> str:
    return f'{path}: Invalid value: "{shown}": must be greater than or equal to 0'


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (make_pod().req(cpu="-1"), _negative("spec.containers[0].resources.requests[cpu]", "-1")),
        (make_pod().limits(memory="-1Gi"), _negative("spec.containers[0].resources.limits[memory]", "-1Gi")),
        # printed as the API server prints the quantity it parsed
        (make_pod().req(cpu="-0.5"), _negative("spec.containers[0].resources.requests[cpu]", "-500m")),
        (make_pod().req(cpu="-1000"), _negative("spec.containers[0].resources.requests[cpu]", "-1k")),
        (
            make_pod().req(memory="-1.5Gi"),
            _negative("spec.containers[0].resources.requests[memory]", "-1536Mi"),
        ),
        (
            make_pod().set("spec.containers", [{"name": "c", "resources": {"requests": {"cpu": -2}}}]),
            _negative("spec.containers[0].resources.requests[cpu]", "-2"),
        ),
        # the second container, an init container, a sidecar
        (
            make_pod().req(cpu="1").container(cpu="-1"),
            _negative("spec.containers[1].resources.requests[cpu]", "-1"),
        ),
        (
            make_pod().init_container(cpu="-1"),
            _negative("spec.initContainers[0].resources.requests[cpu]", "-1"),
        ),
        (
            make_pod().init_container(sidecar=True, memory="-5Mi"),
            _negative("spec.initContainers[0].resources.requests[memory]", "-5Mi"),
        ),
        # limits are checked before requests, containers before init containers, names in order
        (
            make_pod().req(memory="-1").limits(cpu="-2"),
            _negative("spec.containers[0].resources.limits[cpu]", "-2"),
        ),
        (
            make_pod().init_container(cpu="-1").req(memory="-1"),
            _negative("spec.containers[0].resources.requests[memory]", "-1"),
        ),
        (
            make_pod().res({"example.com/gpu": "-1", "cpu": "-1"}),
            _negative("spec.containers[0].resources.requests[cpu]", "-1"),
        ),
        (
            make_pod().res({"example.com/gpu": "-1"}),
            _negative("spec.containers[0].resources.requests[example.com/gpu]", "-1"),
        ),
        # pod-level resources and overhead (validated as the limits of a resource requirement)
        (make_pod().pod_requests(cpu="-1"), _negative("spec.resources.requests[cpu]", "-1")),
        (
            make_pod().set("spec.resources", {"limits": {"memory": "-1Mi"}}),
            _negative("spec.resources.limits[memory]", "-1Mi"),
        ),
        (make_pod().overhead(cpu="-10m"), _negative("spec.overhead.limits[cpu]", "-10m")),
        (
            make_pod().set("spec.resources", {"limits": {"cpu": "lots"}}),
            "spec.resources.limits[cpu]: invalid quantity 'lots'",
        ),
        # zero and positive quantities pass
        (make_pod().req(cpu="0", memory="-0").limits(cpu="1").pod_requests(cpu="1").overhead(cpu="1m"), None),
    ],
    ids=[
        "request",
        "limit",
        "fraction-canonical",
        "thousand-canonical",
        "binary-canonical",
        "yaml-integer",
        "second-container",
        "init-container",
        "sidecar",
        "limits-first",
        "containers-first",
        "names-sorted",
        "extended-resource",
        "pod-level-request",
        "pod-level-limit",
        "overhead",
        "unparseable-pod-level-limit",
        "zero-and-positive",
    ],
)
def test_validate_pod_resources(pod: Any, message: str | None) -> None:
    if message is None:
        validate_pod_resources(pod.name("p").obj())
        return
    with pytest.raises(AdmissionError) as info:
        validate_pod_resources(pod.name("p").obj())
    assert str(info.value) == message


def test_loader_refuses_a_negative_request_naming_file_pod_and_field(tmp_path: Path) -> None:
    bound = make_pod().name("running").node("n1").req(cpu="1").obj()
    bad = make_pod().name("bad").req(cpu="-1").obj()
    path = write(tmp_path, bound, bad)
    with pytest.raises(UsageError) as info:
        load_cluster([path])
    assert str(info.value) == (
        f"{path}: Pod default/bad: "
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0'
    )


def test_a_replication_controller_without_a_selector_selects_its_template_labels() -> None:
    rc: dict[str, Any] = {
        "kind": "ReplicationController",
        "metadata": {"name": "rc"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}}},
    }
    default_replication_controller(rc)
    assert rc["spec"]["selector"] == {"app": "web"}
    rc["spec"]["selector"] = {"app": "other"}
    default_replication_controller(rc)
    assert rc["spec"]["selector"] == {"app": "other"}
