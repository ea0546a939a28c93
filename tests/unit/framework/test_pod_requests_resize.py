"""Requests of pods resized in place, as kube-scheduler v1.34 counts them (``PodRequests`` with
``UseStatusResources``, component-helpers' ``resource/helpers.go``), and the non-zero views with pod-level
requests (``calculateResource`` in ``framework/types.go``, ``calculatePodResourceRequest`` in
``noderesources/resource_allocation.go``). The first cases are upstream's ``TestPodResourceRequests``."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.testing import make_pod

Mi = 1024 * 1024
M = 1000 * 1000
G = 1000 * 1000 * 1000
INFEASIBLE = ("PodResizePending", "Infeasible")
DEFERRED = ("PodResizePending", "Deferred")


def _pod() -> Any:
    return make_pod().name("p").node("n1")


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
        # a plain init container counts its spec
        (
            _pod()
            .req(cpu="1")
            .init_container(cpu="5")
            .container_status("init0", {"cpu": "1"}, init=True)
            .condition(*INFEASIBLE),
            {"cpu": 5000},
            {"cpu": 5000},
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
        # a status without a resources field: the spec, whatever allocatedResources says
        (
            _pod()
            .req(cpu="1")
            .set("status", {"containerStatuses": [{"name": "c", "allocatedResources": {"cpu": "3"}}]}),
            {"cpu": 1000},
            {"cpu": 1000},
        ),
        # a container without a status counts its spec, infeasible or not
        (
            _pod()
            .req(cpu="1")
            .container(cpu="2")
            .container_status("c", {"cpu": "500m"})
            .condition(*INFEASIBLE),
            {"cpu": 3000},
            {"cpu": 2500},
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
        # -- pod-level requests replace the containers' (v1.34 reads no status for them); overhead adds --
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
        "down-admitted-not-actuated",
        "down-actuated",
        "up-deferred",
        "up-in-progress",
        "up-infeasible",
        "first-resize-pending-condition-counts",
        "plain-init-container-spec-only",
        "sidecar-status-and-later-init",
        "status-without-resources-field",
        "container-without-status",
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
        # the status fills a request the spec lacks: no stand-in for it
        (_pod().container_status("c", {"cpu": "50m"}), (50, 200 * Mi), (50, 200 * Mi)),
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
        "status-fills-missing",
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
