"""Upstream's structured-allocator table, part two (``test_dynamic_resources_upstream_table`` says how the
cases run and which are skipped): ``All`` in prioritized lists, the claim limit across subrequests, binding
conditions, multi-host and partitionable pools, invalid pools, and the search's backtracking."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_upstream_kit import (
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    FROM_COUNTERS,
    NODE_1,
    NODE_2,
    POOL_1,
    POOL_2,
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
from _dra_upstream_table import (
    CLASSES_A,
    CLASSES_AB,
    CS1,
    CS2,
    EARTH,
    KEY1_NO_SCHEDULE,
    L1,
    PLANET_KEY,
    POOL_3,
    POOL_4,
    PREPARE,
    REQ_0,
    REQ_1,
    REQ_2,
    SELECTED,
    STRING,
    SUB_0,
    SUB_1,
    TOLERATE_KEY1,
    TYPE_X,
    TYPE_Y,
    V5,
    V6,
    Error,
    all_of,
    at_least,
    check,
    label_selector,
    many,
    match,
    memory,
    multi_class,
    policy_range,
    run,
    share,
    tolerating,
)

CASES: list[Any] = [
    pytest.param(
        [
            claim(
                "claim-0",
                request(
                    REQ_0,
                    CLASS_A,
                    1,
                    f'device.attributes["{DRIVER_A}"].stringAttribute == "cap"',
                    capacity={"capacity-0": "2"},
                ),
            ),
            claim(
                "claim-1",
                first_available(
                    REQ_0,
                    sub_request(
                        SUB_0,
                        CLASS_A,
                        1,
                        f'device.attributes["{DRIVER_A}"].stringAttribute == "cap"',
                        mode="All",
                        capacity={"capacity-0": "2"},
                    ),
                    sub_request(
                        SUB_1, CLASS_A, 1, f'device.attributes["{DRIVER_A}"].stringAttribute == "fb"'
                    ),
                ),
                constraints=[match(STRING)],
            ),
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", {"capacity-0": "2"}, {"stringAttribute": "cap"}, multiple=True),
                device("device-2", None, {"stringAttribute": "fb"}),
            )
        ],
        {},
        [
            allocation(L1, share(REQ_0, "device-1", "2")),
            allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-2")),
        ],
        id="consumable-capacity-rejection-rolls-back-constraints",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_A)),
            )
        ],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {"allocated": [(DRIVER_A, POOL_1, "device-2")]},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="prioritized-list-allocation-mode-all",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 0, V6, mode="All"),
                    sub_request(SUB_1, CLASS_A, 0, V5, mode="All"),
                ),
            )
        ],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", None, {"generation": "v5"}))],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="prioritized-list-allocation-mode-all-with-selectors",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 0, V6, mode="All"),
                    sub_request(SUB_1, CLASS_A, 0, V5, mode="All"),
                ),
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", None, {"generation": "v5"})),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, device("device-1", None, {"generation": "v5"})),
        ],
        {},
        [
            allocation(
                L1,
                result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"),
                result("req-0/subReq-1", DRIVER_A, POOL_2, "device-1"),
            )
        ],
        id="prioritized-list-allocation-mode-all-with-selectors-multiple-pools",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 0, V6, mode="All"),
                    sub_request(SUB_1, CLASS_A, 0, V5, mode="All"),
                ),
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", None, {"generation": "v5"})),
            slice_(
                "slice-2",
                NODE_2,
                POOL_2,
                DRIVER_A,
                device("device-1", None, {"generation": "v5"}),
                device("device-2", None, {"generation": "v6"}),
            ),
        ],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 0, V6, mode="All"),
                    sub_request(SUB_1, CLASS_A, 0, V5, mode="All"),
                ),
            )
        ],
        [
            {
                **device_class(CLASS_A, DRIVER_A),
                "spec": {
                    "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER_A}" && {SELECTED}'}}]
                },
            }
        ],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"generation": "v6", "selected": False}),
                device("device-2", None, {"generation": "v5", "selected": False}),
                device("device-3", None, {"generation": "v5", "selected": True}),
            )
        ],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-3"))],
        id="prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 32))],
        CLASSES_A,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 32)],
        {},
        [allocation(L1, *(result(REQ_0, DRIVER_A, POOL_1, f"device-{i}") for i in range(32)))],
        id="max-number-devices",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, 32), sub_request(SUB_1, CLASS_A, 16)),
                first_available(REQ_1, sub_request(SUB_0, CLASS_A, 32), sub_request(SUB_1, CLASS_A, 16)),
            )
        ],
        CLASSES_A,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 64)],
        {},
        [
            allocation(
                L1,
                *(
                    result("req-0/subReq-1" if i < 16 else "req-1/subReq-1", DRIVER_A, POOL_1, f"device-{i}")
                    for i in range(32)
                ),
            )
        ],
        id="prioritized-list-max-allocation-limit-request",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_A, 2)
                ),
                request(REQ_1, CLASS_B, 2),
            )
        ],
        CLASSES_AB,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 31), many("slice-2", NODE_1, POOL_2, DRIVER_B, 2)],
        {},
        [
            allocation(
                L1,
                result("req-0/subReq-1", DRIVER_A, POOL_1, "device-0"),
                result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"),
                result(REQ_1, DRIVER_B, POOL_2, "device-0"),
                result(REQ_1, DRIVER_B, POOL_2, "device-1"),
            )
        ],
        id="prioritized-list-max-allocation-allocation-mode-all",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", binding=PREPARE))],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1", binding=PREPARE))],
        id="device-binding-conditions",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 2), request(REQ_1, CLASS_A))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", binding=PREPARE),
                device("device-2", binding=(["IsPrepare2"], ["BindingFailed2"])),
                device("device-3", binding=(["IsPrepare3"], ["BindingFailed3"])),
            )
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1", binding=PREPARE),
                result(REQ_0, DRIVER_A, POOL_1, "device-2", binding=(["IsPrepare2"], ["BindingFailed2"])),
                result(REQ_1, DRIVER_A, POOL_1, "device-3", binding=(["IsPrepare3"], ["BindingFailed3"])),
            )
        ],
        id="binding-conditions-multiple-devices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A), request(REQ_1, CLASS_A))],
        CLASSES_A,
        [
            slice_(
                "slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2", binding=PREPARE)
            )
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                result(REQ_1, DRIVER_A, POOL_1, "device-2", binding=PREPARE),
            )
        ],
        id="binding-conditions-with-and-without",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", binding=PREPARE))],
        {"binding_conditions": False},
        None,
        id="binding-conditions-without-feature-gate",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                label_selector(PLANET_KEY, EARTH),
                POOL_1,
                DRIVER_A,
                {**device("device-1"), "bindsToNode": True},
            )
        ],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="node-restriction",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 2))],
        CLASSES_A,
        [
            slice_(
                "slice-4",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[(CS1, memory("4Gi"))], binding=PREPARE),
                count=4,
            ),
            slice_("slice-3", NODE_1, POOL_1, DRIVER_A, count=4, counter_sets=[(CS1, memory("8Gi"))]),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-2", FROM_COUNTERS, counters=[(CS2, memory("4Gi"))]),
                count=4,
            ),
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, count=4, counter_sets=[(CS2, memory("8Gi"))]),
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-2"),
                result(REQ_0, DRIVER_A, POOL_1, "device-1", binding=PREPARE),
            )
        ],
        id="partitionable-devices-with-binding-conditions-multi-slices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 2))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[(CS1, memory("4Gi"))],
                    binding=PREPARE,
                    taints=[KEY1_NO_SCHEDULE],
                ),
                device("device-2", FROM_COUNTERS, counters=[(CS1, memory("4Gi"))]),
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, counter_sets=[(CS1, memory("8Gi"))]),
        ],
        {},
        None,
        id="partitionable-devices-with-binding-conditions-and-taints",
    ),
    pytest.param(
        [tolerating(claim("claim-0", request(REQ_0, CLASS_A, 2)), TOLERATE_KEY1)],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    FROM_COUNTERS,
                    counters=[(CS1, memory("4Gi"))],
                    binding=PREPARE,
                    taints=[KEY1_NO_SCHEDULE],
                ),
                device("device-2", FROM_COUNTERS, counters=[(CS1, memory("4Gi"))]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[(CS1, memory("8Gi"))]),
        ],
        {},
        [
            allocation(
                L1,
                {
                    **result(REQ_0, DRIVER_A, POOL_1, "device-1", binding=PREPARE),
                    "tolerations": [TOLERATE_KEY1],
                },
                {**result(REQ_0, DRIVER_A, POOL_1, "device-2"), "tolerations": [TOLERATE_KEY1]},
            )
        ],
        id="partitionable-devices-with-binding-conditions-and-taints-tolerated",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, capacity={"capacity-0": "2"}),
                request(REQ_1, CLASS_A, capacity={"capacity-0": "2"}),
                constraints=[{"distinctAttribute": STRING}],
            )
        ],
        [multi_class(CLASS_A, DRIVER_A)],
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-1",
                    {"capacity-0": policy_range("4")},
                    {"stringAttribute": "stringAttributeValue1"},
                    multiple=True,
                ),
                count=2,
            ),
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device(
                    "device-2",
                    {"capacity-0": policy_range("4")},
                    {"stringAttribute": "stringAttributeValue2"},
                    multiple=True,
                ),
                count=2,
            ),
        ],
        {},
        [allocation(L1, share(REQ_0, "device-1", "2"), share(REQ_1, "device-2", "2"))],
        id="distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=2),
            slice_("slice-2", NODE_2, POOL_1, DRIVER_A, device("device-2"), count=2),
        ],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="allocation-mode-all-with-multi-host-resource-pool",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=2),
            slice_("slice-2", NODE_2, POOL_1, DRIVER_A, device("device-2"), count=2, generation=2),
        ],
        {},
        None,
        id="multi-host-resource-pool-with-stale-slice-for-current-node",
    ),
    *(
        pytest.param(
            [claim("claim-0", request(REQ_0, CLASS_A))],
            CLASSES_A,
            [
                slice_("slice-1", old, POOL_1, DRIVER_A, device("device-1"), count=2),
                slice_("slice-1", old, POOL_1, DRIVER_A, device("device-2"), count=2),
                slice_("slice-2", new, POOL_1, DRIVER_A, device("device-1"), count=2, generation=2),
                *(
                    [slice_("slice-2", new, POOL_1, DRIVER_A, device("device-2"), count=2, generation=2)]
                    * (kind == "complete")
                ),
            ],
            {},
            expected,
            id=f"multi-host-resource-pool-{kind}-update-from-{old}-to-{new}",
        )
        for old, new, kind, expected in [
            (NODE_1, NODE_2, "complete", [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))]),
            (NODE_2, NODE_1, "complete", [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))]),
            (NODE_1, NODE_2, "incomplete", [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))]),
            (NODE_2, NODE_1, "incomplete", None),
        ]
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=4),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=4, counter_sets=[(CS1, {})]),
            slice_("slice-3", NODE_1, POOL_1, DRIVER_A, device("device-2"), count=4),
            slice_("slice-4", NODE_1, POOL_1, DRIVER_A, count=4, counter_sets=[(CS1, {})]),
        ],
        {},
        Error("invalid resource pools were encountered", on_node=True),
        id="partitionable-devices-same-counter-set-name-in-different-resource-slices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", counters=[(CS2, {})]), count=2),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[(CS1, {})]),
        ],
        {},
        Error("invalid resource pools were encountered", on_node=True),
        id="partitionable-devices-device-counter-consumption-references-unknown-counter-set",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[(CS1, memory("8Gi"))]),
                count=2,
            ),
            slice_(
                "slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[(CS1, {"other-memory": "8Gi"})]
            ),
        ],
        {},
        Error("invalid resource pools were encountered", on_node=True),
        id="partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", counters=[(CS1, memory("8Gi"))])),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, counter_sets=[(CS1, memory("8Gi"))]),
        ],
        {},
        Error("invalid resource pools were encountered", on_node=True),
        id="partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 1, at_least("6Gi")),
                    sub_request(SUB_1, CLASS_A, 1, at_least("2Gi")),
                ),
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, count=3, counter_sets=[(CS1, memory("8Gi"))]),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[(CS1, memory("6Gi"))]),
                device("device-2", FROM_COUNTERS, counters=[(CS1, memory("2Gi"))]),
                count=3,
            ),
            slice_(
                "slice-3",
                NODE_2,
                POOL_1,
                DRIVER_A,
                device("device-3", counters=[(CS1, memory("6Gi"))]),
                count=3,
            ),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-3")]},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-2"))],
        id="partitionable-devices-devices-on-different-nodes-consume-same-counter-set",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, count=3, counter_sets=[(CS1, memory("8Gi"))]),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[(CS1, memory("6Gi"))]),
                count=3,
            ),
            slice_(
                "slice-3",
                NODE_2,
                POOL_1,
                DRIVER_A,
                device("device-2", FROM_COUNTERS, counters=[(CS1, memory("6Gi"))]),
                device("device-3", FROM_COUNTERS, counters=[(CS1, memory("2Gi"))]),
                count=3,
            ),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")], "node": NODE_2},
        [allocation(local(NODE_2), result(REQ_0, DRIVER_A, POOL_1, "device-3"))],
        id="partitionable-devices-devices-consume-counter-set-in-different-nodes",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, count=3, counter_sets=[(CS1, memory("8Gi"))]),
            slice_(
                "slice-2",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", FROM_COUNTERS, counters=[(CS1, memory("6Gi"))]),
                count=3,
            ),
            slice_(
                "slice-3",
                NODE_2,
                POOL_1,
                DRIVER_A,
                device("device-3", counters=[(CS2, memory("6Gi"))]),
                count=3,
            ),
        ],
        {},
        Error("invalid resource pools were encountered", on_node=True),
        id="partitionable-devices-validation-error-on-non-targeting-slice",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_2, POOL_1, DRIVER_A, device("device-1"), count=2),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, device("device-2"), count=2),
        ],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-2"))],
        id="different-resourceslices-in-pool-can-target-different-nodes",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=2)],
        {},
        None,
        id="no-allocation-from-incomplete-pools",
    ),
    *(
        pytest.param([claim("claim-0", request(REQ_0, CLASS_A, 5))], CLASSES_A, slices, {}, None, id=name)
        for name, slices in [
            (
                "check-combinations-within-single-request-single-pool-single-slice",
                [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, *(device(f"device-{i}") for i in range(1, 5)))],
            ),
            (
                "check-combinations-within-single-request-single-pool-multiple-slices",
                [
                    slice_(
                        "slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"), count=2
                    ),
                    slice_(
                        "slice-2", NODE_1, POOL_1, DRIVER_A, device("device-3"), device("device-4"), count=2
                    ),
                ],
            ),
            (
                "check-combinations-within-single-request-multiple-pools-multiple-slices",
                [
                    slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=2),
                    slice_("slice-2", NODE_1, POOL_1, DRIVER_A, device("device-2"), count=2),
                    slice_("slice-3", NODE_1, POOL_2, DRIVER_A, device("device-3"), device("device-4")),
                ],
            ),
            (
                "check-combinations-within-single-request-many-pools",
                [
                    slice_(f"slice-{i}", NODE_1, pool, DRIVER_A, device(f"device-{i}"))
                    for i, pool in enumerate((POOL_1, POOL_2, POOL_3, POOL_4), 1)
                ],
            ),
        ]
    ),
    pytest.param(
        [claim("claim-0", request(REQ_1, CLASS_A, 2), request(REQ_2, CLASS_A, 1, TYPE_X))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"type": "X"}),
                device("device-2", None, {"type": "Y"}),
                device("device-3", None, {"type": "Y"}),
            )
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_1, DRIVER_A, POOL_1, "device-2"),
                result(REQ_1, DRIVER_A, POOL_1, "device-3"),
                result(REQ_2, DRIVER_A, POOL_1, "device-1"),
            )
        ],
        id="check-combinations-with-backtracking",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_1, CLASS_A, 2), request(REQ_2, CLASS_A, 1, TYPE_X))],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", None, {"type": "X"}), count=2),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, device("device-2", None, {"type": "Y"}), count=2),
            slice_(
                "slice-3",
                NODE_1,
                POOL_2,
                DRIVER_A,
                device("device-3", None, {"type": "Y"}, binding=(["IsPrepare"], [])),
            ),
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_1, DRIVER_A, POOL_1, "device-2"),
                # upstream's empty bindingFailureConditions: left out of the API's JSON
                {**result(REQ_1, DRIVER_A, POOL_2, "device-3"), "bindingConditions": ["IsPrepare"]},
                result(REQ_2, DRIVER_A, POOL_1, "device-1"),
            )
        ],
        id="check-combinations-with-backtracking-across-slices-and-pools",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_1, sub_request(SUB_0, CLASS_A, 3, TYPE_Y), sub_request(SUB_1, CLASS_A, 2)
                ),
                first_available(
                    REQ_2, sub_request(SUB_0, CLASS_A, 2), sub_request(SUB_1, CLASS_A, 1, TYPE_X)
                ),
            )
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"type": "X"}),
                device("device-2", None, {"type": "Y"}),
                device("device-3", None, {"type": "Y"}),
            )
        ],
        {},
        [
            allocation(
                L1,
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-2"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-3"),
                result("req-2/subReq-1", DRIVER_A, POOL_1, "device-1"),
            )
        ],
        id="check-combinations-with-prioritized-list",
    ),
]


@pytest.mark.parametrize(("claims", "classes", "slices", "options", "expected"), CASES)
def test_upstream_case(
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]],
    slices: list[dict[str, Any]],
    options: dict[str, Any],
    expected: Any,
) -> None:
    check(run(claims, classes, slices, **options), expected)
