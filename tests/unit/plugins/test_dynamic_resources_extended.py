"""Extended resources backed by DRA (``DRAExtendedResource``): which class a resource stands for, the
claim's requests and the pod's request mappings (upstream's ``extendeddynamicresources_test.go`` cases,
as literals), NodeResourcesFit leaving such resources to DynamicResources, and DynamicResources' path
from PreFilter to PreBind with the API writes it makes (``dynamicresources.go``)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from _dra_kit import DRIVER, Handle, device, node, objects, resource_slice

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.backend.cache import Snapshot
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import QueueingHint
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import DEVICE_CLASSES, RESOURCE_CLAIMS
from kopf_scheduler.framework.objects.dra import DeviceClass, parse_device_class
from kopf_scheduler.framework.objects.extended_resources import device_class_resolver
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, unresolvable, unschedulable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.binding import ClaimWriteError
from kopf_scheduler.plugins.dynamic_resources.extended_requests import requests_and_mappings
from kopf_scheduler.plugins.node_resources_fit import Args as FitArgs
from kopf_scheduler.plugins.node_resources_fit import NodeResourcesFit
from kopf_scheduler.plugins.node_resources_fit.plugin import _device_class_changed
from kopf_scheduler.testing import make_node, make_pod

GPU = "example.com/gpu"
PREFIX = "deviceclass.resource.kubernetes.io/"


# -- which class a resource stands for --------------------------------------------------------------------
def device_class(
    name: str, extended: str | None = None, created: str = "2026-01-01T00:00:00Z"
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended is not None:
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name, "creationTimestamp": created},
        "spec": spec,
    }


def test_a_class_stands_for_its_extended_resource_name_and_its_implicit_one() -> None:
    store = objects(device_class("gpu", GPU), device_class("fpga"))
    classes = device_class_resolver(store)
    assert {name: cls.name for name, cls in classes.mapping().items()} == {
        GPU: "gpu",
        PREFIX + "gpu": "gpu",
        PREFIX + "fpga": "fpga",
    }
    assert classes.get("example.com/fpga") is None


def test_the_oldest_class_wins_a_name_and_the_map_follows_the_store() -> None:
    store = objects(
        device_class("b-new", GPU, "2026-01-02T00:00:00Z"),
        device_class("b-old", GPU, "2026-01-01T00:00:00Z"),
        device_class("a-old", GPU, "2026-01-01T00:00:00Z"),
    )
    classes = device_class_resolver(store)
    found = classes.get(GPU)
    assert found is not None and found.name == "a-old"  # equal timestamps: the smaller name
    store.store(DEVICE_CLASSES).delete("", "a-old")
    found = classes.get(GPU)
    assert found is not None and found.name == "b-old"


# -- requests and mappings (createRequestsAndMappings) ----------------------------------------------------
def container(name: str, restart: str | None = None, **requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "pause", "resources": {"requests": requests}}
    if restart:
        out["restartPolicy"] = restart
    return out


def spec(*parts: tuple[str, dict[str, str]]) -> dict[str, Any]:
    """A pod spec as upstream's ``st.MakePod()``: ``("res", ...)`` adds ``con<i>``, ``("init", ...)``
    ``init-con<i>``, ``("sidecar", ...)`` ``sidecar-con<i>`` (i counting init containers)."""
    out: dict[str, Any] = {"containers": [], "initContainers": []}
    for kind, requests in parts:
        if kind == "res":
            out["containers"].append(container(f"con{len(out['containers'])}", **requests))
        else:
            name = f"{'init' if kind == 'init' else 'sidecar'}-con{len(out['initContainers'])}"
            out["initContainers"].append(container(name, "Always" if kind == "sidecar" else None, **requests))
    return out


class Classes:
    """upstream's ``mockDeviceClassResolver``."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.classes = {r: parse_device_class({"metadata": {"name": c}}) for r, c in mapping.items()}

    def get(self, resource: str) -> DeviceClass | None:
        return self.classes.get(resource)


