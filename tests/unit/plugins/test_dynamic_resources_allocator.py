"""The structured allocator, table-driven after upstream's ``allocatortesting`` cases: which devices a
claim gets on a node, and upstream's texts where a claim cannot be allocated at all."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_kit import DRIVER, claim, device, device_class, objects, request, resource_slice

from kopf_scheduler.framework.objects import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES
from kopf_scheduler.plugins.dynamic_resources.allocator import AllocationError, Allocator, FilterTimeout
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher

GPU = device_class("gpu", f'device.driver == "{DRIVER}"')
SLICE = resource_slice(
    "n1",
    device("d0", model="a100", root="p0", memory="40Gi"),
    device("d1", model="a100", root="p1", memory="40Gi"),
    device("d2", model="t4", root="p0", memory="16Gi"),
    device("d3", model="t4", root="p1", memory="16Gi"),
)


def allocate(
    *claims: dict[str, Any],
    extra: tuple[dict[str, Any], ...] = (),
    allocated: frozenset[tuple[str, str, str]] = frozenset(),
    node: str = "n1",
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]] | None:
    store = objects(GPU, SLICE, *extra, *claims)
    allocator = Allocator(
        lambda name: store.of(DEVICE_CLASSES).get("", name),
        store.of(RESOURCE_SLICES).list(),
        allocated,
        DeviceMatcher(),
    )
    parsed = [store.of(RESOURCE_CLAIMS).get("default", c["metadata"]["name"]) for c in claims]
    return allocator.allocate(node, labels or {}, parsed)  # type: ignore[arg-type]


def picked(result: list[dict[str, Any]] | None) -> list[list[str]] | None:
    if result is None:
        return None
    return [[f"{r['request']}:{r['device']}" for r in a["devices"]["results"]] for a in result]


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param([claim("c", request())], [["req:d0"]], id="one-device-first-free"),
        pytest.param([claim("c", request(count=3))], [["req:d0", "req:d1", "req:d2"]], id="exact-count"),
        pytest.param([claim("c", request(count=5))], None, id="not-enough-devices"),
        pytest.param(
            [claim("c", request(allocationMode="All"))], [["req:d0", "req:d1", "req:d2", "req:d3"]], id="all"
        ),
        pytest.param(
            [
                claim(
                    "c",
                    request(
                        selectors=[
                            {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "t4"'}}
                        ]
                    ),
                )
            ],
            [["req:d2"]],
            id="request-selector",
        ),
        pytest.param(
            [claim("c", request(count=2), constraints=[{"matchAttribute": "gpu.example.com/root"}])],
            [["req:d0", "req:d2"]],
            id="match-attribute-backtracks",
        ),
        pytest.param(
            [claim("c", request(count=3), constraints=[{"matchAttribute": "gpu.example.com/root"}])],
            None,
            id="match-attribute-unsatisfiable",
        ),
        pytest.param(
            [claim("c", request(count=2), constraints=[{"matchAttribute": "gpu.example.com/nothing"}])],
            None,
            id="match-attribute-missing",
        ),
        pytest.param(
            [claim("a", request()), claim("b", request(count=2))],
            [["req:d0"], ["req:d1", "req:d2"]],
            id="two-claims",
        ),
        pytest.param(
            [
                claim(
                    "c",
                    {
                        "name": "req",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu", "count": 8},
                            {"name": "small", "deviceClassName": "gpu", "count": 2},
                        ],
                    },
                )
            ],
            [["req/small:d0", "req/small:d1"]],
            id="first-available-falls-back",
        ),
    ],
)
def test_allocate(claims: list[dict[str, Any]], expected: list[list[str]] | None) -> None:
    assert picked(allocate(*claims)) == expected


def test_allocated_devices_are_skipped_unless_admin_access() -> None:
    taken = frozenset({(DRIVER, "n1", "d0"), (DRIVER, "n1", "d1")})
    assert picked(allocate(claim("c", request()), allocated=taken)) == [["req:d2"]]
    admin = allocate(claim("c", request(adminAccess=True)), allocated=taken)
    assert admin is not None and admin[0]["devices"]["results"] == [
        {"request": "req", "driver": DRIVER, "pool": "n1", "device": "d0", "adminAccess": True}
    ]


def test_slices_of_other_nodes_are_not_seen() -> None:
    assert allocate(claim("c", request()), node="n2") is None
    everywhere = resource_slice("", device("x0"), name="net", pool="net", allNodes=True)
    result = allocate(claim("c", request(count=5)), extra=(everywhere,))
    assert picked(result) == [["req:d0", "req:d1", "req:d2", "req:d3", "req:x0"]]
    assert result is not None and result[0]["nodeSelector"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    }


def test_result_carries_class_and_claim_config() -> None:
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}
    with_config = device_class("cfg", f'device.driver == "{DRIVER}"', config=[opaque])
    claim_config = [
        {"requests": ["one"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}},
        {"opaque": {"driver": DRIVER}},
    ]
    result = allocate(
        claim("c", request("one", "cfg"), request("two", "cfg"), config=claim_config), extra=(with_config,)
    )
    assert result is not None
    assert result[0]["devices"]["config"] == [
        {"source": "FromClass", **opaque},  # used by every request of the claim: no requests listed
        {"source": "FromClaim", "requests": ["one"], "opaque": {"driver": DRIVER, "parameters": {"b": 2}}},
        {"source": "FromClaim", "opaque": {"driver": DRIVER}},
    ]


@pytest.mark.parametrize(
    ("claim_body", "message"),
    [
        pytest.param(
            claim("c", request(device_class_name="nope")),
            "claim default/c, request req: could not retrieve device class nope: "
            'deviceclass.resource.k8s.io "nope" not found',
            id="missing-class",
        ),
        pytest.param(
            claim("c", request(count=33)),
            "claim default/c, request req: adding 33 devices exceeds the claim limit of 32, with 0 already "
            "accounted for",
            id="too-many",
        ),
        pytest.param(
            claim("c", request("req-0", count=20), request("req-1", count=20)),
            "claim default/c, request req-1: adding 20 devices exceeds the claim limit of 32, with 20 "
            "already accounted for",
            id="exact-count-sum-exceeds-claim-limit",
        ),
        pytest.param(
            claim(
                "c",
                request(
                    selectors=[{"cel": {"expression": 'device.attributes["gpu.example.com"].size == 1'}}]
                ),
            ),
            "claim default/c: selector #0 on device gpu.example.com/n1/d0: CEL runtime error: no such key: "
            "size. consider using CEL optional chaining (.? followed by orValue()) or guarding the check "
            "with has() for optional fields",
            id="selector-runtime-error",
        ),
        pytest.param(
            claim("c", request(), constraints=[{"requests": ["req"]}]),
            "claim default/c, constraint #0: empty constraint (unsupported constraint type?)",
            id="empty-constraint",
        ),
    ],
)
def test_allocation_errors(claim_body: dict[str, Any], message: str) -> None:
    with pytest.raises(AllocationError) as e:
        allocate(claim_body)
    assert str(e.value) == message


def test_class_selector_error_names_the_class() -> None:
    broken = device_class("broken", "device.nothing == 1")
    with pytest.raises(AllocationError) as e:
        allocate(claim("c", request(device_class_name="broken")), extra=(broken,))
    assert str(e.value).startswith(
        "class broken: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:7:"
    )


def test_all_devices_of_an_incomplete_pool_are_refused() -> None:
    partial = resource_slice("n1", device("e0"), name="part", pool="split", **{})
    partial["spec"]["pool"]["resourceSliceCount"] = 2
    with pytest.raises(AllocationError) as e:
        allocate(claim("c", request(allocationMode="All")), extra=(partial,))
    assert str(e.value) == (
        "claim default/c, request req: asks for all devices, "
        "but resource pool gpu.example.com/split is currently being updated"
    )


def test_filter_timeout() -> None:
    store = objects(
        GPU, SLICE, claim("c", request(count=3), constraints=[{"matchAttribute": "gpu.example.com/root"}])
    )
    allocator = Allocator(
        lambda n: store.of(DEVICE_CLASSES).get("", n),
        store.of(RESOURCE_SLICES).list(),
        frozenset(),
        DeviceMatcher(),
        1e-9,
    )
    parsed = store.of(RESOURCE_CLAIMS).get("default", "c")
    assert parsed is not None
    with pytest.raises(FilterTimeout):
        for _ in range(100):  # the clock is checked every few steps
            allocator.allocate("n1", {}, [parsed])


def test_all_devices_of_a_later_subrequest() -> None:
    """A ``firstAvailable`` subrequest after the first asking for ``All`` devices gets all of them
    (v0.37.2 goes on with that subrequest from one device to the next)."""
    none = device_class("none", 'device.driver == "other.example.com"')
    first = {
        "name": "req",
        "firstAvailable": [
            {"name": "sub-0", "deviceClassName": "none", "count": 1},
            {"name": "sub-1", "deviceClassName": "gpu", "allocationMode": "All"},
        ],
    }
    assert picked(allocate(claim("c", first), extra=(none,))) == [
        ["req/sub-1:d0", "req/sub-1:d1", "req/sub-1:d2", "req/sub-1:d3"]
    ]
