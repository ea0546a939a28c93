"""Requests of pods resized in place, as kube-scheduler v1.37 counts them (``PodRequests`` with
``UseStatusResources``, component-helpers' ``resource/helpers.go`` at v0.37.2), and the non-zero views
with pod-level requests (``CalculateResource`` in ``framework/types.go``, ``calculatePodResourceRequest``
in ``noderesources/resource_allocation.go``). The first cases are upstream's ``TestPodResourceRequests``,
``TestAggregateContainerRequestsAndLimits`` and ``TestPodRequestsAndLimitsVerticalScalingWrappers``."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.framework import pod_requests
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.testing import make_pod

Mi = 1024 * 1024
M = 1000 * 1000
G = 1000 * 1000 * 1000
INFEASIBLE = ("PodResizePending", "Infeasible")


def _cpu(amount: str) -> dict[str, str]:
    return {"cpu": amount}


DEFERRED = ("PodResizePending", "Deferred")


def _pod() -> Any:
    return make_pod().name("p").node("n1")


def _allocated_only(**statuses: dict[str, str]) -> dict[str, Any]:
    """Container statuses with ``allocatedResources`` and no ``resources`` field, by container name."""
    return {"containerStatuses": [{"name": n, "allocatedResources": a} for n, a in statuses.items()]}


def _pod_status(pod: Any, requests: dict[str, str] | None, allocated: dict[str, str] | None) -> Any:
    """The pod's own status.resources.requests and status.allocatedResources (kubelets with
    InPlacePodLevelResourcesVerticalScaling); ``resources`` is set even when ``requests`` is None."""
    pod.set("status.resources", {} if requests is None else {"requests": requests})
    return pod if allocated is None else pod.set("status.allocatedResources", allocated)


@pytest.mark.parametrize(
    ("pod", "spec", "effective"),
    [
        # -- upstream's table (resource/helpers_test.go) --------------------------------------------------
        (
            _pod().req(cpu="4").container_status("c", {"cpu": "2"}).condition(*INFEASIBLE),
            {"cpu": 4000},
            {"cpu": 2000},
        ),
        (
            _pod()
            .req(cpu="6")
            .container_status("c", {"cpu": "2"}, allocated={"cpu": "4"})
            .condition(*INFEASIBLE),
            {"cpu": 6000},
            {"cpu": 4000},
        ),
        (_pod().req(cpu="4").container_status("c", {"cpu": "2"}), {"cpu": 4000}, {"cpu": 4000}),
        (
            _pod()
            .req(cpu="30m", memory="20M", ephemeral_storage="10G")
            .container_status(
                "c",
                {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"},
            ),
            {"cpu": 30, "memory": 20 * M, "ephemeral-storage": 10 * G},
            {"cpu": 30, "memory": 30 * M, "ephemeral-storage": 30 * G},
        ),
        (
            _pod()
            .set("spec.containers", [])
            .init_container(sidecar=True, cpu="4")
            .container_status("init0", {"cpu": "2"}, init=True)
            .condition(*INFEASIBLE),
            {"cpu": 4000},
            {"cpu": 2000},
        ),
        (
            _pod()
            .set("spec.containers", [])
            .init_container(sidecar=True, cpu="4")
            .container_status("init0", {"cpu": "2"}, init=True),
            {"cpu": 4000},
            {"cpu": 4000},
        ),
        # "aggregate request resolves max of sums instead of sum of maxes": max(1 + 2, 2 + 1), not 2 + 2
        (
            _pod().req(cpu="1").container(cpu="2").set("status", _allocated_only(c=_cpu("2"), c1=_cpu("1"))),
            {"cpu": 3000},
            {"cpu": 3000},
        ),
        # TestAggregateContainerRequestsAndLimits: "regularcontainers with empty requests, but status with
        # non-empty requests", and the same for an always-restart init container
        (_pod().container_status("c", {"cpu": "2"}), {}, {"cpu": 2000}),
        (
            _pod()
            .set("spec.containers", [])
            .init_container(sidecar=True)
            .container_status("init0", {"cpu": "2"}, init=True),
            {},
            {"cpu": 2000},
        ),
        # "... resolves directly from pod status when PLR vertical scaling enabled": max(1, 3, 4)
        (_pod_status(_pod().req(cpu="1"), _cpu("3"), _cpu("4")), {"cpu": 1000}, {"cpu": 4000}),
        # "falls back to container status aggregation ... but podAllocatedResources is nil": max(1, 5, 6)
        (
            _pod_status(
                _pod().req(cpu="1").container_status("c", _cpu("5"), allocated=_cpu("6")), _cpu("3"), None
            ),
            {"cpu": 1000},
            {"cpu": 6000},
        ),
        # "... but podResources is nil"
        (
            _pod()
            .req(cpu="1")
            .container_status("c", _cpu("5"), allocated=_cpu("6"))
            .set("status.allocatedResources", _cpu("6")),
            {"cpu": 1000},
            {"cpu": 6000},
        ),
        # TestPodRequestsAndLimitsVerticalScalingWrappers: "pod level requests/limits with PLR vertical
        # scaling enabled and status populated": pod-level max(2, 3.5, 3)
        (
            _pod_status(_pod().req(cpu="1").pod_requests(cpu="2"), _cpu("3.5"), _cpu("3")),
            {"cpu": 2000},
            {"cpu": 3500},
        ),
        # "... and infeasible resize": the spec's 10 left out, max(4, 3)
        (
            _pod_status(_pod().req(cpu="1").pod_requests(cpu="10"), _cpu("4"), _cpu("3")).condition(
                *INFEASIBLE
            ),
            {"cpu": 10000},
            {"cpu": 4000},
        ),
        # "container limits aggregation with infeasible resize": a status reporting limits only counts
        # nothing (the request the API server defaults from the limit is the spec, left out)
        (
            _pod()
            .limits(cpu="10")
            .set("status.containerStatuses", [{"name": "c", "resources": {"limits": _cpu("6")}}])
            .condition(*INFEASIBLE),
            {"cpu": 10000},
            {},
        ),
        # -- the life of a resize --------------------------------------------------------------------------
        # down: desired 1, admitted 1, still running with 4 -> 4 until the kubelet actuates it
        (
            _pod().req(cpu="1").container_status("c", {"cpu": "4"}, allocated={"cpu": "1"}),
            {"cpu": 1000},
            {"cpu": 4000},
        ),
        (
            _pod().req(cpu="1").container_status("c", {"cpu": "1"}, allocated={"cpu": "1"}),
            {"cpu": 1000},
            {"cpu": 1000},
        ),
        # up: desired 4 counts at once, whether admitted, in progress or deferred
        (
            _pod()
            .req(cpu="4")
            .container_status("c", {"cpu": "1"}, allocated={"cpu": "1"})
            .condition(*DEFERRED),
            {"cpu": 4000},
            {"cpu": 4000},
        ),
        (
            _pod()
            .req(cpu="4")
            .container_status("c", {"cpu": "1"}, allocated={"cpu": "4"})
            .condition("PodResizeInProgress"),
            {"cpu": 4000},
            {"cpu": 4000},
        ),
        # ... unless it can never fit the node: then what the kubelet runs and admitted
        (
            _pod()
            .req(cpu="4")
            .container_status("c", {"cpu": "1"}, allocated={"cpu": "1"})
            .condition(*INFEASIBLE),
            {"cpu": 4000},
            {"cpu": 1000},
        ),
        # only the first PodResizePending condition is read
        (
            _pod()
            .req(cpu="4")
            .container_status("c", {"cpu": "1"})
            .condition(*DEFERRED)
            .condition(*INFEASIBLE),
            {"cpu": 4000},
            {"cpu": 4000},
        ),
        # -- which containers read a status ---------------------------------------------------------------
        # a plain init container reads its status too (v1.37): allocated max(1, 6)
        (
            _pod()
            .req(cpu="1")
            .init_container(cpu="5")
            .container_status("init0", {"cpu": "1"}, allocated={"cpu": "6"}, init=True),
            {"cpu": 5000},
            {"cpu": 6000},
        ),
        # a sidecar's status counts, and a later init container runs beside the resized sidecar
        (
            _pod()
            .req(cpu="1")
            .init_container(sidecar=True, cpu="1")
            .init_container(cpu="3")
            .container_status("init0", {"cpu": "2"}, init=True),
            {"cpu": 4000},  # max(1 + 1, 1 + 3)
            {"cpu": 5000},  # max(1 + 2, 2 + 3)
        ),
        # a status without a resources field: allocatedResources counts (allocated, and actuated for want
        # of resources.requests)
        (_pod().req(cpu="1").set("status", _allocated_only(c=_cpu("3"))), {"cpu": 1000}, {"cpu": 3000}),
        # a container without a status counts its spec ...
        (
            _pod().req(cpu="1").container(cpu="2").container_status("c", {"cpu": "500m"}),
            {"cpu": 3000},
            {"cpu": 3000},
        ),
        # ... but nothing when the resize is infeasible
        (
            _pod()
            .req(cpu="1")
            .container(cpu="2")
            .container_status("c", {"cpu": "500m"})
            .condition(*INFEASIBLE),
            {"cpu": 3000},
            {"cpu": 500},
        ),
        # the first status with the container's name counts, regular containers' statuses first
        (
            _pod()
            .req(cpu="1")
            .container_status("c", {"cpu": "3"}, init=True)
            .container_status("c", {"cpu": "2"})
            .container_status("c", {"cpu": "4"}),
            {"cpu": 1000},
            {"cpu": 2000},
        ),
        # infeasible, with a status that reports nothing: the container counts nothing
        (
            _pod().req(cpu="1").container_status("c").condition(*INFEASIBLE),
            {"cpu": 1000},
            {},
        ),
        # a status of no container of the pod is ignored
        (_pod().req(cpu="1").container_status("other", {"cpu": "8"}), {"cpu": 1000}, {"cpu": 1000}),
        # status resources the spec does not request still count
        (
            _pod().req(cpu="1").container_status("c", {"cpu": "1", "memory": "1Gi"}),
            {"cpu": 1000},
            {"cpu": 1000, "memory": 1024 * Mi},
        ),
        # -- pod-level requests replace the containers' (their status counts once the pod status has
        # resources); overhead adds -------------------------------------------------------------------
        (
            _pod().req(cpu="1").pod_requests(cpu="2").container_status("c", {"cpu": "4"}),
            {"cpu": 2000},
            {"cpu": 2000},
        ),
        (
            _pod().req(cpu="1", memory="1Gi").pod_requests(cpu="2").container_status("c", {"memory": "2Gi"}),
            {"cpu": 2000, "memory": 1024 * Mi},
            {"cpu": 2000, "memory": 2048 * Mi},
        ),
        (
            _pod().req(cpu="1").overhead(cpu="100m").container_status("c", {"cpu": "2"}),
            {"cpu": 1100},
            {"cpu": 2100},
        ),
        (
            _pod().res({"hugepages-2Mi": "4Mi"}).pod_requests(**{"hugepages-2Mi": "10Mi"}),
            {"hugepages-2Mi": 10 * Mi},
            {"hugepages-2Mi": 10 * Mi},
        ),
        (
            _pod().req(cpu="1").set("spec.resources", {"requests": {"storage": "1Gi"}}),
            {"cpu": 1000},
            {"cpu": 1000},
        ),
    ],
    ids=[
        "upstream-resized-infeasible",
        "upstream-resized-infeasible-in-progress",
        "upstream-resized-no-resize-status",
        "upstream-per-resource-3-way-maximum",
        "upstream-restartable-init-infeasible",
        "upstream-restartable-init-no-resize-status",
        "upstream-max-of-sums",
        "upstream-status-requests-without-spec",
        "upstream-sidecar-status-requests-without-spec",
        "upstream-pod-status-replaces-container-sums",
        "upstream-no-pod-allocated-container-sums",
        "upstream-no-pod-resources-container-sums",
        "upstream-pod-level-status",
        "upstream-pod-level-status-infeasible",
        "upstream-status-limits-only-infeasible",
        "down-admitted-not-actuated",
        "down-actuated",
        "up-deferred",
        "up-in-progress",
        "up-infeasible",
        "first-resize-pending-condition-counts",
        "plain-init-container-status",
        "sidecar-status-and-later-init",
        "status-without-resources-field",
        "container-without-status",
        "container-without-status-infeasible",
        "first-status-by-name",
        "infeasible-empty-status",
        "status-of-unknown-container",
        "status-only-resource",
        "pod-level-ignores-status",
        "pod-level-cpu-status-memory",
        "overhead-added",
        "pod-level-hugepages",
        "pod-level-unsupported-ignored",
    ],
)
def test_requests_in_effect(pod: Any, spec: dict[str, int], effective: dict[str, int]) -> None:
    info = PodInfo(pod.obj())
    assert info.spec_requests == spec
    assert info.requests == effective


@pytest.mark.parametrize(
    ("pod", "non_zero", "scoring"),
    [
        (_pod(), (100, 200 * Mi), (100, 200 * Mi)),
        # the stand-in given to the spec the container lacks a request in (100m) beats its status's 50m
        (_pod().container_status("c", {"cpu": "50m"}), (100, 200 * Mi), (100, 200 * Mi)),
        (_pod().container_status("c", {"cpu": "150m"}), (150, 200 * Mi), (150, 200 * Mi)),
        # the pod status's sums get no stand-in: max(100m, 3, 4) with a stand-in for memory
        (_pod_status(_pod(), _cpu("3"), _cpu("4")), (4000, 200 * Mi), (4000, 200 * Mi)),
        # an init container gets the stand-ins ("non missing container requests applied to init container")
        (
            _pod().set("spec.containers", []).init_container(cpu="1"),
            (1000, 200 * Mi),
            (1000, 200 * Mi),
        ),
        (_pod().req(cpu="1").container_status("c", {"cpu": "2"}), (2000, 200 * Mi), (2000, 200 * Mi)),
        # pod-level requests: the node counts a stand-in only for a resource the whole pod lacks ...
        (
            _pod().req(memory="100Mi").container().pod_requests(cpu="1"),
            (1000, 100 * Mi),
            # ... while the score of a pod being scheduled gives one to every container lacking it
            (1000, 300 * Mi),
        ),
        (_pod().container().pod_requests(cpu="1"), (1000, 400 * Mi), (1000, 400 * Mi)),
        (_pod().container().pod_requests(cpu="1", memory="1Gi"), (1000, 1024 * Mi), (1000, 1024 * Mi)),
        # an explicit zero is a request: no stand-in
        (_pod().req(cpu="0").pod_requests(memory="1Gi"), (0, 1024 * Mi), (0, 1024 * Mi)),
        # overhead counts in both, and makes cpu "present" for the pod-level rule
        (
            _pod().container().pod_requests(memory="1Gi").overhead(cpu="10m"),
            (10, 1024 * Mi),
            (210, 1024 * Mi),
        ),
    ],
    ids=[
        "defaults",
        "stand-in-beats-status",
        "status-beats-stand-in",
        "pod-status-sums-without-stand-ins",
        "init-container-stand-ins",
        "status-resized-up",
        "pod-level-node-vs-score",
        "pod-level-cpu-only",
        "pod-level-both",
        "explicit-zero",
        "overhead-with-pod-level",
    ],
)
def test_non_zero_requests(pod: Any, non_zero: tuple[int, int], scoring: tuple[int, int]) -> None:
    info = PodInfo(pod.obj())
    assert (info.non_zero_cpu, info.non_zero_memory) == non_zero
    assert (info.scoring_cpu, info.scoring_memory) == scoring


@pytest.mark.parametrize(
    ("pod", "gate_on", "gate_off"),
    [
        # the pod status's sums replace the containers' only with the gate
        (_pod_status(_pod().req(cpu="1"), _cpu("3"), _cpu("4")), {"cpu": 4000}, {"cpu": 1000}),
        # pod-level requests read the pod status only with the gate
        (
            _pod_status(_pod().req(cpu="1").pod_requests(cpu="2"), _cpu("3.5"), _cpu("3")),
            {"cpu": 3500},
            {"cpu": 2000},
        ),
        # without the gate an infeasible resize leaves the pod-level spec in, and the container without a
        # status counts nothing
        (
            _pod_status(_pod().req(cpu="1").pod_requests(cpu="10"), _cpu("4"), _cpu("3")).condition(
                *INFEASIBLE
            ),
            {"cpu": 4000},
            {"cpu": 10000},
        ),
        (
            _pod_status(_pod().req(cpu="1"), _cpu("4"), _cpu("3")).condition(*INFEASIBLE),
            {"cpu": 4000},
            {},
        ),
        # status.resources without requests: the containers' sums either way
        (
            _pod_status(_pod().req(cpu="1").container_status("c", _cpu("2")), None, _cpu("8")),
            {"cpu": 2000},
            {"cpu": 2000},
        ),
    ],
    ids=["pod-status-sums", "pod-level-status", "pod-level-infeasible", "infeasible", "no-pod-requests"],
)
def test_pod_level_status_gate(pod: Any, gate_on: dict[str, int], gate_off: dict[str, int]) -> None:
    """``InPlacePodLevelResourcesVerticalScaling`` (1.35 off, 1.36 on): whether the pod's own status
    counts."""
    raw = pod.obj()
    assert pod_requests.compute(raw, pod_level_status=True).effective == gate_on
    assert pod_requests.compute(raw, pod_level_status=False).effective == gate_off
    try:
        for version, want in (((1, 35), gate_off), ((1, 36), gate_on)):
            pod_requests.use_feature_gates(FeatureGates(version))
            assert PodInfo(raw).requests == want
        pod_requests.use_feature_gates(FeatureGates((1, 35), {pod_requests.POD_LEVEL_STATUS_GATE: True}))
        assert PodInfo(raw).requests == gate_on
    finally:
        pod_requests.use_feature_gates(DEFAULT_GATES)
    assert PodInfo(raw).requests == gate_on


def test_spec_view_is_shared_when_no_status_applies() -> None:
    info = PodInfo(_pod().req(cpu="1").set("status", {"phase": "Running"}).obj())
    assert info.spec_requests is info.requests


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            _pod().container_status("c", {"cpu": "lots"}),
            "status.containerStatuses[0].resources.requests.cpu: invalid quantity 'lots'",
        ),
        (
            _pod().container_status("init0", allocated={"memory": "1.5.3"}, init=True),
            "status.initContainerStatuses[0].allocatedResources.memory: invalid quantity '1.5.3'",
        ),
        (_pod().set("status", {"containerStatuses": {"c": {}}}), "status.containerStatuses: must be a list"),
        (
            _pod().set("status", {"containerStatuses": [{"name": "c", "resources": []}]}),
            "status.containerStatuses[0].resources: must be an object",
        ),
    ],
    ids=["status-request", "allocated", "statuses-not-a-list", "resources-not-an-object"],
)
def test_unreadable_status_names_the_field(pod: Any, message: str) -> None:
    with pytest.raises(PodParseError) as info:
        PodInfo(pod.obj())
    assert str(info.value) == message