R, R1, RINIT, RIMPLICIT = GPU, GPU + "1", GPU + "init", PREFIX + "classInit"
POD1 = spec(("res", {R: "1", R1: "2"}))
POD2 = spec(("res", {R: "1"}), ("res", {R1: "2"}))
POD_INIT = spec(("res", {R: "1"}), ("init", {RINIT: "2"}))
POD_INIT2 = spec(("res", {R: "1"}), ("init", {RINIT: "1"}), ("init", {RINIT: "2"}))
POD_INIT3 = spec(("res", {R: "1"}), ("init", {RINIT: "1"}), ("sidecar", {RINIT: "1"}), ("init", {RINIT: "2"}))
POD1_INIT_IMPLICIT = spec(("init", {RINIT: "1", RIMPLICIT: "2"}))
POD_INIT_IMPLICIT = spec(("res", {R: "1"}), ("init", {RINIT: "1"}), ("init", {RIMPLICIT: "2"}))
DEV_MAP = {R: "class"}
DEV_MAP2 = {R: "class", R1: "class1"}
DEV_MAP_INIT = {R: "class", RINIT: "classInit", RIMPLICIT: "classInit"}


def req(name: str, cls: str, count: int) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}}


@pytest.mark.parametrize(
    ("pod_spec", "resources", "mapping", "want"),
    [
        pytest.param(POD1, [], {}, [], id="nil"),
        pytest.param(POD1, [R], DEV_MAP, [req("container-0-request-0", "class", 1)], id="one resource match"),
        pytest.param(
            POD1, [R, R1], DEV_MAP, [req("container-0-request-0", "class", 1)], id="one match, one not match"
        ),
        pytest.param(
            POD1,
            [R, R1],
            DEV_MAP2,
            [req("container-0-request-0", "class", 1), req("container-0-request-1", "class1", 2)],
            id="two resources match",
        ),
        pytest.param(
            POD2,
            [R, R1],
            DEV_MAP2,
            [req("container-0-request-0", "class", 1), req("container-1-request-0", "class1", 2)],
            id="two containers match",
        ),
        pytest.param(
            POD_INIT,
            [R, RINIT],
            DEV_MAP_INIT,
            [req("container-0-request-0", "classInit", 2), req("container-1-request-0", "class", 1)],
            id="one init container, one regular container",
        ),
        pytest.param(
            POD_INIT2,
            [R, RINIT],
            DEV_MAP_INIT,
            [req("container-1-request-0", "classInit", 2), req("container-2-request-0", "class", 1)],
            id="two init containers, one regular container",
        ),
        pytest.param(
            POD_INIT3,
            [R, RINIT],
            DEV_MAP_INIT,
            [
                req("container-1-request-0", "classInit", 1),
                req("container-2-request-0", "classInit", 2),
                req("container-3-request-0", "class", 1),
            ],
            id="three init containers, one sidecar, one regular container",
        ),
    ],
)
def test_requests(
    pod_spec: dict[str, Any], resources: list[str], mapping: dict[str, str], want: list[dict[str, Any]]
) -> None:
    requests, _ = requests_and_mappings(pod_spec, resources, Classes(mapping))
    assert requests == want


def cer(container_name: str, resource: str, request_name: str) -> dict[str, str]:
    return {"containerName": container_name, "resourceName": resource, "requestName": request_name}


@pytest.mark.parametrize(
    ("pod_spec", "resources", "mapping", "want"),
    [
        pytest.param(
            POD1,
            [R, R1],
            DEV_MAP2,
            [cer("con0", R, "container-0-request-0"), cer("con0", R1, "container-0-request-1")],
            id="one container, two requests",
        ),
        pytest.param(
            POD1_INIT_IMPLICIT,
            [R, RINIT, RIMPLICIT],
            DEV_MAP_INIT,
            [
                cer("init-con0", RIMPLICIT, "container-0-request-0"),
                cer("init-con0", RINIT, "container-0-request-1"),
            ],
            id="one container, one explicit and one implicit request",
        ),
        pytest.param(
            POD2,
            [R, R1],
            DEV_MAP2,
            [cer("con0", R, "container-0-request-0"), cer("con1", R1, "container-1-request-0")],
            id="two containers, two requests",
        ),
        pytest.param(
            POD_INIT,
            [R, RINIT],
            DEV_MAP_INIT,
            [cer("init-con0", RINIT, "container-0-request-0"), cer("con0", R, "container-1-request-0")],
            id="one init container, one regular container, one request",
        ),
        pytest.param(
            POD_INIT2,
            [R, RINIT],
            DEV_MAP_INIT,
            [
                cer("init-con0", RINIT, "container-1-request-0"),
                cer("init-con1", RINIT, "container-1-request-0"),
                cer("con0", R, "container-2-request-0"),
            ],
            id="three containers (two are init container), two requests",
        ),
        pytest.param(
            POD_INIT_IMPLICIT,
            [R, RINIT, RIMPLICIT],
            DEV_MAP_INIT,
            [
                cer("init-con0", RINIT, "container-0-request-0"),
                cer("init-con1", RIMPLICIT, "container-1-request-0"),
                cer("con0", R, "container-2-request-0"),
            ],
            id="three containers (two are init container), both explicit and implicit resources",
        ),
        pytest.param(
            POD_INIT3,
            [R, RINIT],
            DEV_MAP_INIT,
            [
                cer("init-con0", RINIT, "container-1-request-0"),
                cer("sidecar-con1", RINIT, "container-1-request-0"),
                cer("init-con2", RINIT, "container-2-request-0"),
                cer("con0", R, "container-3-request-0"),
            ],
            id="four containers (two are init container, one sidecar), three requests",
        ),
    ],
)
def test_mappings(
    pod_spec: dict[str, Any], resources: list[str], mapping: dict[str, str], want: list[dict[str, str]]
) -> None:
    _, mappings = requests_and_mappings(pod_spec, resources, Classes(mapping))
    # upstream's test sorts what it got by request name, then container name
    assert sorted(mappings, key=lambda m: (m["requestName"], m["containerName"])) == want


