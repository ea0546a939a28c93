"""Partitionable devices (``DRAPartitionableDevices``): upstream's allocator cases for counter sets,
devices consuming counters and per-device node selection (``allocatortesting/allocator_testing.go`` at
v0.37.2, ``partitionable-devices-*``), each with upstream's name, objects and expected results."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_upstream_kit import (
    ALL_NODES,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    FROM_COUNTERS,
    NODE_1,
    NODE_2,
    PER_DEVICE,
    POOL_1,
    POOL_2,
    REGION_1,
    REGION_2,
    REGION_KEY,
    allocate,
    allocation,
    claim,
    device,
    device_class,
    first_available,
    local,
    node_labels,
    region_selector,
    request,
    result,
    slice_,
    sub_request,
)

from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice
from kopf_scheduler.plugins.dynamic_resources.pools import gather_pools
from kopf_scheduler.plugins.dynamic_resources.prepare import Features

CS1, CS2 = "counter-set-1", "counter-set-2"
#: ``taintNoSchedule``
NO_SCHEDULE = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}
ON = Features(partitionable=True, consumable=False)
OFF = Features(partitionable=False, consumable=False)
CLASSES = [device_class(CLASS_A, DRIVER_A)]
AT_LEAST_6GI = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("6Gi")) >= 0'
AT_LEAST_4GI = f'device.capacity["{DRIVER_A}"].memory.compareTo(quantity("4Gi")) >= 0'


def counters(name: str, **values: str) -> tuple[str, dict[str, str]]:
    return name, values


THREE_FROM_8GI = [
    slice_(
        "slice-1",
        NODE_1,
        POOL_1,
        DRIVER_A,
        device("device-1", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")]),
        device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="6Gi")]),
        device("device-3", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")]),
        count=2,
    ),
    slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="8Gi")]),
]

CASES: list[Any] = [
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, memory="4Gi")]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="8Gi")]),
        ],
        {},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1"))],
        id="partitionable-devices-single-device",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, c="9000000000000000000")]),
                device("device-2", counters=[counters(CS1, c="1")]),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, c="10000000000000000000")],
            ),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-2"))],
        id="partitionable-devices-counter-quantities-are-not-modified",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-1", CLASS_B, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, c="1")]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, c="1")]),
            slice_(
                "slice-3",
                NODE_1,
                POOL_1,
                DRIVER_B,
                device("device-2", counters=[counters(CS1, c="2")]),
                count=2,
            ),
            slice_("slice-4", NODE_1, POOL_1, DRIVER_B, count=2, counter_sets=[counters(CS1, c="2")]),
        ],
        {"classes": [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]},
        [
            allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-1")),
            allocation(local(NODE_1), result("req-1", DRIVER_B, POOL_1, "device-2")),
        ],
        id="partitionable-devices-counter-cache-scoped-by-pool-ID",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1)), claim("claim-1", request("req-1", CLASS_B, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, c="1")]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, c="1")]),
            slice_(
                "slice-3",
                NODE_1,
                POOL_1,
                DRIVER_B,
                device("device-2", counters=[counters(CS2, d="2")]),
                count=2,
            ),
            slice_("slice-4", NODE_1, POOL_1, DRIVER_B, count=2, counter_sets=[counters(CS2, d="1")]),
        ],
        {"classes": [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]},
        None,
        id="partitionable-devices-counter-cache-not-crossed-between-driver-schemas",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                constraints=[{"matchAttribute": f"{DRIVER_A}/stringAttribute"}],
            )
        ],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"stringAttribute": "red"}, counters=[counters(CS1, c="1")]),
                device("device-2", None, {"stringAttribute": "blue"}, counters=[counters(CS1, c="1")]),
                device("device-3", None, {"stringAttribute": "blue"}, counters=[counters(CS1, c="1")]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, c="2")]),
        ],
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-constraint-releases-counter",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 1),
                first_available(
                    "req-1",
                    sub_request("subReq-0", CLASS_A, 1, AT_LEAST_6GI),
                    sub_request("subReq-1", CLASS_A, 1, AT_LEAST_4GI),
                ),
            )
        ],
        THREE_FROM_8GI,
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-prioritized-list",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1))],
        THREE_FROM_8GI,
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-1", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-multiple-devices",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 1),
                first_available(
                    "req-1",
                    sub_request("subReq-0", CLASS_A, 1, AT_LEAST_6GI),
                    sub_request("subReq-1", CLASS_A, 1, AT_LEAST_4GI),
                ),
            )
        ],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi"), counters(CS2, cpus="4")]
                ),
                device(
                    "device-2", FROM_COUNTERS, counters=[counters(CS1, memory="6Gi"), counters(CS2, cpus="6")]
                ),
                device(
                    "device-3", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi"), counters(CS2, cpus="4")]
                ),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, memory="18Gi"), counters(CS2, cpus="8")],
            ),
        ],
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-multiple-capacity-pools",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi", cpus="6"), counters(CS2, cpus="4", memory="2Gi")],
                ),
                device(
                    "device-2",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="6Gi", cpus="4"), counters(CS2, cpus="6", memory="6Gi")],
                ),
                device(
                    "device-3",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi", cpus="4"), counters(CS2, cpus="4", memory="4Gi")],
                ),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[
                    counters(CS1, cpus="8", memory="18Gi"),
                    counters(CS2, cpus="12", memory="18Gi"),
                ],
            ),
        ],
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-1", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-multiple-counters",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[counters(CS1, cpus="6", memory="4Gi")]),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, cpus="4", memory="6Gi")]),
                device("device-3", FROM_COUNTERS, counters=[counters(CS1, cpus="4", memory="4Gi")]),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, cpus="8", memory="18Gi")],
            ),
            slice_(
                "slice-3",
                NODE_1,
                POOL_2,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[counters(CS1, cpus="6", memory="4Gi")]),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, cpus="1", memory="7Gi")]),
                device("device-3", FROM_COUNTERS, counters=[counters(CS1, cpus="1", memory="7Gi")]),
                count=2,
            ),
            slice_(
                "slice-4",
                NODE_1,
                POOL_2,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, cpus="8", memory="18Gi")],
            ),
        ],
        {
            "allocated": [
                (DRIVER_A, POOL_1, "device-2"),
                (DRIVER_A, POOL_1, "device-3"),
                (DRIVER_A, POOL_2, "device-1"),
            ]
        },
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_2, "device-2"),
                result("req-1", DRIVER_A, POOL_2, "device-3"),
            )
        ],
        id="partitionable-devices-multiple-pools",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 2))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, memory="5Gi")]),
                device("device-2", counters=[counters(CS1, memory="4Gi")]),
                device("device-3", counters=[counters(CS1, memory="4Gi")]),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, memory="8Gi", unused="1Gi")],
            ),
        ],
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
            )
        ],
        id="partitionable-devices-unused-counters-in-counter-set",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")]),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="16Gi")]),
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, counter_sets=[counters(CS1, memory="18Gi")]),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-2")]},
        None,
        id="partitionable-devices-no-capacity-available",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")]),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="20Gi")]),
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, counter_sets=[counters(CS1, memory="18Gi")]),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-2")]},
        None,
        id="partitionable-devices-overallocated-capacity-pool",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, memory="4Gi")]),
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, counter_sets=[counters(CS1, memory="18Gi")]),
        ],
        {"features": OFF},
        None,
        id="partitionable-devices-disabled-device-consumes-counters",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, memory="4Gi")]),
                device("device-2"),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="18Gi")]),
        ],
        {"features": OFF},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-2"))],
        id="partitionable-devices-disabled-other-device-do-not-consume-counters",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [slice_("slice-1", PER_DEVICE, POOL_1, DRIVER_A, device("device-2", node=NODE_1))],
        {"features": OFF},
        None,
        id="partitionable-devices-disabled-per-device-node-selection",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    "req-0",
                    sub_request("subReq-0", CLASS_A, 1, AT_LEAST_6GI),
                    sub_request("subReq-1", CLASS_A, 1, AT_LEAST_4GI),
                ),
            )
        ],
        [
            slice_(
                "slice-1",
                PER_DEVICE,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")], node=NODE_1),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="6Gi")], node=NODE_2),
                count=2,
            ),
            slice_(
                "slice-2", PER_DEVICE, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="18Gi")]
            ),
        ],
        {},
        [allocation(local(NODE_1), result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="partitionable-devices-per-device-node-selection-nodename",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                PER_DEVICE,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    node=region_selector(REGION_1),
                ),
                count=2,
            ),
            slice_(
                "slice-2", PER_DEVICE, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="18Gi")]
            ),
        ],
        {},
        [allocation(region_selector(REGION_1), result("req-0", DRIVER_A, POOL_1, "device-1"))],
        id="partitionable-devices-per-device-node-selection-node-selector",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 3), request("req-1", CLASS_B, 3))],
        [
            slice_(
                "slice-1",
                PER_DEVICE,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    node=region_selector(REGION_1),
                ),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")], node=NODE_1),
                device("device-3", FROM_COUNTERS, counters=[counters(CS1, memory="4Gi")], node=ALL_NODES),
                count=2,
            ),
            slice_(
                "slice-2", PER_DEVICE, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="18Gi")]
            ),
            slice_(
                "slice-3",
                NODE_1,
                POOL_2,
                DRIVER_B,
                device("device-1", FROM_COUNTERS, counters=[counters(CS2, memory="4Gi")]),
                device("device-2", FROM_COUNTERS, counters=[counters(CS2, memory="4Gi")]),
                device("device-3", FROM_COUNTERS, counters=[counters(CS2, memory="4Gi")]),
                count=2,
            ),
            slice_("slice-4", NODE_1, POOL_2, DRIVER_B, count=2, counter_sets=[counters(CS2, memory="12Gi")]),
        ],
        {"classes": [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1"),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
                result("req-1", DRIVER_B, POOL_2, "device-1"),
                result("req-1", DRIVER_B, POOL_2, "device-2"),
                result("req-1", DRIVER_B, POOL_2, "device-3"),
            )
        ],
        id="partitionable-devices-per-device-node-selection-node-selector-multiple-devices",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                request("req-1", CLASS_A, 1, f'device.attributes["{DRIVER_A}"].special'),
            )
        ],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    None,
                    {"special": True},
                    counters=[counters(CS1, cpu1="1"), counters(CS2, mem="10Gi")],
                ),
                device(
                    "device-2",
                    None,
                    {"special": False},
                    counters=[counters(CS1, cpu2="1"), counters(CS2, mem="10Gi")],
                ),
                device(
                    "device-3",
                    None,
                    {"special": False},
                    counters=[counters(CS1, cpu3="1"), counters(CS2, mem="10Gi")],
                ),
                count=2,
            ),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                count=2,
                counter_sets=[counters(CS1, cpu1="1", cpu2="1", cpu3="1"), counters(CS2, mem="30Gi")],
            ),
        ],
        {},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3"),
                result("req-1", DRIVER_A, POOL_1, "device-1"),
            )
        ],
        id="partitionable-devices-with-attribute-selector",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[counters(CS1, c="1")], taints=[NO_SCHEDULE]),
                device("device-2", counters=[counters(CS1, c="1")]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, c="1")]),
        ],
        {},
        [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "device-2"))],
        id="partitionable-devices-taint-releases-counter",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 1))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    binding=(["IsPrepare"], ["BindingFailed"]),
                ),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="8Gi")]),
        ],
        {"binding_conditions": True},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", binding=(["IsPrepare"], ["BindingFailed"])),
            )
        ],
        id="partitionable-devices-with-binding-conditions",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 2))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    binding=(["IsPrepare"], ["BindingFailed"]),
                ),
                device(
                    "device-2",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    binding=(["IsPrepare2"], ["BindingFailed2"]),
                ),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="8Gi")]),
        ],
        {"binding_conditions": True},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", binding=(["IsPrepare"], ["BindingFailed"])),
                result("req-0", DRIVER_A, POOL_1, "device-2", binding=(["IsPrepare2"], ["BindingFailed2"])),
            )
        ],
        id="partitionable-devices-with-binding-conditions-multiple",
    ),
    pytest.param(
        [claim("claim-0", request("req-0", CLASS_A, 3))],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="2Gi")],
                    binding=(["IsPrepare"], ["BindingFailed"]),
                ),
                device("device-2", FROM_COUNTERS, counters=[counters(CS1, memory="2Gi")]),
                device(
                    "device-3",
                    FROM_COUNTERS,
                    counters=[counters(CS1, memory="4Gi")],
                    binding=(["IsReady"], ["BindingTimeout"]),
                ),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, memory="8Gi")]),
        ],
        {"binding_conditions": True},
        [
            allocation(
                local(NODE_1),
                result("req-0", DRIVER_A, POOL_1, "device-1", binding=(["IsPrepare"], ["BindingFailed"])),
                result("req-0", DRIVER_A, POOL_1, "device-2"),
                result("req-0", DRIVER_A, POOL_1, "device-3", binding=(["IsReady"], ["BindingTimeout"])),
            )
        ],
        id="partitionable-devices-with-binding-conditions-some-devices-no-conditions",
    ),
]


@pytest.mark.parametrize(("claims", "slices", "options", "expected"), CASES)
def test_upstream_cases(
    claims: list[dict[str, Any]], slices: list[dict[str, Any]], options: dict[str, Any], expected: Any
) -> None:
    classes = options.pop("classes", CLASSES)
    features = options.pop("features", ON)
    assert allocate(claims, classes, slices, features=features, **options) == expected


# -- beyond upstream's table: what the pools and the search make of counters --------------------------------
def _parsed(*raws: dict[str, Any]) -> list[Any]:
    return [parse_resource_slice(raw) for raw in raws]


def test_counter_slice_of_another_node_completes_the_pool() -> None:
    """The counter sets may be published in a slice the node does not see (another node's name): the pool
    is complete once all its slices count, and the node's device consumes from them."""
    slices = [
        slice_("a-devices", NODE_1, POOL_1, DRIVER_A, device("d", counters=[counters(CS1, c="1")]), count=2),
        slice_("b-counters", NODE_2, POOL_1, DRIVER_A, count=2, counter_sets=[counters(CS1, c="1")]),
    ]
    found = allocate([claim("claim-0", request("req-0", CLASS_A))], CLASSES, slices, features=ON)
    assert found == [allocation(local(NODE_1), result("req-0", DRIVER_A, POOL_1, "d"))]
    pools = gather_pools(_parsed(slices[0]), {}, NODE_1, True, _parsed(*slices))
    assert [(p.incomplete, p.counter_sets) for p in pools] == [(False, {CS1: {"c": 1}})]


def test_pool_missing_a_slice_is_incomplete_and_never_allocated_from() -> None:
    slices = [slice_("a", NODE_1, POOL_1, DRIVER_A, device("d"), count=2)]
    assert allocate([claim("claim-0", request("req-0", CLASS_A))], CLASSES, slices, features=ON) is None


def test_newer_generation_elsewhere_makes_the_pool_obsolete() -> None:
    """A pool the node sees only an older generation of, while another node's slice has a newer one, is
    left out (``checkSlicesInPool``)."""
    slices = _parsed(
        slice_("a", NODE_1, POOL_1, DRIVER_A, device("d"), count=2),
        slice_("b", NODE_2, POOL_1, DRIVER_A, device("e"), count=2, generation=2),
    )
    assert gather_pools(slices[:1], {}, NODE_1, True, slices) == []


@pytest.mark.parametrize(
    ("devices", "sets", "reason"),
    [
        pytest.param(
            [device("d", counters=[counters("missing", c="1")])],
            [counters(CS1, c="1")],
            "counter set missing not found",
            id="unknown-set",
        ),
        pytest.param(
            [device("d", counters=[counters(CS1, other="1")])],
            [counters(CS1, c="1")],
            f"counter other not found in counter set {CS1}",
            id="unknown-counter",
        ),
        pytest.param(
            [device("d")],
            [counters(CS1, c="1"), counters(CS1, c="2")],
            f"duplicate counter set name {CS1}",
            id="duplicate-set",
        ),
    ],
)
def test_invalid_counter_pools(devices: list[dict[str, Any]], sets: list[Any], reason: str) -> None:
    slices = _parsed(
        slice_("a", NODE_1, POOL_1, DRIVER_A, *devices, count=2),
        slice_("b", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=sets),
    )
    (pool,) = gather_pools(slices, {}, NODE_1, True, slices)
    assert pool.invalid == reason


def test_pools_and_slices_come_sorted_by_name() -> None:
    """First fit in v1.37.2's order: pools by driver and name, a pool's slices by name, whatever the
    listing order."""
    slices = [
        slice_("z", NODE_1, POOL_2, DRIVER_A, device("p2-z")),
        slice_("y", NODE_1, POOL_1, DRIVER_A, device("p1-y"), count=2),
        slice_("x", NODE_1, POOL_1, DRIVER_A, device("p1-x"), count=2),
    ]
    found = allocate([claim("claim-0", request("req-0", CLASS_A, 3))], CLASSES, slices, features=ON)
    assert found is not None
    assert [r["device"] for r in found[0]["devices"]["results"]] == ["p1-x", "p1-y", "p2-z"]


def test_per_device_selection_follows_the_node_labels() -> None:
    slices = [
        slice_("s", PER_DEVICE, POOL_1, DRIVER_A, device("east", node=region_selector(REGION_2))),
    ]
    claims = [claim("claim-0", request("req-0", CLASS_A))]
    assert allocate(claims, CLASSES, slices, features=ON, labels=node_labels(REGION_1)) is None
    found = allocate(claims, CLASSES, slices, features=ON, labels={REGION_KEY: REGION_2})
    assert found == [allocation(region_selector(REGION_2), result("req-0", DRIVER_A, POOL_1, "east"))]
