"""Running upstream's allocator cases (``allocatortesting/allocator_testing.go`` at
dynamic-resource-allocation v0.37.2) as upstream does: every object parsed on its own (two may have the
same name), the node with upstream's labels, and the result found by the full search, ``greedy`` and
``one_request``, which must agree; plus the builders those cases need beyond ``_dra_upstream_kit``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from _dra_upstream_kit import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE_1,
    POOL_1,
    REGION_1,
    REGION_KEY,
    SHARE_ID,
    allocation,
    device,
    device_class,
    local,
    request,
    result,
    slice_,
)

from kopf_scheduler.framework.objects.dra import parse_device_class, parse_resource_claim
from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice
from kopf_scheduler.plugins.dynamic_resources.allocator import AllocationError, Allocator, FailedOnNode
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher
from kopf_scheduler.plugins.dynamic_resources.prepare import Features

POOL_3, POOL_4 = "pool-3", "pool-4"
REQ_0, REQ_1, REQ_2 = "req-0", "req-1", "req-2"
SUB_0, SUB_1 = "subReq-0", "subReq-1"
CS1, CS2 = "counter-set-1", "counter-set-2"
CANNOT_ADD_DEVICE_2 = (
    "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim "
    "constraint would not be satisfied"
)
TYPE_X, TYPE_Y = (f'device.attributes["driver-a"].type == "{t}"' for t in ("X", "Y"))
SELECTED = f'device.attributes["{DRIVER_A}"].selected'
V5, V6 = (f'device.attributes["driver-a"].generation == "{g}"' for g in ("v5", "v6"))
#: ``node(name, region)``: every test node is on earth too
PLANET_KEY, EARTH = "planet", "earth"
NUMA, VERSION, STRING, BOOL = (
    f"{DRIVER_A}/{a}" for a in ("numa", "driverVersion", "stringAttribute", "boolAttribute")
)
CLASSES_A = [device_class(CLASS_A, DRIVER_A)]
CLASSES_AB = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]


@dataclass(frozen=True)
class Error:
    """The allocation fails on every node with a text containing ``text`` (``AllocationError``), or with
    ``on_node`` this node only (``FailedOnNode``)."""

    text: str
    on_node: bool = False


def run(
    claims: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    *,
    node: str = NODE_1,
    region: str = REGION_1,
    allocated: Sequence[tuple[str, str, str]] = (),
    binding_conditions: bool = True,
) -> Any:
    """The claims' allocations on ``node`` (None: they do not fit), or ``Error``, found by the search,
    ``greedy`` and ``one_request``, which must agree, with kube-scheduler v1.37.2's default features
    (``binding_conditions``: DRADeviceBindingConditions). Objects are parsed one by one, as upstream
    lists them: two may have the same name."""
    parsed_classes = [parse_device_class(c) for c in classes]
    parsed_slices = [parse_resource_slice(s) for s in slices]
    parsed_claims = [parse_resource_claim(c) for c in claims]
    labels = {REGION_KEY: region, PLANET_KEY: EARTH}
    answers = []
    for way in ("search", "greedy", "one-request"):
        allocator = Allocator(
            lambda name: next((c for c in parsed_classes if c.name == name), None),
            parsed_slices,
            frozenset(allocated),
            DeviceMatcher(),
            versions={} if way == "one-request" else None,
            binding_conditions=binding_conditions,
            features=Features(),
        )
        allocator.search_only = way == "search"
        try:
            answers.append(_fixed_share_ids(allocator.allocate(node, labels, parsed_claims)))
        except AllocationError as e:
            answers.append(("error", str(e)))
        except FailedOnNode as e:
            answers.append(("on-node", str(e)))
    assert answers[1] == answers[0], "greedy differs from the search"
    assert answers[2] == answers[0], "one_request differs from the search"
    return answers[0]


def _fixed_share_ids(found: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Every ``shareID`` (a random UUID) replaced by ``SHARE_ID``, as upstream puts ``fixedShareID``."""
    for a in found or ():
        for r in a["devices"]["results"]:
            if "shareID" in r:
                assert len(r["shareID"]) == 36 and r["shareID"].count("-") == 4, r["shareID"]
                r["shareID"] = SHARE_ID
    return found


def check(found: Any, expected: Any) -> None:
    if isinstance(expected, Error):
        assert isinstance(found, tuple), found
        assert found[0] == ("on-node" if expected.on_node else "error")
        assert expected.text in found[1]
    else:
        assert found == expected


def admin(req: dict[str, Any]) -> dict[str, Any]:
    """The request with ``adminAccess: true``."""
    req["exactly"]["adminAccess"] = True
    return req