# -- NodeResourcesFit --------------------------------------------------------------------------------------
GATES_1_37 = FeatureGates.resolve((1, 37))
GATES_1_35 = FeatureGates.resolve((1, 35))


#: the name ``make_pod()`` gives its container
CONTAINER = make_pod().obj()["spec"]["containers"][0]["name"]


def gpu_pod(name: str = "p", uid: str | None = None, **requests: str) -> PodInfo:
    return PodInfo(make_pod().name(name).uid(uid or name).res(requests or {GPU: "2"}).obj())


def fit_node(name: str, **extra: str) -> NodeInfo:
    capacity = {"cpu": "4", "memory": "8Gi", "pods": "10", **extra}
    return NodeInfo(make_node().name(name).capacity(**capacity).obj())


@pytest.mark.parametrize(
    ("mapped", "node_extra", "expected"),
    [
        pytest.param(True, {}, None, id="left-to-DRA-where-no-node-has-it"),
        pytest.param(True, {GPU: "0"}, None, id="left-to-DRA-where-the-node-has-none"),
        pytest.param(True, {GPU: "1"}, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {GPU}",)),
                     id="the-node's-own-resource-checked"),
        pytest.param(True, {GPU: "2"}, None, id="the-node's-own-resource-fits"),
        pytest.param(False, {}, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {GPU}",)),
                     id="no-class-stands-for-it"),
    ],
)  # fmt: skip
def test_fit_leaves_resources_a_class_stands_for_to_dra(
    mapped: bool, node_extra: dict[str, str], expected: Status | None
) -> None:
    store = objects(device_class("gpu", GPU if mapped else None))
    plugin = NodeResourcesFit(FitArgs(), device_class_resolver(store))
    info, subject, state = fit_node("n", **node_extra), gpu_pod(), CycleState()
    plugin.pre_filter(state, subject, [info])
    assert plugin.filter(state, subject, info) == expected
    snapshot = Snapshot()
    snapshot.rebuild([info, fit_node("other")])
    rows = np.array([0, 1])
    assert plugin.filter_rows(state, subject, snapshot.table, rows).tolist()[0] == (expected is None)
    verdicts = plugin.filter_statuses(state, subject, snapshot.table, rows)
    if verdicts is not None:
        assert [verdicts[0], verdicts[1]] == [expected, plugin.filter(state, subject, snapshot.node_infos[1])]


def test_fit_with_the_gate_off_checks_every_extended_resource() -> None:
    store = objects(device_class("gpu", GPU))
    handle = Handle(store, GATES_1_35)
    plugin = __import__("kopf_scheduler.plugins.node_resources_fit", fromlist=["new"]).new(FitArgs(), handle)
    info, subject, state = fit_node("n"), gpu_pod(), CycleState()
    plugin.pre_filter(state, subject, [info])
    assert plugin.filter(state, subject, info) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"Insufficient {GPU}",)
    )
    assert not any(e.event.resource.value.endswith("DeviceClass") for e in plugin.events_to_register())


