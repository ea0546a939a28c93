"""Consumable capacity (``DRAConsumableCapacity``, ``DRAFractionalCapacityRange``): upstream's allocator cases
(``allocatortesting/allocator_testing.go`` at v0.37.2, ``consumable-capacity-*``, ``allow-multiple-*``,
``distinct-*``) and the policy arithmetic of ``incubating/consumable_capacity_test.go``, with upstream's
names; then what the scheduler keeps of the shares allocated in the cluster."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from _dra_kit import Handle, node, objects, pod
from _dra_upstream_kit import (
    CLASS_A,
    DRIVER_A,
    FROM_COUNTERS,
    NODE_1,
    POOL_1,
    allocate,
    allocation,
    claim,
    device,
    device_class,
    first_available,
    local,
    request,
    result,
    slice_,
    sub_request,
)

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS
from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice
from kopf_scheduler.framework.status import Status
from kopf_scheduler.plugins.dynamic_resources import CANNOT_ALLOCATE, Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.allocator import AllocationError
from kopf_scheduler.plugins.dynamic_resources.capacity import CapacityError, consumed, fits
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager
from kopf_scheduler.plugins.dynamic_resources.prepare import Features
from kopf_scheduler.plugins.dynamic_resources.sharing import Shares

CAP0, CAP1 = "capacity-0", "capacity-1"
ON = Features(partitionable=False, consumable=True, fractional=False)
BOTH = Features(partitionable=True, consumable=True, fractional=False)
OFF = Features(partitionable=False, consumable=False)
MAX_INT64 = str(2**63 - 1)
CHECKING = "claim default/claim-0, request req-0: checking capacity for device "
NOT_REPRESENTABLE = (
    'capacity "capacity-0": capacity request cannot be represented in the device\'s range arithmetic: '
)


def multi_class(name: str, driver: str, multiple: bool) -> dict[str, Any]:
    """``classWithAllowMultipleAllocations``."""
    selector = f'device.driver == "{driver}" && device.allowMultipleAllocations == {str(multiple).lower()}'
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }


def policy_range(value: str) -> dict[str, Any]:
    """``withCapacityRequestPolicyRange``: default 2, min 2, step 2, max 4."""
    return {
        "value": value,
        "requestPolicy": {"default": "2", "validRange": {"min": "2", "step": "2", "max": "4"}},
    }


def policy_values(default: str, value: str, *more: str) -> dict[str, Any]:
    """``withCapacityRequestPolicyValidValues``: the default first, then ``more``."""
    return {"value": value, "requestPolicy": {"default": default, "validValues": [default, *more]}}


MULTI = [multi_class(CLASS_A, DRIVER_A, True)]
#: ``withFractionalCapacityRequestPolicyRange(1)``: default 200m, min 200m, step 100m, max 1
FRACTIONAL_RANGE = {
    "value": "1",
    "requestPolicy": {"default": "200m", "validRange": {"min": "200m", "step": "100m", "max": "1"}},
}
PLAIN = [device_class(CLASS_A, DRIVER_A)]


def one_slice(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    return [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, *devices)]


def share(request_name: str, device_name: str, **used: str) -> dict[str, Any]:
    (amount,) = used.values()
    return result(request_name, DRIVER_A, POOL_1, device_name, share=True, consumed={CAP0: amount})


def asked(amount: str) -> dict[str, str]:
    return {CAP0: amount}


CASES: list[Any] = [
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        MULTI,
        one_slice(device("device-1", {CAP1: "1"}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-with-missing-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("1")))],
        MULTI,
        one_slice(device("device-1", {CAP1: "1"}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))],
        MULTI,
        one_slice(device("device-1", multiple=True)),
        {},
        [
            allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1", share=True)),
            allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1", share=True)),
        ],
        id="consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))],
        MULTI,
        one_slice(
            device("device-1", {CAP0: "1"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="1")),
            allocation(local(NODE_1), share("req-0", "device-2", c="1")),
        ],
        id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))],
        MULTI,
        one_slice(device("device-1", {CAP0: "2"}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block",
    ),
    pytest.param(
        [
            claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))),
            claim("claim-1", request("req-0", CLASS_A, capacity=asked("1"))),
        ],
        MULTI,
        one_slice(device("device-1", {CAP0: "2"}, multiple=True)),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="1")),
            allocation(local(NODE_1), share("req-0", "device-1", c="1")),
        ],
        id="consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="2")),
            allocation(local(NODE_1), share("req-0", "device-1", c="2")),
        ],
        id="consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_values("0", "1")}, multiple=True)),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="0")),
            allocation(local(NODE_1), share("req-0", "device-1", c="0")),
        ],
        id="consumable-capacity-multi-allocatable-device-with-zero-request-policy",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_values("0", "1")}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-violates-zero-request-policy",
    ),
    pytest.param(
        [
            claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))),
            claim("claim-1", request("req-0", CLASS_A, capacity=asked("1"))),
        ],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="2")),
            allocation(local(NODE_1), share("req-0", "device-1", c="2")),
        ],
        id="consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("3")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="4"))],
        id="consumable-capacity-multi-allocatable-device-with-range-policy-step",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("2")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_values("1", "4", "2")}, multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="2"))],
        id="consumable-capacity-multi-allocatable-device-with-valid-values-policy",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("2")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_values("1", "3", "3")}, multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="3"))],
        id="consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up",
    ),
    pytest.param(
        [
            claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))),
            claim("claim-1", request("req-0", CLASS_A, capacity=asked("2"))),
        ],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("2")}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("6")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("10")}, multiple=True)),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("2")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(2)}})},
        [allocation(local(NODE_1), share("req-0", "device-1", c="2"))],
        id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("2")))],
        MULTI,
        one_slice(
            device("device-1", {CAP0: policy_range("2")}, multiple=True),
            device("device-2", {CAP0: policy_range("2")}, multiple=True),
        ),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(2)}})},
        [allocation(local(NODE_1), share("req-0", "device-2", c="2"))],
        id="consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("2")),
                request("req-1", CLASS_A, capacity=asked("2")),
                constraints=[{"matchAttribute": f"{DRIVER_A}/stringAttribute"}],
            ),
            claim("claim-1", request("req-0", CLASS_A, capacity=asked("2"))),
        ],
        PLAIN,
        one_slice(
            device(
                "device-2",
                {CAP0: policy_range("2")},
                {"stringAttribute": "stringAttributeValue1"},
                multiple=True,
            ),
            device(
                "device-1",
                {CAP0: policy_range("4")},
                {"stringAttribute": "stringAttributeValue2"},
                multiple=True,
            ),
        ),
        {},
        [
            allocation(local(NODE_1), share("req-0", "device-1", c="2"), share("req-1", "device-1", c="2")),
            allocation(local(NODE_1), share("req-0", "device-2", c="2")),
        ],
        id="consumable-capacity-with-multi-allocatable-device-backtrack",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    "req-0",
                    sub_request("subReq-0", CLASS_A, capacity=asked("4")),
                    sub_request("subReq-1", CLASS_A, capacity=asked("2")),
                    sub_request("subReq-1", CLASS_A),
                ),
            )
        ],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("2")}, multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0/subReq-1", "device-1", c="2"))],
        id="consumable-capacity-multi-allocatable-device-with-subrequest",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("2")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("2")}, multiple=True)),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(2)}})},
        None,
        id="consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("2")))],
        MULTI,
        one_slice(device("device-1", {CAP0: "2"}, multiple=True), device("device-2", multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="2"))],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("2")))],
        MULTI,
        one_slice(
            device("device-1", {CAP0: "2"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="2"))],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("1")),
                request("req-1", CLASS_A, mode="All", capacity=asked("1")),
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", {CAP0: "2"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {},
        [
            allocation(
                local(NODE_1),
                share("req-0", "device-1", c="1"),
                share("req-1", "device-1", c="1"),
                share("req-1", "device-2", c="1"),
            )
        ],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("1")))],
        PLAIN,
        one_slice(
            device("device-1", {CAP0: "2"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(1)}})},
        [allocation(local(NODE_1), share("req-0", "device-1", c="1"), share("req-0", "device-2", c="1"))],
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("1")),
                request("req-1", CLASS_A, mode="All", capacity=asked("1")),
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", {CAP0: "1"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {},
        None,
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("1")))],
        PLAIN,
        one_slice(
            device("device-1", {CAP0: "1"}, multiple=True), device("device-2", {CAP0: "1"}, multiple=True)
        ),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(1)}})},
        None,
        id="consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        [multi_class(CLASS_A, DRIVER_A, False)],
        one_slice(device("device-1", {CAP0: "1"})),
        {},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1"))],
        id="consumable-capacity-dedicated-device-with-consumable-capacity-request",
    ),
    pytest.param(
        [
            claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))),
            claim("claim-1", request("req-0", CLASS_A, capacity=asked("1"))),
        ],
        [multi_class(CLASS_A, DRIVER_A, False)],
        one_slice(device("device-1", {CAP0: policy_range("2")})),
        {},
        None,
        id="consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("2")),
                request("req-1", CLASS_A, capacity=asked("1000000000000000000000")),
            )
        ],
        PLAIN,
        one_slice(
            device(
                "device-1",
                {
                    CAP0: {
                        "value": "1000000000000000000002",
                        "requestPolicy": {"default": "1000000000000000000000", "validRange": {"min": "2"}},
                    }
                },
                multiple=True,
            )
        ),
        {},
        [
            allocation(
                local(NODE_1),
                share("req-0", "device-1", c="2"),
                share("req-1", "device-1", c="1000000000000000000000"),
            )
        ],
        id="consumable-capacity-requests-are-not-modified",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        [multi_class(CLASS_A, DRIVER_A, False)],
        one_slice(device("device-1", {CAP0: "1"}, multiple=True)),
        {},
        None,
        id="allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("2")}, multiple=True)),
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        None,
        id="allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))],
        MULTI,
        one_slice(device("device-1", {CAP0: policy_range("2")})),
        {"shares": Shares(frozenset(), {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(1)}})},
        None,
        id="allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                first_available(
                    "req-1",
                    sub_request(
                        "subReq-0",
                        CLASS_A,
                        1,
                        f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("6Gi")) >= 0',
                    ),
                    sub_request(
                        "subReq-1",
                        CLASS_A,
                        1,
                        f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("4Gi")) >= 0',
                    ),
                ),
            )
        ],
        MULTI,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1", FROM_COUNTERS, counters=[("counter-set-1", {"memory": "4Gi"})], multiple=True
                ),
                device(
                    "device-2", FROM_COUNTERS, counters=[("counter-set-1", {"memory": "6Gi"})], multiple=True
                ),
                device(
                    "device-3", FROM_COUNTERS, counters=[("counter-set-1", {"memory": "4Gi"})], multiple=True
                ),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[("counter-set-1", {"memory": "8Gi"})],
            ),
        ],
        {"features": BOTH},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", share=True, consumed={"memory": "4Gi"}),
                result(
                    "req-1/subReq-1", DRIVER_A, POOL_1, "device-3", share=True, consumed={"memory": "4Gi"}
                ),
            )
        ],
        id="allow-multiple-allocations-with-partitionable-device",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(
                    "req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].mode == "b"', capacity=asked("1")
                ),
            )
        ],
        MULTI,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    {"mode": "a"},
                    counters=[("counter-set-1", {CAP0: "1"})],
                    multiple=True,
                ),
                device(
                    "device-2",
                    FROM_COUNTERS,
                    {"mode": "b"},
                    counters=[("counter-set-1", {CAP0: "1"})],
                    multiple=True,
                ),
                count=2,
            ),
            slice_(
                "slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[("counter-set-1", {CAP0: "1"})]
            ),
        ],
        {
            "features": BOTH,
            "shares": Shares(
                frozenset({(DRIVER_A, POOL_1, "device-1")}),
                {(DRIVER_A, POOL_1, "device-1"): {CAP0: Fraction(1)}},
            ),
        },
        None,
        id="allow-multiple-allocations-with-shared-device-counter-cross-cycle",
    ),
    pytest.param(
        [
            claim(
                "claim-0", request("req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].kind == "shared"')
            ),
            claim(
                "claim-1",
                request(
                    "req-1",
                    CLASS_A,
                    1,
                    f'device.attributes["{DRIVER_A}"].kind == "shared" || '
                    f'device.attributes["{DRIVER_A}"].kind == "fallback"',
                ),
                request("req-2", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].kind == "gate"'),
                request("req-3", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].kind == "shared"'),
                constraints=[
                    {"matchAttribute": f"{DRIVER_A}/stringAttribute", "requests": ["req-1", "req-2"]}
                ],
            ),
        ],
        PLAIN,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    None,
                    {"kind": "shared", "stringAttribute": "red"},
                    counters=[("counter-set-1", {"c": "1"})],
                    multiple=True,
                ),
                device("device-2", None, {"kind": "fallback", "stringAttribute": "blue"}),
                device("device-3", None, {"kind": "gate", "stringAttribute": "blue"}),
                count=2,
            ),
            slice_(
                "slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[("counter-set-1", {"c": "1"})]
            ),
        ],
        {"features": BOTH},
        [
            allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1", share=True)),
            allocation(
                local(NODE_1),
                result("req-1", DRIVER_A, POOL_1, "device-2"),
                result("req-2", DRIVER_A, POOL_1, "device-3"),
                result("req-3", DRIVER_A, POOL_1, "device-1", share=True),
            ),
        ],
        id="partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].kind == "shared"'),
                request("req-1", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].kind == "counteronly"'),
            )
        ],
        PLAIN,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    None,
                    {"kind": "shared"},
                    counters=[("counter-set-1", {"c": "1"})],
                    multiple=True,
                ),
                device("device-2", None, {"kind": "shared"}),
                device("device-3", None, {"kind": "counteronly"}, counters=[("counter-set-1", {"c": "1"})]),
                count=2,
            ),
            slice_(
                "slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[("counter-set-1", {"c": "1"})]
            ),
        ],
        {"features": BOTH},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-1", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-consumable-capacity-backtrack-releases-counter",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 3),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"stringAttribute": "a"}),
            device("device-2", None, {"stringAttribute": "a"}),
            device("device-3", None, {"stringAttribute": "b"}),
        ),
        {},
        None,
        id="distinct-constraint-single-request-count-3-not-distinct",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"stringAttribute": "a"}),
            device("device-2", None, {"stringAttribute": "a"}),
            device("device-3", None, {"stringAttribute": "b"}),
        ),
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="distinct-constraint-backtracks-to-another-value",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 1),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        PLAIN,
        one_slice(device("device-1")),
        {},
        None,
        id="with-distinct-constraints-attribute-not-set",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A))],
        PLAIN,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[("counter-set-1", {"c": "1"})], multiple=True),
                count=2,
            ),
            slice_(
                "slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[("counter-set-1", {"c": "1"})]
            ),
        ],
        {"features": BOTH, "shares": Shares(frozenset({(DRIVER_A, POOL_1, "device-1")}), {})},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1", share=True))],
        id="partitionable-consumable-capacity-shared-device-counter-not-recharged",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("1")),
                request("req-2", CLASS_A, capacity=asked("2")),
                first_available(
                    "req-1",
                    sub_request(
                        "subReq-0",
                        CLASS_A,
                        1,
                        f'device.capacity["{DRIVER_A}"]["{CAP0}"].compareTo(quantity("4")) >= 0',
                        capacity=asked("1"),
                    ),
                    sub_request(
                        "subReq-1",
                        CLASS_A,
                        1,
                        f'device.capacity["{DRIVER_A}"]["{CAP0}"].compareTo(quantity("2")) >= 0',
                        capacity=asked("1"),
                    ),
                ),
            )
        ],
        PLAIN,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    {CAP0: "2", CAP1: policy_range("4")},
                    counters=[("counter-set-1", {CAP0: "2"}), ("counter-set-2", {CAP1: "4"})],
                    multiple=True,
                ),
                device(
                    "device-2",
                    {CAP0: "4", CAP1: policy_range("4")},
                    counters=[("counter-set-1", {CAP0: "4"}), ("counter-set-2", {CAP1: "4"})],
                    multiple=True,
                ),
                device(
                    "device-3",
                    {CAP0: "2", CAP1: policy_range("4")},
                    counters=[("counter-set-1", {CAP0: "2"}), ("counter-set-2", {CAP1: "4"})],
                    multiple=True,
                ),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[("counter-set-1", {CAP0: "4"}), ("counter-set-2", {CAP1: "8"})],
            ),
        ],
        {"features": BOTH},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", share=True, consumed={CAP0: "1", CAP1: "2"}),
                result("req-2", DRIVER_A, POOL_1, "device-3", share=True, consumed={CAP0: "2", CAP1: "2"}),
                result(
                    "req-1/subReq-1",
                    DRIVER_A,
                    POOL_1,
                    "device-1",
                    share=True,
                    consumed={CAP0: "1", CAP1: "2"},
                ),
            )
        ],
        id="consumable-capacity-with-partitionable-device-multiple-capacity-pools",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                request("req-1", CLASS_A),
                request("req-2", CLASS_A),
                request("req-3", CLASS_A),
                constraints=[
                    {"distinctAttribute": f"{DRIVER_A}/boolAttribute", "requests": ["req-0", "req-1"]},
                    {
                        "distinctAttribute": f"{DRIVER_A}/driverVersion",
                        "requests": ["req-0", "req-1", "req-2"],
                    },
                    {
                        "distinctAttribute": f"{DRIVER_A}/numa",
                        "requests": ["req-0", "req-1", "req-2", "req-3"],
                    },
                ],
            )
        ],
        PLAIN,
        one_slice(
            device(
                "device-1",
                None,
                {"driverVersion": {"version": "1.0.0"}, "numa": 0, "boolAttribute": True},
                multiple=True,
            ),
            device(
                "device-2",
                None,
                {"driverVersion": {"version": "1.0.1"}, "numa": 1, "boolAttribute": False},
                multiple=True,
            ),
            device(
                "device-3",
                None,
                {"driverVersion": {"version": "1.0.2"}, "numa": 2, "boolAttribute": True},
                multiple=True,
            ),
            device(
                "device-4",
                None,
                {"driverVersion": {"version": "1.0.0"}, "numa": 3, "boolAttribute": True},
                multiple=True,
            ),
        ),
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", share=True),
                result("req-1", DRIVER_A, POOL_1, "device-2", share=True),
                result("req-2", DRIVER_A, POOL_1, "device-3", share=True),
                result("req-3", DRIVER_A, POOL_1, "device-4", share=True),
            )
        ],
        id="with-distinct-constraints",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 3),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"stringAttribute": "value1"}),
            device("device-2", None, {"stringAttribute": "value2"}),
            device("device-3", None, {"stringAttribute": "value3"}),
        ),
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="distinct-constraint-single-request-count-3-all-distinct",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                request("req-1", CLASS_A, 1),
                constraints=[
                    {"distinctAttribute": f"{DRIVER_A}/stringAttribute", "requests": ["req-0", "req-1"]}
                ],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"stringAttribute": "value1"}),
            device("device-2", None, {"stringAttribute": "value2"}),
            device("device-3", None, {"stringAttribute": "value1"}),
        ),
        {},
        None,
        id="distinct-constraint-two-requests-with-count-not-distinct",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                *(
                    first_available(
                        name,
                        sub_request("subReq-0", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].boolAttribute'),
                        sub_request("subReq-1", CLASS_A, 1),
                    )
                    for name in ("req-0", "req-1", "req-2")
                ),
                constraints=[
                    {"distinctAttribute": f"{DRIVER_A}/boolAttribute", "requests": ["req-0", "req-1"]}
                ],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"boolAttribute": True}, multiple=True),
            device("device-2", None, {"boolAttribute": False}, multiple=True),
        ),
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0/subReq-0", DRIVER_A, POOL_1, "device-1", share=True),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-2", share=True),
                result("req-2/subReq-0", DRIVER_A, POOL_1, "device-1", share=True),
            )
        ],
        id="with-distinct-constraints-with-subrequests",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 3),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}],
            )
        ],
        PLAIN,
        one_slice(device("device-1"), device("device-2"), device("device-3")),
        {},
        None,
        id="distinct-constraint-single-request-multiple-devices-attribute-not-set",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 3),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"numa": 1}),
            device("device-2", None, {"numa": 2}),
            device("device-3", None, {"numa": 2}),
            device("device-4", None, {"numa": 2}),
        ),
        {},
        None,
        id="distinct-constraint-single-request-not-enough-distinct-values",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 3),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/numa"}],
            )
        ],
        PLAIN,
        one_slice(
            device("device-1", None, {"numa": 1}),
            device("device-2", None, {"numa": 2}),
            device("device-3", None, {"numa": 1}),
            device("device-4", None, {"numa": 3}),
        ),
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-4"),
            )
        ],
        id="distinct-constraint-single-request-multiple-devices-attribute-set",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, capacity=asked("1")),
                request("req-1", CLASS_A, capacity=asked("1")),
                constraints=[{"distinctAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        MULTI,
        one_slice(
            device(
                "device-1",
                {CAP0: policy_range("2")},
                {"stringAttribute": "stringAttributeValue"},
                multiple=True,
            )
        ),
        {},
        None,
        id="distinct-constraint-one-multi-allocatable-device-with-distinct-constraint",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("200m")))],
        MULTI,
        one_slice(device("device-1", {CAP0: FRACTIONAL_RANGE}, multiple=True)),
        {},
        [allocation(local(NODE_1), share("req-0", "device-1", c="1"))],
        id="consumable-capacity-fractional-range-gate-disabled",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, capacity=asked("250m")))],
        MULTI,
        one_slice(device("device-1", {CAP0: FRACTIONAL_RANGE}, multiple=True)),
        {"features": Features(partitionable=False, consumable=True, fractional=True)},
        [allocation(local(NODE_1), share("req-0", "device-1", c="300m"))],
        id="consumable-capacity-fractional-range-gate-enabled-round-up",
    ),
]


@pytest.mark.parametrize(("claims", "classes", "slices", "options", "expected"), CASES)
def test_upstream_cases(
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    options: dict[str, Any],
    expected: Any,
) -> None:
    features = options.pop("features", ON)
    assert allocate(claims, classes, slices, features=features, **options) == expected


@pytest.mark.parametrize(
    ("claims", "slices", "message"),
    [
        pytest.param(
            [claim("claim-0", request("req-0", CLASS_A, capacity=asked("18446744073709551616")))],
            one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
            f"{CHECKING}driver-a/pool-1/device-1: {NOT_REPRESENTABLE}"
            "request 18446744073709551616 exceeds MaxInt64",
            id="consumable-capacity-range-policy-request-above-int64-rejected",
        ),
        pytest.param(
            [claim("claim-0", request("req-0", CLASS_A, capacity=asked(MAX_INT64)))],
            one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
            f"{CHECKING}driver-a/pool-1/device-1: {NOT_REPRESENTABLE}"
            f"rounding request {MAX_INT64} up to the next step passes MaxInt64",
            id="consumable-capacity-range-policy-rounded-value-overflow-rejected",
        ),
        pytest.param(
            [claim("claim-0", request("req-0", CLASS_A, capacity=asked("18446744073709551616")))],
            one_slice(
                device("device-1", {CAP0: policy_range("4")}, multiple=True),
                device("device-2", {CAP0: "36893488147419103232"}, multiple=True),
            ),
            f"{CHECKING}driver-a/pool-1/device-1: {NOT_REPRESENTABLE}"
            "request 18446744073709551616 exceeds MaxInt64",
            id="consumable-capacity-range-policy-overflow-aborts-not-skip",
        ),
        pytest.param(
            [claim("claim-0", request("req-0", CLASS_A, mode="All", capacity=asked("18446744073709551616")))],
            one_slice(device("device-1", {CAP0: policy_range("4")}, multiple=True)),
            f"{CHECKING}device-1: {NOT_REPRESENTABLE}request 18446744073709551616 exceeds MaxInt64",
            id="consumable-capacity-range-policy-allocation-mode-all-overflow-aborts",
        ),
        pytest.param(
            [claim("claim-0", request("req-0", CLASS_A, capacity=asked("-5")))],
            one_slice(device("device-1", {CAP0: "10"}, multiple=True)),
            f'{CHECKING}driver-a/pool-1/device-1: capacity "capacity-0": capacity value is negative',
            id="consumable-capacity-negative-request-aborts",
        ),
    ],
)
def test_unrepresentable_requests_fail_every_node(
    claims: list[dict[str, Any]], slices: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(AllocationError) as e:
        allocate(claims, MULTI, slices, features=ON)
    assert str(e.value) == message


@pytest.mark.parametrize(
    ("claim_body", "message"),
    [
        pytest.param(
            claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))),
            "claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity "
            "feature is disabled",
            id="consumable-capacity-disabled-feature",
        ),
        pytest.param(
            claim(
                "claim-0",
                first_available(
                    "req-0",
                    sub_request("subReq-0", CLASS_A, capacity=asked("1")),
                    sub_request("subReq-1", CLASS_A, capacity=asked("1")),
                ),
            ),
            "claim default/claim-0, subrequest subReq-0: has capacity requests, but the "
            "DRAConsumableCapacity feature is disabled",
            id="consumable-capacity-disabled-feature-with-prioritized-list",
        ),
        pytest.param(
            claim("claim-0", request("req-0", CLASS_A), constraints=[{"distinctAttribute": f"{DRIVER_A}/a"}]),
            "claim default/claim-0, constraint #0: distinctAttribute needs the DRAConsumableCapacity "
            "feature, which is disabled",
            id="distinct-attribute-disabled-feature",
        ),
    ],
)
def test_capacity_requests_need_the_feature(claim_body: dict[str, Any], message: str) -> None:
    with pytest.raises(AllocationError) as e:
        allocate([claim_body], PLAIN, one_slice(device("device-1")), features=OFF)
    assert str(e.value) == message


def test_shared_device_is_taken_whole_without_the_feature() -> None:
    """With consumable capacity off, a device that allows multiple allocations is allocated whole, once."""
    claims = [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-0", CLASS_A))]
    slices = one_slice(device("device-1", {CAP0: "2"}, multiple=True))
    assert allocate(claims, PLAIN, slices, features=OFF) is None
    assert allocate(claims[:1], PLAIN, slices, features=OFF) == [
        allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1"))
    ]


# -- the policy arithmetic (``consumable_capacity_test.go``) ------------------------------------------------
def capacity_device(value: str, policy: dict[str, Any] | None) -> Any:
    spec: dict[str, Any] = {"value": value}
    if policy is not None:
        spec["requestPolicy"] = policy
    raw = slice_("s", NODE_1, POOL_1, DRIVER_A, device("d", {CAP0: spec}, multiple=True))
    return parse_resource_slice(raw).devices[0]


def take(requested: str | None, value: str, policy: dict[str, Any] | None, fractional: bool = False) -> str:
    requests = None if requested is None else [(CAP0, *_amount(requested))]
    found = consumed(requests, capacity_device(value, policy), fractional)
    assert found is not None
    return found[CAP0].text


def _amount(text: str) -> tuple[Fraction, str]:
    from kopf_scheduler.api.quantity import parse_quantity

    return parse_quantity(text), text


@pytest.mark.parametrize(
    ("requested", "value", "policy", "fractional", "expected"),
    [
        pytest.param(None, "1", {}, False, "1", id="empty"),
        pytest.param(
            str(2**63 - 2),
            MAX_INT64,
            {"default": "1", "validRange": {"min": "1", "step": "2"}},
            False,
            MAX_INT64,
            id="max-safe-boundary-rounds-to-maxint64",
        ),
        pytest.param(None, "2", {"default": "1", "validRange": {"min": "1"}}, False, "1", id="min in range"),
        pytest.param(None, "2", {"default": "1", "validValues": ["1"]}, False, "1", id="default in set"),
        pytest.param(
            "2", "2", {"default": "1", "validRange": {"min": "1"}}, False, "2", id="more than min in range"
        ),
        pytest.param(
            "1", "2", {"default": "1", "validRange": {"min": "2"}}, False, "2", id="less than min in range"
        ),
        pytest.param(
            "2",
            "3",
            {"default": "1", "validRange": {"min": "1", "step": "2"}},
            False,
            "3",
            id="with step (round up)",
        ),
        pytest.param(
            "2",
            "2",
            {"default": "1", "validRange": {"min": "1", "step": "1"}},
            False,
            "2",
            id="with step (no remaining)",
        ),
        pytest.param(
            "250m",
            "1",
            {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}},
            True,
            "300m",
            id="fractional step round up (0.25 to 0.3)",
        ),
        pytest.param(
            "400m",
            "1",
            {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}},
            True,
            "400m",
            id="fractional step already aligned (0.4 = min+2*step)",
        ),
        pytest.param(
            "250m",
            "1",
            {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}},
            False,
            "1",
            id="fractional step counted in whole units without DRAFractionalCapacityRange",
        ),
        pytest.param(
            "2", "3", {"default": "1", "validValues": ["1", "2", "3"]}, False, "2", id="valid value in set"
        ),
        pytest.param("2", "3", {"default": "1", "validValues": ["1", "3"]}, False, "3", id="set (round up)"),
        pytest.param("3", "3", {"default": "1", "validValues": ["1", "2"]}, False, "3", id="larger than set"),
        pytest.param(
            "3Gi",
            "16Gi",
            {"default": "1Gi", "validRange": {"min": "1Gi", "step": "2Gi"}},
            False,
            "3Gi",
            id="binary step keeps the binary format",
        ),
    ],
)
def test_calculate_consumed_capacity(
    requested: str | None, value: str, policy: dict[str, Any], fractional: bool, expected: str
) -> None:
    assert take(requested, value, policy, fractional) == expected


@pytest.mark.parametrize(
    ("requested", "value", "policy", "fractional"),
    [
        pytest.param(
            str(2**64 + 3),
            str(2**64 + 3),
            {"default": "0", "validRange": {"min": "0", "step": "3"}},
            False,
            id="request-above-maxint64-is-rejected",
        ),
        pytest.param(
            MAX_INT64,
            str(2**63),
            {"default": "0", "validRange": {"min": "0", "step": "2"}},
            False,
            id="rounded-value-above-maxint64-is-rejected",
        ),
        pytest.param(
            str(2**63),
            str(2**63),
            {"default": "1", "validRange": {"min": "100m", "step": "100m"}},
            True,
            id="fractional-step-request-not-milli-representable-is-rejected",
        ),
        pytest.param(
            f"{2**63 - 2}m",
            f"{2**63 - 1}m",
            {"default": "100m", "validRange": {"min": "100m", "step": "100m"}},
            True,
            id="fractional-step-rounded-value-passes-milli-range-is-rejected",
        ),
    ],
)
def test_unrepresentable_consumed_capacity(
    requested: str, value: str, policy: dict[str, Any], fractional: bool
) -> None:
    with pytest.raises(CapacityError) as e:
        take(requested, value, policy, fractional)
    assert "capacity request cannot be represented in the device's range arithmetic" in str(e.value)


@pytest.mark.parametrize(
    ("requested", "policy", "fractional", "violates"),
    [
        pytest.param("1", None, False, False, id="no constraint"),
        pytest.param(
            "1",
            {"default": "1", "validRange": {"min": "1", "max": "2"}},
            False,
            False,
            id="less than maximum",
        ),
        pytest.param(
            "2", {"default": "1", "validRange": {"min": "1", "max": "1"}}, False, True, id="more than maximum"
        ),
        pytest.param("1", {"default": "1", "validValues": ["1"]}, False, False, id="in set"),
        pytest.param("2", {"default": "1", "validValues": ["1"]}, False, True, id="not in set"),
        pytest.param(
            "300m",
            {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}},
            True,
            False,
            id="fractional step aligned (0.3 = min+1*step)",
        ),
        pytest.param(
            "250m",
            {"default": "200m", "validRange": {"min": "200m", "max": "1", "step": "100m"}},
            True,
            True,
            id="fractional step not aligned (0.25 is not a multiple of 0.1 from 0.2)",
        ),
    ],
)
def test_violates_capacity_request_policy(
    requested: str, policy: dict[str, Any] | None, fractional: bool, violates: bool
) -> None:
    """``violatesPolicy``, seen through ``fits``: what the policy refuses never fits; everything else fits
    in a capacity of 10."""
    subject = capacity_device("10", policy)
    from kopf_scheduler.framework.objects.resource_slices import Amount

    amount = Amount(*_amount(requested))
    assert fits({CAP0: amount}, subject, fractional, None, None) is not violates


# -- shares in the cluster ----------------------------------------------------------------------------------
def test_manager_keeps_shares_apart_from_whole_devices() -> None:
    """Results with a ``shareID`` are shares: the device is not allocated whole, and what the shares
    consume is summed per device (upstream's ``GatherAllocatedState``)."""

    def allocated(name: str, *results: dict[str, Any]) -> dict[str, Any]:
        body = claim(name, request("req-0", CLASS_A))
        body["status"] = {"allocation": allocation(local(NODE_1), *results)}
        return body

    store = objects(
        allocated(
            "a",
            {
                **result("req-0", DRIVER_A, POOL_1, "shared"),
                "shareID": "s1",
                "consumedCapacity": {CAP0: "1Gi"},
            },
        ),
        allocated(
            "b",
            {
                **result("req-0", DRIVER_A, POOL_1, "shared"),
                "shareID": "s2",
                "consumedCapacity": {CAP0: "2Gi"},
            },
        ),
        allocated(
            "c",
            result("req-0", DRIVER_A, POOL_1, "whole"),
            {**result("req-0", DRIVER_A, POOL_1, "empty"), "shareID": "s3"},
        ),
    )
    manager = DraManager(store)
    assert set(manager.allocated_devices()) == {(DRIVER_A, POOL_1, "whole")}
    shares = manager.shares()
    assert shares.devices == {(DRIVER_A, POOL_1, "shared"), (DRIVER_A, POOL_1, "empty")}
    assert shares.capacity == {(DRIVER_A, POOL_1, "shared"): {CAP0: Fraction(3 * 2**30)}}
    store.store(RESOURCE_CLAIMS).delete("default", "b")
    assert manager.shares().capacity == {(DRIVER_A, POOL_1, "shared"): {CAP0: Fraction(2**30)}}


# -- the feature gates, through the plugin ------------------------------------------------------------------
def _filter(gates: dict[str, bool], *raws: dict[str, Any]) -> Status | None:
    """DynamicResources' Filter on node-1 for a pod using the claim ``claim-0``, under kube-scheduler
    v1.37.2's gates with ``gates`` set (the DeviceClass is ``PLAIN``'s)."""
    handle = Handle(objects(*PLAIN, *raws), FeatureGates.resolve((1, 37), gates))
    plugin = DynamicResources(Args(), handle)
    state, subject = CycleState(), pod("p", "claim-0")
    assert plugin.pre_filter(state, subject, []) == (None, None)
    return plugin.filter(state, subject, node(NODE_1))


def _held_share(consumed: str) -> dict[str, Any]:
    body = claim("held", request("req-0", CLASS_A))
    body["status"] = {
        "allocation": allocation(
            local(NODE_1),
            {
                **result("req-0", DRIVER_A, POOL_1, "device-1"),
                "shareID": "s1",
                "consumedCapacity": {CAP0: consumed},
            },
        )
    }
    return body


def test_gate_on_a_device_is_shared_by_capacity() -> None:
    shared = one_slice(device("device-1", {CAP0: "2"}, multiple=True))
    assert (
        _filter(
            {}, *shared, _held_share("1"), claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))
        )
        is None
    )
    full = _filter(
        {}, *shared, _held_share("2"), claim("claim-0", request("req-0", CLASS_A, capacity=asked("1")))
    )
    assert full is not None and full.reasons == (CANNOT_ALLOCATE,)