def all_of(name: str, class_name: str) -> dict[str, Any]:
    """An ``exactly`` request for all devices."""
    return request(name, class_name, mode="All")


def admin_result(request_name: str, driver: str, pool: str, device_name: str) -> dict[str, Any]:
    return {**result(request_name, driver, pool, device_name), "adminAccess": True}


def one(name: str, node: Any, pool: str, driver: str, *, count: int = 1) -> dict[str, Any]:
    """``sliceWithOneDevice``."""
    return slice_(name, node, pool, driver, device("device-1"), count=count)


def many(name: str, node: Any, pool: str, driver: str, count: int) -> dict[str, Any]:
    """``sliceWithMultipleDevices``: device-0, device-1, ..."""
    return slice_(name, node, pool, driver, *(device(f"device-{i}") for i in range(count)))


def memory(size: str) -> dict[str, str]:
    return {"memory": size}


def at_least(size: str) -> str:
    return f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("{size}")) >= 0'


def match(attribute: str, *requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {"matchAttribute": attribute}
    if requests:
        out["requests"] = list(requests)
    return out


def label_selector(key: str, value: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}


L1 = local(NODE_1)


def opaque(driver: str, attribute: str) -> dict[str, Any]:
    """``deviceConfiguration(driver, attribute)``."""
    return {"opaque": {"driver": driver, "parameters": {attribute: f"{attribute}Value"}}}


def class_with_config(name: str, driver: str, attribute: str) -> dict[str, Any]:
    """``classWithConfig``."""
    out = device_class(name, driver)
    out["spec"]["config"] = [opaque(driver, attribute)]
    return out


def with_configs(raw: dict[str, Any], *configs: tuple[Sequence[str], dict[str, Any]]) -> dict[str, Any]:
    """``withConfigs(deviceClaimConfig(requests, configuration)...)``."""
    raw["spec"]["devices"]["config"] = [
        {**({"requests": list(requests)} if requests else {}), **configuration}
        for requests, configuration in configs
    ]
    return raw


def configured(
    selector: dict[str, Any],
    results: Sequence[dict[str, Any]],
    *configs: tuple[str, Sequence[str], dict[str, Any]],
) -> dict[str, Any]:
    """``allocationResultWithConfigs``: (source, requests, configuration) per config."""
    out = allocation(selector, *results)
    out["devices"]["config"] = [
        {"source": source, **({"requests": list(requests)} if requests else {}), **configuration}
        for source, requests, configuration in configs
    ]
    return out


def with_selectors(req: dict[str, Any], *expressions: str) -> dict[str, Any]:
    spec = req.get("exactly", req)
    spec["selectors"] = [{"cel": {"expression": e}} if e else {} for e in expressions]
    return req


def attrs(driver_version: str | None = None, **values: Any) -> dict[str, Any]:
    """Device attributes; ``driver_version``: ``driverVersion`` as a version."""
    out = dict(values)
    if driver_version is not None:
        out["driverVersion"] = {"version": driver_version}
    return out


BIG = 9223372036854775807 // 2 + 1  # math.MaxInt/2+1


def multi_class(name: str, driver: str) -> dict[str, Any]:
    """``classWithAllowMultipleAllocations(name, driver, true)``."""
    out = device_class(name, driver)
    selector = f'device.driver == "{driver}" && device.allowMultipleAllocations == true'
    out["spec"]["selectors"] = [{"cel": {"expression": selector}}]
    return out


#: ``withCapacityRequestPolicyRange``: default 2, min 2, step 2, max 4
def policy_range(value: str) -> dict[str, Any]:
    return {
        "value": value,
        "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
    }


def share(request_name: str, device_name: str, amount: str) -> dict[str, Any]:
    """``withConsumedCapacity(&fixedShareID, {capacity-0: amount})``."""
    return result(request_name, DRIVER_A, POOL_1, device_name, share=True, consumed={"capacity-0": amount})


def tolerating(raw: dict[str, Any], *tolerations: dict[str, Any]) -> dict[str, Any]:
    """``withTolerations``: on every ``exactly`` request."""
    for req in raw["spec"]["devices"]["requests"]:
        req["exactly"]["tolerations"] = [dict(t) for t in tolerations]
    return raw


KEY1_NO_SCHEDULE = {"key": "key1", "value": "value1", "effect": "NoSchedule"}
TOLERATE_KEY1 = {"operator": "Exists", "key": "key1", "effect": "NoSchedule"}
PREPARE = (["IsPrepare"], ["BindingFailed"])