@pytest.mark.parametrize(
    ("old", "new", "requests", "expected"),
    [
        pytest.param(None, device_class("gpu", GPU), {GPU: "1"}, QueueingHint.QUEUE, id="added-named"),
        pytest.param(None, device_class("gpu"), {PREFIX + "gpu": "1"}, QueueingHint.QUEUE, id="implied"),
        pytest.param(None, device_class("gpu", "example.com/fpga"), {GPU: "1"}, QueueingHint.SKIP,
                     id="added-with-another-name"),
        pytest.param(device_class("gpu"), device_class("gpu", GPU), {GPU: "1"}, QueueingHint.QUEUE,
                     id="name-given"),
        pytest.param(device_class("gpu", GPU), device_class("gpu", GPU), {GPU: "1"}, QueueingHint.SKIP,
                     id="name-unchanged"),
        pytest.param(device_class("gpu", GPU), device_class("gpu"), {PREFIX + "gpu": "1"}, QueueingHint.SKIP,
                     id="updated-implicit-only"),
    ],
)  # fmt: skip
def test_fit_device_class_hint(
    old: dict[str, Any] | None, new: dict[str, Any], requests: dict[str, str], expected: QueueingHint
) -> None:
    before = None if old is None else parse_device_class(old)
    assert _device_class_changed(gpu_pod(**requests), before, parse_device_class(new)) == expected


# -- DynamicResources ----------------------------------------------------------------------------------------
SLICES = (
    resource_slice("n1", device("d0"), device("d1")),
    resource_slice("n2", device("d0")),
)


def plugin(*raws: dict[str, Any], gates: FeatureGates = GATES_1_37) -> tuple[DynamicResources, Handle]:
    handle = Handle(objects(device_class("gpu", GPU), *SLICES, *raws), gates)
    return DynamicResources(Args(), handle), handle


def dra_node(name: str, **allocatable: str) -> NodeInfo:
    info = node(name)
    info.allocatable = {**info.allocatable, **{k: int(v) for k, v in allocatable.items()}}
    return info


def scheduled(pl: DynamicResources, subject: PodInfo, node_name: str = "n1") -> CycleState:
    state = CycleState()
    assert pl.pre_filter(state, subject, []) == (None, None)
    assert pl.filter(state, subject, dra_node(node_name)) is None
    assert pl.reserve(state, subject, node_name) is None
    return state


def test_pre_filter_skips_a_pod_when_the_gate_is_off() -> None:
    pl, _ = plugin(gates=GATES_1_35)
    assert pl.pre_filter(CycleState(), gpu_pod(), []) == (None, SKIP)


def test_pre_filter_skips_a_pod_whose_resources_no_class_stands_for() -> None:
    pl, _ = plugin()
    assert pl.pre_filter(CycleState(), gpu_pod(**{"example.com/fpga": "1"}), []) == (None, SKIP)


def test_filter_allocates_on_nodes_without_the_resource_and_leaves_nodes_with_it_alone() -> None:
    pl, _ = plugin()
    subject, state = gpu_pod(), CycleState()
    pl.pre_filter(state, subject, [])
    assert pl.filter(state, subject, dra_node("n1")) is None
    assert pl.filter(state, subject, dra_node("n2")) == unresolvable("cannot allocate all claims")
    assert pl.filter(state, subject, dra_node("n3", **{GPU: "4"})) is None  # the device plugin's
    assert pl.reserve(state, subject, "n3") is None
    assert not pl.manager.in_flight()


def test_filter_rejects_a_node_without_a_resource_no_class_stands_for() -> None:
    pl, _ = plugin()
    subject, state = gpu_pod(**{GPU: "1", "example.com/fpga": "1"}), CycleState()
    pl.pre_filter(state, subject, [])
    assert pl.filter(state, subject, dra_node("n1")) == unresolvable("cannot fit resource")
    assert pl.filter(state, subject, dra_node("n1", **{"example.com/fpga": "1"})) is None


def test_reserve_holds_the_devices_for_other_pods() -> None:
    pl, _ = plugin()
    scheduled(pl, gpu_pod("p"))
    other, state = gpu_pod("q", **{GPU: "1"}), CycleState()
    pl.pre_filter(state, other, [])
    assert pl.filter(state, other, dra_node("n1")) == unresolvable("cannot allocate all claims")
    assert pl.filter(state, other, dra_node("n2")) is None


