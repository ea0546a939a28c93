"""Pod requests as component-helpers' ``PodRequests`` computes them, and the scoring (non-zero) view."""

from typing import Any

import pytest

from kopf_scheduler.framework import pod_requests
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError, compute_requests
from kopf_scheduler.testing import make_pod

Mi = 1024 * 1024
GPU = "example.com/gpu"


def _named() -> Any:
    return make_pod().name("p")


def _spec(builder: Any) -> dict[str, Any]:
    return builder.obj()["spec"]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (
            make_pod().req(cpu="100m", memory="100Mi").container(cpu="200m", memory="50Mi"),
            {"cpu": 300, "memory": 150 * Mi},
        ),
        (make_pod().req(cpu="100m").init_container(cpu="500m"), {"cpu": 500}),
        (make_pod().req(cpu="500m").init_container(cpu="100m").init_container(cpu="200m"), {"cpu": 500}),
        (
            make_pod().req(cpu="100m", memory="1Gi").init_container(cpu="2", memory="10Mi"),
            {"cpu": 2000, "memory": 1024 * Mi},
        ),
        # sidecar (restartable init) then a regular init: max(100+200, 250+200) = 450
        (
            make_pod().req(cpu="100m").init_container(sidecar=True, cpu="200m").init_container(cpu="250m"),
            {"cpu": 450},
        ),
        # regular init before the sidecar does not see it: max(100+200, 250, 200) = 300
        (
            make_pod().req(cpu="100m").init_container(cpu="250m").init_container(sidecar=True, cpu="200m"),
            {"cpu": 300},
        ),
        # two sidecars, each added to the sum; a later init sees both: max(100+50+70, 150+50+70)
        (
            make_pod()
            .req(cpu="100m")
            .init_container(sidecar=True, cpu="50m")
            .init_container(sidecar=True, cpu="70m")
            .init_container(cpu="150m"),
            {"cpu": 270},
        ),
        (
            make_pod().req(cpu="100m", memory="64Mi").overhead(cpu="50m", memory="16Mi"),
            {"cpu": 150, "memory": 80 * Mi},
        ),
        (make_pod().req(cpu="100m").init_container(cpu="1").overhead(cpu="250m"), {"cpu": 1250}),
        (make_pod().limits(cpu="1", memory="1Gi"), {"cpu": 1000, "memory": 1024 * Mi}),
        (make_pod().req(cpu="200m").limits(cpu="1", memory="1Gi"), {"cpu": 200, "memory": 1024 * Mi}),
        (make_pod().res({GPU: "2"}).container(**{"example.com/gpu": "1"}), {GPU: 3}),
        (make_pod().res({GPU: "1"}).init_container(**{"example.com/gpu": "4"}), {GPU: 4}),
        (make_pod().req(cpu="0", memory="0"), {}),
        (make_pod(), {}),
        (
            make_pod()
            .req(cpu="100m")
            .container(cpu="100m")
            .set("spec.resources", {"requests": {"cpu": "1"}}),
            {"cpu": 1000},
        ),
        (make_pod().req(ephemeral_storage="1Gi"), {"ephemeral-storage": 1024 * Mi}),
    ],
    ids=[
        "sum-of-containers",
        "init-larger-than-sum",
        "init-smaller-than-sum",
        "init-max-per-resource",
        "sidecar-then-init",
        "init-then-sidecar",
        "two-sidecars-then-init",
        "overhead",
        "overhead-after-init-max",
        "limits-only-default-requests",
        "request-kept-limit-fills-missing",
        "extended-resource-sum",
        "extended-resource-init-max",
        "explicit-zero-dropped",
        "no-requests",
        "pod-level-requests-override",
        "ephemeral-storage",
    ],
)
def test_compute_requests(pod: Any, expected: dict[str, int]) -> None:
    assert compute_requests(_spec(pod)) == expected


