"""Device taints and DeviceTaintRules in the structured allocator: upstream's ``allocatortesting`` cases
with taints (``tainted-*`` in ``allocator_testing.go`` at dynamic-resource-allocation v0.37.2), each run
through the full search, the short way (``greedy``) and the one-request way (``one_request``), which must
agree; the slices as DeviceTaintRules patch them; the objects' field-path errors."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_kit import claim, device_class, objects, resource_slice

from kopf_scheduler.framework.objects import (
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    WATCHED_KINDS,
    ObjectParseError,
    watched_kinds,
)
from kopf_scheduler.framework.objects.device_taints import DeviceTaint, parse_device_taint_rule, tolerates
from kopf_scheduler.framework.objects.dra import DeviceToleration, parse_resource_claim
from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice
from kopf_scheduler.plugins.dynamic_resources.allocator import Allocator
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher
from kopf_scheduler.plugins.dynamic_resources.node_devices import NodeDevices
from kopf_scheduler.plugins.dynamic_resources.taints import PatchedSlices, rejected_by_taints

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A = device_class("class-a", f'device.driver == "{DRIVER_A}"')
CLASS_B = device_class("class-b", f'device.driver == "{DRIVER_B}"')
NODE_SELECTOR = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]
}

TAINT_NONE = {"key": "taint-key", "value": "taint-value", "effect": "None"}
TAINT_NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
TAINT_NO_EXECUTE = {"key": "taint-key", "value": "taint-value-2", "effect": "NoExecute"}
TOLERATION_NO_SCHEDULE = {"operator": "Exists", "key": "taint-key", "effect": "NoSchedule"}
TOLERATION_NO_EXECUTE = {
    "operator": "Equal",
    "key": "taint-key",
    "value": "taint-value-2",
    "effect": "NoExecute",
}


def device(name: str, *taints: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if taints:
        out["taints"] = list(taints)
    return out


def slice_a(*devices: dict[str, Any]) -> dict[str, Any]:
    return resource_slice("node-1", *devices, name="slice-1", pool="pool-1", driver=DRIVER_A)


def exactly(name: str = "req-0", class_name: str = "class-a", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": class_name, **fields}}


def prioritized(*subrequests: dict[str, Any]) -> dict[str, Any]:
    return {"name": "req-0", "firstAvailable": list(subrequests)}


def sub(name: str, class_name: str, *tolerations: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "deviceClassName": class_name, "count": 1}
    if tolerations:
        out["tolerations"] = list(tolerations)
    return out


def result(request: str, name: str, *tolerations: dict[str, Any], admin: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"request": request, "driver": DRIVER_A, "pool": "pool-1", "device": name}
    if admin:
        out["adminAccess"] = True
    if tolerations:
        out["tolerations"] = list(tolerations)
    return out


def allocation(*results: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"devices": {"results": list(results)}, "nodeSelector": NODE_SELECTOR}]


def allocate_every_way(
    claim_raw: dict[str, Any],
    slices: list[dict[str, Any]],
    *,
    taints: bool = True,
    allocated: frozenset[tuple[str, str, str]] = frozenset(),
    rules: tuple[dict[str, Any], ...] = (),
) -> list[dict[str, Any]] | None:
    """The allocation on node-1 by the search, ``greedy`` and ``one_request``; they must agree."""
    answers = []
    for way in ("search", "greedy", "one-request"):
        store = objects(CLASS_A, CLASS_B, *slices, *rules, claim_raw)
        listed = PatchedSlices().of(store.of(RESOURCE_SLICES).list(), store.of(DEVICE_TAINT_RULES).list())
        allocator = Allocator(
            lambda name, store=store: store.of(DEVICE_CLASSES).get("", name),  # type: ignore[misc]
            listed,
            allocated,
            DeviceMatcher(),
            versions={} if way == "one-request" else None,
            device_taints=taints,
        )
        allocator.search_only = way == "search"
        parsed = store.of(RESOURCE_CLAIMS).get("default", claim_raw["metadata"]["name"])
        assert parsed is not None
        answers.append(allocator.allocate("node-1", {}, [parsed]))
    assert answers[1] == answers[0], "greedy differs from the search"
    assert answers[2] == answers[0], "one_request differs from the search"
    return answers[0]


def with_admin_access() -> dict[str, Any]:
    return claim("claim-0", exactly(adminAccess=True))


# upstream's table, case by case: (id, claim, slices, DRADeviceTaints, allocated devices, expected)
CASES = [
    ("tainted-two-devices", claim("claim-0", exactly()),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE), device("device-2", TAINT_NO_EXECUTE))], True, (), None),
    ("tainted-one-device-two-taints", claim("claim-0", exactly()),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE))], True, (), None),
    ("tainted-two-devices-tolerated", claim("claim-0", exactly(tolerations=[TOLERATION_NO_EXECUTE])),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE), device("device-2", TAINT_NO_EXECUTE))], True, (),
     allocation(result("req-0", "device-2", TOLERATION_NO_EXECUTE))),
    ("tainted-two-devices-prioritized-list-tolerated",
     claim("claim-0", prioritized(sub("sub-0", "class-a"), sub("sub-1", "class-a", TOLERATION_NO_EXECUTE))),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE), device("device-2", TAINT_NO_EXECUTE))], True, (),
     allocation(result("req-0/sub-1", "device-2", TOLERATION_NO_EXECUTE))),
    ("tainted-no-effect", claim("claim-0", exactly()),
     [slice_a(device("device-1", TAINT_NONE))], True, (), allocation(result("req-0", "device-1"))),
    ("tainted-one-device-two-taints-both-tolerated",
     claim("claim-0", exactly(tolerations=[TOLERATION_NO_SCHEDULE, TOLERATION_NO_EXECUTE])),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE))], True, (),
     allocation(result("req-0", "device-1", TOLERATION_NO_SCHEDULE, TOLERATION_NO_EXECUTE))),
    ("tainted-disabled", claim("claim-0", exactly()),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE))], False, (),
     allocation(result("req-0", "device-1"))),
    ("tainted-prioritized-list",
     claim("claim-0", prioritized(sub("sub-0", "class-b"), sub("sub-1", "class-a"))),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE))], True, (), None),
    ("tainted-prioritized-list-disabled",
     claim("claim-0", prioritized(sub("sub-0", "class-b"), sub("sub-1", "class-a"))),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE))], False, (),
     allocation(result("req-0/sub-1", "device-1"))),
    ("tainted-admin-access", with_admin_access(), [slice_a(device("device-1", TAINT_NO_SCHEDULE))], True,
     ((DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2")), None),
    ("tainted-admin-access-disabled", with_admin_access(), [slice_a(device("device-1", TAINT_NO_SCHEDULE))],
     False, ((DRIVER_A, "pool-1", "device-1"), (DRIVER_A, "pool-1", "device-2")),
     allocation(result("req-0", "device-1", admin=True))),
    ("tainted-all-devices-single", claim("claim-0", exactly(allocationMode="All")),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE))], True, (), None),
    ("tainted-all-devices-single-disabled", claim("claim-0", exactly(allocationMode="All")),
     [slice_a(device("device-1", TAINT_NO_SCHEDULE))], False, (), allocation(result("req-0", "device-1"))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("claim_raw", "slices", "taints", "allocated", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_upstream_tainted_cases(
    claim_raw: dict[str, Any],
    slices: list[dict[str, Any]],
    taints: bool,
    allocated: tuple[tuple[str, str, str], ...],
    expected: list[dict[str, Any]] | None,
) -> None:
    assert allocate_every_way(claim_raw, slices, taints=taints, allocated=frozenset(allocated)) == expected


def rule(name: str, taint: dict[str, Any], **selector: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": taint}
    if selector:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        pytest.param((), allocation(result("req-0", "device-1")), id="no-rule"),
        pytest.param(
            (rule("r", TAINT_NO_SCHEDULE, device="device-1"),),
            allocation(result("req-0", "device-2")),
            id="rule-taints-one-device",
        ),
        pytest.param((rule("r", TAINT_NO_SCHEDULE, pool="pool-1"),), None, id="rule-taints-the-pool"),
        pytest.param(
            (rule("r", TAINT_NO_SCHEDULE, driver=DRIVER_B),),
            allocation(result("req-0", "device-1")),
            id="rule-of-another-driver",
        ),
        pytest.param(
            (rule("r", TAINT_NO_SCHEDULE),),
            allocation(result("req-0", "device-1")),
            id="rule-without-selector",
        ),
        pytest.param(
            (rule("r", TAINT_NONE, driver=DRIVER_A),),
            allocation(result("req-0", "device-1")),
            id="rule-with-no-effect",
        ),
        pytest.param(
            (
                rule("r1", TAINT_NO_SCHEDULE, device="device-1"),
                rule("r2", TAINT_NO_EXECUTE, device="device-2"),
            ),
            None,
            id="two-rules-two-devices",
        ),
    ],
)
def test_device_taint_rules_taint_the_devices_they_select(
    rules: tuple[dict[str, Any], ...], expected: list[dict[str, Any]] | None
) -> None:
    slices = [slice_a(device("device-1"), device("device-2"))]
    assert allocate_every_way(claim("claim-0", exactly()), slices, rules=rules) == expected


def test_a_tolerating_request_gets_the_device_a_rule_tainted() -> None:
    tolerating = claim("claim-0", exactly(tolerations=[{"key": "taint-key", "operator": "Exists"}]))
    rules = (rule("r", TAINT_NO_SCHEDULE, pool="pool-1"),)
    expected = allocation(result("req-0", "device-1", {"key": "taint-key", "operator": "Exists"}))
    assert allocate_every_way(tolerating, [slice_a(device("device-1"))], rules=rules) == expected


def test_patched_slices_keep_untouched_slices_and_reuse_patches() -> None:
    store = objects(
        resource_slice("n1", {"name": "d"}, pool="p1"),
        resource_slice("n2", {"name": "d", "taints": [TAINT_NONE]}, pool="p2"),
        rule("r", TAINT_NO_SCHEDULE, pool="p2"),
    )
    slices, rules = store.of(RESOURCE_SLICES).list(), store.of(DEVICE_TAINT_RULES).list()
    patched = PatchedSlices()
    first = patched.of(slices, rules)
    by_pool = {s.pool: s for s in first}
    original = {s.pool: s for s in slices}
    assert by_pool["p1"] is original["p1"]  # no rule selects it: the stored value
    assert by_pool["p2"] is not original["p2"]
    assert [str(t) for t in by_pool["p2"].devices[0].taints] == [
        "taint-key=taint-value:None",
        "taint-key=taint-value:NoSchedule",
    ]
    assert original["p2"].devices[0].taints == (DeviceTaint("taint-key", "taint-value", "None"),)
    # the same inputs: the same listing; a new listing of the same objects: the same patched slice
    assert patched.of(slices, rules) is first
    assert {s.pool: s for s in patched.of(tuple(slices), tuple(rules))}["p2"] is by_pool["p2"]
    assert patched.of(slices, ()) is slices


def test_a_remembered_outcome_holds_only_for_the_same_tolerations() -> None:
    """``one_request`` keeps what a request found on a node across cycles; a request with the same
    selectors but other tolerations must not be given it."""
    store = objects(CLASS_A, slice_a(device("device-1", TAINT_NO_SCHEDULE), device("device-2")))
    shared = NodeDevices()

    def first_device(claim_raw: dict[str, Any]) -> str:
        allocator = Allocator(
            lambda name: store.of(DEVICE_CLASSES).get("", name),
            store.of(RESOURCE_SLICES).list(),
            frozenset(),
            DeviceMatcher(),
            devices=shared,
            versions={},
        )
        found = allocator.allocate("node-1", {}, [parse_resource_claim(claim_raw)])
        assert found is not None
        return str(found[0]["devices"]["results"][0]["device"])

    assert first_device(claim("plain", exactly())) == "device-2"
    assert first_device(claim("tolerant", exactly(tolerations=[TOLERATION_NO_SCHEDULE]))) == "device-1"
    assert first_device(claim("plain-again", exactly())) == "device-2"


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        pytest.param(
            DeviceToleration(operator="Exists"), ("k", "v", "NoSchedule"), True, id="exists-any-key"
        ),
        pytest.param(DeviceToleration("k", "Exists"), ("k", "v", "NoExecute"), True, id="exists-key"),
        pytest.param(DeviceToleration("k", "Exists"), ("other", "v", "NoExecute"), False, id="other-key"),
        pytest.param(DeviceToleration("k", "Equal", "v"), ("k", "v", "NoSchedule"), True, id="equal"),
        pytest.param(DeviceToleration("k", "Equal", "w"), ("k", "v", "NoSchedule"), False, id="other-value"),
        pytest.param(DeviceToleration("k", "Equal", ""), ("k", "", "NoSchedule"), True, id="equal-empty"),
        pytest.param(
            DeviceToleration("k", "Exists", effect="NoExecute"),
            ("k", "v", "NoSchedule"),
            False,
            id="other-effect",
        ),
        pytest.param(
            DeviceToleration("k", "Lt", "v"), ("k", "v", "NoSchedule"), False, id="unknown-operator"
        ),
    ],
)
def test_tolerates(toleration: DeviceToleration, taint: tuple[str, str, str], expected: bool) -> None:
    assert tolerates(toleration, DeviceTaint(*taint)) is expected


def test_rejected_by_taints_names_the_device_and_taint() -> None:
    store = objects(CLASS_A, slice_a(device("device-1", TAINT_NO_SCHEDULE), device("device-2", TAINT_NONE)))
    lines = rejected_by_taints(
        {"class-a": (f'device.driver == "{DRIVER_A}"',)},
        store.of(RESOURCE_SLICES).list(),
        [parse_resource_claim(claim("claim-0", exactly()))],
        "node-1",
        {},
        DeviceMatcher(),
    )
    assert lines == [
        "claim default/claim-0, request req-0: device driver-a/pool-1/device-1 has taint "
        "taint-key=taint-value:NoSchedule, not tolerated"
    ]


def _slice_with_device(**fields: Any) -> dict[str, Any]:
    return slice_a({"name": "device-1", **fields})


@pytest.mark.parametrize(
    ("parse", "raw", "message"),
    [
        pytest.param(
            parse_resource_slice,
            _slice_with_device(taints="x"),
            "spec.devices[0].taints: must be a list",
            id="taints",
        ),
        pytest.param(
            parse_resource_slice,
            _slice_with_device(taints=[{"key": 1, "effect": "NoSchedule"}]),
            "spec.devices[0].taints[0].key: must be a string, not 1",
            id="taint-key",
        ),
        pytest.param(
            parse_resource_slice,
            _slice_with_device(taints=[{"key": "k", "effect": "NoSchedule", "timeAdded": 5}]),
            "spec.devices[0].taints[0].timeAdded: must be a string, not 5",
            id="taint-time",
        ),
        pytest.param(
            parse_resource_claim,
            claim("c", exactly(tolerations={"key": "k"})),
            "spec.devices.requests[0].exactly.tolerations: must be a list",
            id="tolerations",
        ),
        pytest.param(
            parse_resource_claim,
            claim("c", exactly(tolerations=[{"key": "k", "operator": "In"}])),
            "spec.devices.requests[0].exactly.tolerations[0].operator: must be Equal or Exists, not 'In'",
            id="toleration-operator",
        ),
        pytest.param(
            parse_resource_claim,
            claim("c", prioritized({"name": "s", "deviceClassName": "x", "tolerations": [{"effect": 3}]})),
            "spec.devices.requests[0].firstAvailable[0].tolerations[0].effect: must be a string, not 3",
            id="subrequest-toleration-effect",
        ),
        pytest.param(
            parse_resource_claim,
            claim("c", exactly(tolerations=[{"operator": "Exists", "tolerationSeconds": "60"}])),
            "spec.devices.requests[0].exactly.tolerations[0].tolerationSeconds: must be an integer, not '60'",
            id="toleration-seconds",
        ),
        pytest.param(
            parse_device_taint_rule,
            rule("r", TAINT_NO_SCHEDULE, pool=3),  # type: ignore[arg-type]
            "spec.deviceSelector.pool: must be a string, not 3",
            id="rule-pool",
        ),
        pytest.param(
            parse_device_taint_rule,
            {"metadata": {"name": "r"}, "spec": {"deviceSelector": {}}},
            "spec.taint: required",
            id="rule-taint",
        ),
        pytest.param(
            parse_device_taint_rule,
            rule("r", {"key": "k", "effect": ["NoSchedule"]}),
            "spec.taint.effect: must be a string, not ['NoSchedule']",
            id="rule-effect",
        ),
    ],
)
def test_wrong_types_name_the_field(parse: Any, raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectParseError) as e:
        parse(raw)
    assert str(e.value) == message


def test_tolerations_are_parsed_with_the_api_servers_default_operator() -> None:
    parsed = parse_resource_claim(
        claim(
            "c",
            exactly(tolerations=[{"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 30}]),
        )
    )
    spec = parsed.requests[0].exactly
    assert spec is not None
    assert spec.tolerations == (DeviceToleration("k", "Equal", "v", "NoExecute", 30),)
    assert spec.tolerations[0].as_api() == {
        "key": "k",
        "operator": "Equal",
        "value": "v",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }


@pytest.mark.parametrize("on", [True, False])
def test_device_taint_rules_are_watched_only_with_their_gate(on: bool) -> None:
    kinds = watched_kinds(lambda gate: on if gate == "DRADeviceTaintRules" else True)
    assert (DEVICE_TAINT_RULES in kinds) is on
    assert set(WATCHED_KINDS) - set(kinds) == (set() if on else {DEVICE_TAINT_RULES})