def test_pre_bind_creates_the_claim_writes_it_and_the_pod_status() -> None:
    pl, handle = plugin()
    subject = gpu_pod("p", uid="uid-p")
    state = scheduled(pl, subject)
    created: list[str] = []
    pl.manager.claim_create_hooks.append(created.append)
    assert asyncio.run(pl.pre_bind(state, subject, "n1")) is None
    assert created == ["success"]
    writes = handle.client.writes
    assert [(m, p) for m, p, _ in writes] == [
        ("POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"),
        ("PUT", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/p-extended-resources-xxxxx"),
        (
            "PUT",
            "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/p-extended-resources-xxxxx/status",
        ),
        ("PATCH", "/api/v1/namespaces/default/pods/p/status"),
    ]
    assert writes[0][2] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "namespace": "default",
            "generateName": "p-extended-resources-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
            ],
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        },
        "spec": {"devices": {"requests": [req("container-0-request-0", "gpu", 2)]}},
    }
    assert writes[1][2]["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    status = writes[2][2]["status"]
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["d0", "d1"]
    assert {r["request"] for r in status["allocation"]["devices"]["results"]} == {"container-0-request-0"}
    assert writes[3][2] == {
        "status": {
            "extendedResourceClaimStatus": {
                "requestMappings": [
                    {"containerName": CONTAINER, "resourceName": GPU, "requestName": "container-0-request-0"}
                ],
                "resourceClaimName": "p-extended-resources-xxxxx",
            }
        }
    }
    assert not pl.manager.in_flight()
    stored = pl.manager.get("default", "p-extended-resources-xxxxx")
    assert stored is not None and stored.reserved_for_pod("uid-p") and stored.allocation is not None


def test_a_failed_pre_bind_deletes_the_claim_it_created() -> None:
    pl, handle = plugin()
    subject = gpu_pod("p", uid="uid-p")
    state = scheduled(pl, subject)
    handle.client.fail_status = APIError(500, "boom")

    async def bind_then_fail() -> None:
        with pytest.raises(ClaimWriteError) as e:
            await pl.pre_bind(state, subject, "n1")
        assert str(e.value) == (
            "add allocation and reservation to claim default/p-extended-resources-xxxxx: boom"
        )
        pl.unreserve(state, subject, "n1")
        await asyncio.sleep(0.01)

    asyncio.run(bind_then_fail())
    # created, finalized, status refused; then (as upstream's deleteClaim, from the claim as created: a
    # conflict, read again) the finalizer removed and the claim deleted
    assert [m for m, _, _ in handle.client.writes] == ["POST", "PUT", "PUT", "PUT", "PUT", "DELETE"]
    assert handle.client.writes[1][2]["metadata"]["finalizers"] == [
        "resource.kubernetes.io/delete-protection"
    ]
    assert "finalizers" not in handle.client.writes[4][2]["metadata"]
    assert handle.objects.of(RESOURCE_CLAIMS).get("default", "p-extended-resources-xxxxx") is None
    assert not pl.manager.in_flight()


def test_a_claim_left_from_an_earlier_attempt_is_deleted_and_the_pod_tried_anew() -> None:
    left = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-abcde",
            "namespace": "default",
            "uid": "claim-left",
            "resourceVersion": "1",
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
            ],
        },
        "spec": {"devices": {"requests": [req("container-0-request-0", "gpu", 2)]}},
    }
    pl, handle = plugin(left)
    subject = gpu_pod("p", uid="uid-p")

    async def attempt() -> tuple[Any, ...]:
        state = CycleState()
        pl.pre_filter(state, subject, [])
        verdict = pl.filter(state, subject, dra_node("n1"))
        result = pl.post_filter(state, subject, {})
        await asyncio.sleep(0.01)
        return verdict, result

    verdict, result = asyncio.run(attempt())
    assert verdict == unresolvable("cannot schedule extended resource claim")
    assert result == (None, unschedulable("deletion of ResourceClaim completed"))
    assert handle.objects.of(RESOURCE_CLAIMS).get("default", "p-extended-resources-abcde") is None
    assert [m for m, _, _ in handle.client.writes] == ["PUT", "DELETE"]


def test_a_claim_assumed_and_deleted_before_any_cycle_frees_its_devices() -> None:
    """The claim PreBind created reaches the store, is assumed, and is deleted (a refused binding's
    Unreserve) before any cycle asked for the allocated devices: they are free for the next attempt."""
    pl, handle = plugin()
    subject = gpu_pod("p", uid="uid-p", **{GPU: "1"})
    store = handle.objects.store(RESOURCE_CLAIMS)
    for _ in range(3):  # as many attempts as devices on n1 and one more
        state = scheduled(pl, subject)
        assert asyncio.run(pl.pre_bind(state, subject, "n1")) is None
        created = handle.client.writes[-4][2]  # the POST
        name = created["metadata"]["generateName"] + "xxxxx"
        assert store.delete("default", name) is not None  # as the watch reports Unreserve's deletion
    assert pl.manager.allocated_devices() == frozenset()