def test_gate_off_a_share_takes_the_device_and_capacity_requests_are_refused() -> None:
    shared = one_slice(device("device-1", {CAP0: "2"}, multiple=True))
    off = {"DRAConsumableCapacity": False}
    taken = _filter(off, *shared, _held_share("1"), claim("claim-0", request("req-0", CLASS_A)))
    assert taken is not None and taken.reasons == (CANNOT_ALLOCATE,)
    with pytest.raises(AllocationError) as e:
        _filter(off, *shared, claim("claim-0", request("req-0", CLASS_A, capacity=asked("1"))))
    assert str(e.value).endswith("has capacity requests, but the DRAConsumableCapacity feature is disabled")


def test_partitionable_gate_decides_whether_counters_are_used() -> None:
    slices = [
        slice_("a", NODE_1, POOL_1, DRIVER_A, device("device-1", counters=[("set", {"c": "1"})]), count=2),
        slice_("b", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[("set", {"c": "1"})]),
    ]
    wanted = claim("claim-0", request("req-0", CLASS_A))
    assert _filter({}, *slices, wanted) is None
    off = _filter({"DRAPartitionableDevices": False}, *slices, wanted)
    assert off is not None and off.reasons == (CANNOT_ALLOCATE,)


def test_one_request_takes_a_shared_device_once() -> None:
    """A request for two devices gets two devices, not two shares of one (the search goes on past the
    device it took, upstream's ``startLocation``); two requests may share it."""
    slices = one_slice(device("device-1", {CAP0: "8"}, multiple=True))
    assert (
        allocate([claim("claim-0", request("req-0", CLASS_A, 2, capacity=asked("1")))], PLAIN, slices) is None
    )
    two = claim(
        "claim-0",
        request("req-0", CLASS_A, capacity=asked("1")),
        request("req-1", CLASS_A, capacity=asked("1")),
    )
    assert allocate([two], PLAIN, slices) == [
        allocation(local(NODE_1), share("req-0", "device-1", c="1"), share("req-1", "device-1", c="1"))
    ]