@pytest.mark.parametrize(
    ("pod", "cpu", "memory"),
    [
        (make_pod(), 100, 200 * Mi),
        (make_pod().container(), 200, 400 * Mi),
        (make_pod().req(cpu="500m"), 500, 200 * Mi),
        (make_pod().req(memory="1Gi"), 100, 1024 * Mi),
        (make_pod().req(cpu="0", memory="0"), 0, 0),  # an explicit zero is not "missing"
        (make_pod().set("spec.containers", []), 0, 0),
        (make_pod().req(cpu="1").container(), 1100, 400 * Mi),
        (make_pod().init_container(), 100, 200 * Mi),
        (make_pod().init_container(sidecar=True), 200, 400 * Mi),
        (make_pod().init_container(cpu="1"), 1000, 200 * Mi),
        (make_pod().overhead(cpu="10m"), 110, 200 * Mi),
    ],
    ids=[
        "one-container-defaults",
        "defaults-per-container",
        "cpu-set-memory-defaults",
        "memory-set-cpu-defaults",
        "explicit-zero-stays-zero",
        "no-containers",
        "one-set-one-defaulted",
        "init-container-defaults",
        "sidecar-defaults-added",
        "init-with-cpu",
        "overhead-added",
    ],
)
def test_non_zero_requests_for_scoring(pod: Any, cpu: int, memory: int) -> None:
    info = PodInfo(pod.name("p").obj())
    assert (info.non_zero_cpu, info.non_zero_memory) == (cpu, memory)
    assert compute_requests(_spec(pod), non_zero=True).get("cpu", 0) == cpu


def test_non_zero_defaults_do_not_leak_into_filter_requests() -> None:
    info = PodInfo(make_pod().name("p").container().obj())
    assert info.requests == {}
    assert (info.non_zero_cpu, info.non_zero_memory) == (200, 400 * Mi)


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (_named().req(cpu="lots"), "spec.containers[0].resources.requests.cpu: invalid quantity 'lots'"),
        (
            _named().limits(memory="1.5.3"),
            "spec.containers[0].resources.limits.memory: invalid quantity '1.5.3'",
        ),
        (
            _named().container(cpu="1").req(memory=""),
            "spec.containers[1].resources.requests.memory: invalid quantity ''",
        ),
        (
            _named().init_container(cpu="x"),
            "spec.initContainers[0].resources.requests.cpu: invalid quantity 'x'",
        ),
        (_named().overhead(cpu="much"), "spec.overhead.cpu: invalid quantity 'much'"),
        (
            _named().set("spec.resources", {"requests": {"cpu": "?"}}),
            "spec.resources.requests.cpu: invalid quantity '?'",
        ),
        (
            _named().set("spec.containers", [{"name": "c", "resources": {"requests": ["cpu"]}}]),
            "spec.containers[0].resources.requests: must be a map of resource names to quantities",
        ),
        (_named().set("spec.priority", "high"), "spec.priority: must be an integer, not 'high'"),
        (make_pod(), "metadata.name: required"),
    ],
    ids=[
        "container-request",
        "container-limit",
        "second-container",
        "init-container",
        "overhead",
        "pod-level",
        "requests-not-a-map",
        "priority",
        "no-name",
    ],
)
def test_pod_parse_error_names_the_field(pod: Any, message: str) -> None:
    with pytest.raises(PodParseError) as info:
        PodInfo(pod.obj())
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("pod", "spec", "non_zero"),
    [
        # one quantity beyond int64 in its resource list: upstream's int64, exactly
        (make_pod().req(cpu="1e30"), {"cpu": 0}, (0, 200 * Mi)),  # a request of 0 millicores, not 100m
        (make_pod().req(memory="10Ei"), {"memory": 2**63 - 1}, (100, 2**63 - 1)),
        (make_pod().req(cpu="10Ei"), {"cpu": -1000}, (-1000, 200 * Mi)),
        # two of them: upstream adds the quantities, then takes Value/MilliValue; these wrap the same way
        (make_pod().req(memory="10Ei").container(memory="10Ei"), {"memory": -2}, (200, -2)),
        (make_pod().req(cpu="10Ei").container(cpu="10Ei"), {"cpu": -2000}, (-2000, 400 * Mi)),
        (make_pod().req(memory="7Ei").container(memory="7Ei"), {"memory": -(2**61)}, (200, -(2**61))),
        (make_pod().req(cpu="1e30").container(cpu="1e30"), {"cpu": 0}, (0, 400 * Mi)),
    ],
    ids=["cpu-1e30", "memory-10Ei", "cpu-10Ei", "memory-10Ei-twice", "cpu-10Ei-twice", "memory-7Ei-twice",
         "cpu-1e30-twice"],
)  # fmt: skip
def test_requests_beyond_int64_are_upstreams_int64(pod: Any, spec: dict[str, int], non_zero: Any) -> None:
    """Expected values: the quantities added with ``Quantity.Add`` (as ``PodRequests`` adds them), then
    ``MilliValue``/``Value``, run with apimachinery v0.37.2. (``1e30`` beside ``100m`` is where the two part:
    upstream takes the low 64 bits of the exact sum, 4089650035136921700 millicores; here it is 100.)"""
    computed = pod_requests.compute(pod.obj())
    assert computed.spec == spec
    assert (computed.non_zero_cpu, computed.non_zero_memory) == non_zero
