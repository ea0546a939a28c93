"""Upstream's structured-allocator table (``allocatortesting/allocator_testing.go`` at
dynamic-resource-allocation v0.37.2), the cases no other module ports (part two:
``test_dynamic_resources_upstream_table_2``): each keeps upstream's name, objects
and expected results or error text, and runs through the full search, the short way (``greedy``) and the
one-request way (``one_request``), which must agree. The features are kube-scheduler v1.37.2's defaults
unless the case turns one off as upstream does.

Adapted only where the objects differ: upstream's claims have no namespace, so its ``claim claim-0`` is
``claim default/claim-0`` here; upstream compares results in any order, here in the allocator's order.

Skipped, because kopf-scheduler does not implement the feature (alpha in v1.37.2, off by default):
``compatibility-groups-*`` (DRADeviceCompatibilityGroups), ``list-attributes-*`` and ``numanode-*``
(DRAListTypeAttributes), ``derived-attributes*`` (DRADerivedAttributes), ``optional-node-operations*``
(DRAOptionalNodeOperations). Skipped because the gate is locked on in v1.37.2, so its off state never
runs: ``admin-access-disabled`` (DRAAdminAccess), ``prioritized-list-disabled`` (DRAPrioritizedList).
Left out: ``with-distinct-constraints-unknown-type-attribute``, whose device has an attribute with no
value: the API server refuses such a slice, and so does the slice parser here, so the allocator never sees
one (upstream's allocator, given it unvalidated, fails with ``unsupported attribute value``). Upstream's
counts of search steps (``expectNumAllocateOneInvocations``) are not compared.
"""

from __future__ import annotations

from typing import Any

import pytest
from _dra_upstream_kit import (
    ALL_NODES,
    CLASS_A,
    CLASS_B,
    DRIVER_A,
    DRIVER_B,
    NODE_1,
    NODE_2,
    POOL_1,
    POOL_2,
    REGION_1,
    REGION_2,
    REGION_KEY,
    allocation,
    claim,
    device,
    device_class,
    first_available,
    local,
    region_selector,
    request,
    result,
    slice_,
    sub_request,
)
from _dra_upstream_table import (
    BIG,
    BOOL,
    CANNOT_ADD_DEVICE_2,
    CLASSES_A,
    CLASSES_AB,
    CS1,
    EARTH,
    L1,
    NUMA,
    PLANET_KEY,
    POOL_3,
    POOL_4,
    REQ_0,
    REQ_1,
    REQ_2,
    STRING,
    SUB_0,
    SUB_1,
    VERSION,
    Error,
    admin,
    admin_result,
    all_of,
    at_least,
    attrs,
    check,
    class_with_config,
    configured,
    label_selector,
    many,
    match,
    memory,
    one,
    opaque,
    run,
    with_configs,
    with_selectors,
)

CASES: list[Any] = [
    pytest.param([], [], [], {}, [], id="empty"),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="simple",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_B), one("slice-2", NODE_2, POOL_2, DRIVER_A)],
        {"node": NODE_2, "region": REGION_2},
        [allocation(local(NODE_2), result(REQ_0, DRIVER_A, POOL_2, "device-1"))],
        id="other-node",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 1, at_least("1Gi")),
                request(REQ_1, CLASS_A, 1, at_least("2Gi")),
            )
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", memory("1Gi")),
                device("device-2", memory("2Gi")),
            )
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_1, DRIVER_A, POOL_1, "device-2")
            )
        ],
        id="small-and-large",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 1, at_least("1Gi")),
                request(REQ_1, CLASS_A, 1, at_least("2Gi")),
            )
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-2", memory("2Gi")),
                device("device-1", memory("1Gi")),
            )
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_1, DRIVER_A, POOL_1, "device-2")
            )
        ],
        id="small-and-large-backtrack-requests",
    ),
    pytest.param(
        [
            claim("claim-0", request(REQ_0, CLASS_A, 1, at_least("1Gi"))),
            claim("claim-1", request(REQ_1, CLASS_A, 1, at_least("2Gi"))),
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-2", memory("2Gi")),
                device("device-1", memory("1Gi")),
            )
        ],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1")),
            allocation(L1, result(REQ_1, DRIVER_A, POOL_1, "device-2")),
        ],
        id="small-and-large-backtrack-claims",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 2))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-2", NODE_1, POOL_2, DRIVER_A)],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_0, DRIVER_A, POOL_2, "device-1")
            )
        ],
        id="devices-split-across-different-slices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_("slice-1-obsolete", NODE_1, POOL_1, DRIVER_A, device("device-1"), count=2),
            slice_("slice-1-obsolete", NODE_1, POOL_1, DRIVER_A, device("device-2"), count=2, generation=2),
        ],
        {},
        None,
        id="obsolete-slice",
    ),
    pytest.param([claim("claim-0", request(REQ_0, CLASS_A))], CLASSES_A, [], {}, None, id="no-slices"),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A)), claim("claim-0", request(REQ_1, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        None,
        id="not-enough-suitable-devices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        [],
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("could not retrieve device class class-a"),
        id="no-classes",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, "unknown-class"))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("could not retrieve device class unknown-class"),
        id="unknown-class",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, ""))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("claim default/claim-0, request req-0: missing device class name (unsupported request type?)"),
        id="empty-class",
    ),
    pytest.param(
        [], CLASSES_A, [one("slice-1", NODE_1, POOL_1, DRIVER_A)], {}, [], id="no-claims-to-allocate"
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="all-devices-single",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", counters=[(CS1, memory("4Gi"))]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[(CS1, memory("8Gi"))]),
        ],
        {},
        [allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="all-devices-with-consumed-counters",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-1", NODE_1, POOL_2, DRIVER_A)],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_0, DRIVER_A, POOL_2, "device-1")
            )
        ],
        id="all-devices-many",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A, count=2)],
        {},
        Error(
            "claim default/claim-0, request req-0: asks for all devices, "
            "but resource pool driver-a/pool-1 is currently being updated"
        ),
        id="all-devices-of-the-incomplete-pool",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A)), claim("claim-1", request(REQ_0, CLASS_B))],
        CLASSES_AB,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-1", NODE_1, POOL_1, DRIVER_B)],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1")),
            allocation(L1, result(REQ_0, DRIVER_B, POOL_1, "device-1")),
        ],
        id="all-devices-plus-another",
    ),
    pytest.param(
        [claim("claim-1", request(REQ_0, CLASS_B)), claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_AB,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-1", NODE_1, POOL_1, DRIVER_B)],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_B, POOL_1, "device-1")),
            allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1")),
        ],
        id="all-devices-plus-another-reversed",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A)), claim("claim-1", request(REQ_0, CLASS_B))],
        CLASSES_AB,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2")),
            one("slice-1", NODE_1, POOL_1, DRIVER_B),
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_0, DRIVER_A, POOL_1, "device-2")
            ),
            allocation(L1, result(REQ_0, DRIVER_B, POOL_1, "device-1")),
        ],
        id="all-devices-many-plus-another",
    ),
    pytest.param(
        [claim("claim-1", request(REQ_0, CLASS_B)), claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_AB,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2")),
            one("slice-1", NODE_1, POOL_1, DRIVER_B),
        ],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_B, POOL_1, "device-1")),
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_0, DRIVER_A, POOL_1, "device-2")
            ),
        ],
        id="all-devices-many-plus-another-reversed",
    ),
    pytest.param(
        [claim("claim-1", request(REQ_0, CLASS_A)), claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        None,
        id="all-devices-no-solution",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A)), claim("claim-1", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        None,
        id="all-devices-no-solution-reversed",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        None,
        id="all-devices-slice-without-devices",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))], CLASSES_A, [], {}, None, id="all-devices-no-slices"
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        None,
        id="all-devices-some-allocated",
    ),
    pytest.param(
        [claim("claim-0", admin(all_of(REQ_0, CLASS_A)))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        [
            allocation(
                L1,
                admin_result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                admin_result(REQ_0, DRIVER_A, POOL_1, "device-2"),
            )
        ],
        id="all-devices-some-allocated-admin-access",
    ),
    pytest.param(
        [claim("claim-0", admin(request(REQ_0, CLASS_A)), admin(all_of(REQ_1, CLASS_A)))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {},
        None,
        id="all-devices-some-allocating-admin-access",
    ),
    pytest.param(
        [claim("claim-0", admin(request(REQ_0, CLASS_A, 2)))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        [
            allocation(
                L1,
                admin_result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                admin_result(REQ_0, DRIVER_A, POOL_1, "device-2"),
            )
        ],
        id="count-devices-some-allocated-admin-access",
    ),
    pytest.param(
        [claim("claim-0", admin(request(REQ_0, CLASS_A))), claim("claim-1", admin(request(REQ_0, CLASS_A)))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {},
        [
            allocation(L1, admin_result(REQ_0, DRIVER_A, POOL_1, "device-1")),
            allocation(L1, admin_result(REQ_0, DRIVER_A, POOL_1, "device-1")),
        ],
        id="separate-claims-share-device-admin-access",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A)), claim("claim-1", admin(request(REQ_0, CLASS_A)))],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1")),
            allocation(L1, admin_result(REQ_0, DRIVER_A, POOL_1, "device-1")),
        ],
        id="admin-access-claims-device-allocating-for-non-admin-access",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_B)),
            )
        ],
        CLASSES_AB,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-2", NODE_1, POOL_2, DRIVER_B)],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_B, POOL_2, "device-1"))],
        id="all-devices-slice-without-devices-prioritized-list",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_B)),
            )
        ],
        CLASSES_AB,
        [one("slice-2", NODE_1, POOL_2, DRIVER_B)],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_B, POOL_2, "device-1"))],
        id="all-devices-no-slices-prioritized-list",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_B)),
            )
        ],
        CLASSES_AB,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2")),
            one("slice-2", NODE_1, POOL_2, DRIVER_B),
        ],
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        [allocation(L1, result("req-0/subReq-1", DRIVER_B, POOL_2, "device-1"))],
        id="all-devices-some-allocated-prioritized-list",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A)],
        {},
        [allocation(region_selector(REGION_1), result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="network-attached-device",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A)],
        {"node": NODE_2, "region": REGION_2},
        None,
        id="unsuccessful-allocation-network-attached-device",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 4))],
        CLASSES_A,
        [
            one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A),
            one("slice-1", ALL_NODES, POOL_2, DRIVER_A),
            one("slice-1", label_selector(PLANET_KEY, EARTH), POOL_3, DRIVER_A),
            one("slice-1", L1, POOL_4, DRIVER_A),
        ],
        {},
        [
            allocation(
                {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": REGION_KEY, "operator": "In", "values": [REGION_1]},
                                {"key": PLANET_KEY, "operator": "In", "values": [EARTH]},
                            ],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_1]}],
                        }
                    ]
                },
                *(result(REQ_0, DRIVER_A, p, "device-1") for p in (POOL_1, POOL_2, POOL_3, POOL_4)),
            )
        ],
        id="many-network-attached-devices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 2))],
        CLASSES_A,
        [
            one("slice-1", region_selector(REGION_1), POOL_1, DRIVER_A),
            one("slice-1", NODE_1, POOL_2, DRIVER_A),
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_0, DRIVER_A, POOL_2, "device-1")
            )
        ],
        id="local-and-network-attached-devices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A)), claim("claim-0", request(REQ_0, CLASS_B))],
        CLASSES_AB,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2")),
            one("slice-1", NODE_1, POOL_1, DRIVER_B),
        ],
        {},
        [
            allocation(L1, result(REQ_0, DRIVER_A, POOL_1, "device-1")),
            allocation(L1, result(REQ_0, DRIVER_B, POOL_1, "device-1")),
        ],
        id="several-different-drivers",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {"allocated": [(DRIVER_A, POOL_1, "device-1"), (DRIVER_A, POOL_1, "device-2")]},
        None,
        id="already-allocated-devices",
    ),
    pytest.param(
        [claim("claim-0", admin(request(REQ_0, CLASS_A)))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {"allocated": [(DRIVER_A, POOL_1, "device-1"), (DRIVER_A, POOL_1, "device-2")]},
        [allocation(L1, admin_result(REQ_0, DRIVER_A, POOL_1, "device-1"))],
        id="admin-access-enabled",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A),
                request(REQ_1, CLASS_A),
                constraints=[match(NUMA), match(VERSION), match(STRING), match(BOOL)],
            )
        ],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                *(
                    device(
                        d,
                        None,
                        attrs("1.0.0", numa=1, stringAttribute="stringAttributeValue", boolAttribute=True),
                    )
                    for d in ("device-1", "device-2")
                ),
            )
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_1, DRIVER_A, POOL_1, "device-2")
            )
        ],
        id="with-constraint",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A), constraints=[match(f"{DRIVER_A}/NonExistentAttribute")])],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        None,
        id="with-constraint-non-existent-attribute",
    ),
    *(
        pytest.param(
            [claim("claim-0", request(REQ_0, CLASS_A, 2), constraints=[match(attribute)])],
            CLASSES_AB,
            [
                slice_(
                    "slice-1",
                    NODE_1,
                    POOL_1,
                    DRIVER_A,
                    device("device-1", None, a1),
                    device("device-2", None, a2),
                )
            ],
            {},
            None,
            id=f"with-constraint-not-matching-{kind}-attribute",
        )
        for kind, attribute, a1, a2 in [
            ("int", NUMA, {"numa": 1}, {"numa": 2}),
            (
                "string",
                STRING,
                {"stringAttribute": "stringAttributeValue"},
                {"stringAttribute": "stringAttributeValue2"},
            ),
            ("bool", BOOL, {"boolAttribute": True}, {"boolAttribute": False}),
            ("version", VERSION, attrs("1.0.0"), attrs("2.0.0")),
        ]
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A), constraints=[match(NUMA)])],
        CLASSES_AB,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"numa": 1}),
                device("device-2", None, {"numa": 2}),
            )
        ],
        {},
        Error(CANNOT_ADD_DEVICE_2),
        id="with-constraint-not-matching-int-attribute-all-devices",
    ),
    pytest.param(
        [claim("claim-0", all_of(REQ_0, CLASS_A), constraints=[match(NUMA)])],
        CLASSES_A,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, {"numa": 1}),
                device("device-2", None, {"numa": 2}, counters=[(CS1, {"c": "1"})]),
                count=2,
            ),
            slice_("slice-2", NODE_1, POOL_1, DRIVER_A, count=2, counter_sets=[(CS1, {"c": "1"})]),
        ],
        {},
        Error(CANNOT_ADD_DEVICE_2),
        id="partitionable-all-mode-constraint-must-error-with-reserved-counter",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A),
                request(REQ_1, CLASS_A),
                constraints=[match(VERSION, REQ_0)],
            )
        ],
        CLASSES_AB,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, attrs("1.0.0")),
                device("device-2", None, attrs("2.0.0")),
            )
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-1"), result(REQ_1, DRIVER_A, POOL_1, "device-2")
            )
        ],
        id="with-constraint-for-request",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A),
                request(REQ_1, CLASS_A),
                constraints=[match(VERSION, REQ_0), match(STRING)],
            )
        ],
        CLASSES_AB,
        [
            slice_(
                "slice-1",
                NODE_1,
                POOL_1,
                DRIVER_A,
                device("device-1", None, attrs("1.0.0", stringAttribute="a")),
                device("device-2", None, attrs("2.0.0", stringAttribute="b")),
                device("device-3", None, attrs("3.0.0", stringAttribute="b")),
            )
        ],
        {},
        [
            allocation(
                L1, result(REQ_0, DRIVER_A, POOL_1, "device-2"), result(REQ_1, DRIVER_A, POOL_1, "device-3")
            )
        ],
        id="with-constraint-for-request-retry",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        [class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [
            configured(
                L1,
                [result(REQ_0, DRIVER_A, POOL_1, "device-1")],
                ("FromClass", [], opaque(DRIVER_A, "classAttribute")),
            )
        ],
        id="with-class-device-config",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A), request(REQ_1, CLASS_A), request(REQ_2, CLASS_B))],
        [
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 2), one("slice-2", NODE_1, POOL_1, DRIVER_B)],
        {},
        [
            configured(
                L1,
                [
                    result(REQ_0, DRIVER_A, POOL_1, "device-0"),
                    result(REQ_1, DRIVER_A, POOL_1, "device-1"),
                    result(REQ_2, DRIVER_B, POOL_1, "device-1"),
                ],
                ("FromClass", [REQ_0, REQ_1], opaque(DRIVER_A, "classAttribute-A")),
                ("FromClass", [REQ_2], opaque(DRIVER_B, "classAttribute-B")),
            )
        ],
        id="with-class-device-config-with-multiple-request-and-configs",
    ),
    pytest.param(
        [
            with_configs(
                claim("claim-0", request(REQ_0, CLASS_A), request(REQ_1, CLASS_A), request(REQ_2, CLASS_A)),
                ([REQ_0, REQ_1], opaque(DRIVER_A, "deviceAttribute")),
            )
        ],
        CLASSES_A,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 3)],
        {},
        [
            configured(
                L1,
                [result(r, DRIVER_A, POOL_1, f"device-{i}") for i, r in enumerate((REQ_0, REQ_1, REQ_2))],
                ("FromClaim", [REQ_0, REQ_1], opaque(DRIVER_A, "deviceAttribute")),
            )
        ],
        id="with-claim-config-for-two-requests",
    ),
    pytest.param(
        [with_configs(claim("claim-0", request(REQ_0, CLASS_A)), ([], opaque(DRIVER_A, "deviceAttribute")))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [
            configured(
                L1,
                [result(REQ_0, DRIVER_A, POOL_1, "device-1")],
                ("FromClaim", [], opaque(DRIVER_A, "deviceAttribute")),
            )
        ],
        id="claim-with-device-config",
    ),
    pytest.param(
        [claim("claim-0", with_selectors(request(REQ_0, CLASS_A), ""))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("CEL expression empty (unsupported selector type?)"),
        id="unknown-selector",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                {"name": REQ_0, "exactly": {"deviceClassName": CLASS_A, "allocationMode": "future-mode"}},
            )
        ],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("unsupported count mode future-mode"),
        id="unknown-allocation-mode",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A), constraints=[{}])],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("empty constraint (unsupported constraint type?)"),
        id="unknown-constraint",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 1, "noSuchVar"))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("undeclared reference"),
        id="invalid-CEL-one-device",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A))],
        [{**device_class(CLASS_A, DRIVER_A), "spec": {"selectors": [{"cel": {"expression": "noSuchVar"}}]}}],
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("undeclared reference"),
        id="invalid-CEL-one-device-class",
    ),
    pytest.param(
        [claim("claim-0", with_selectors(all_of(REQ_0, CLASS_A), "noSuchVar"))],
        CLASSES_A,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        Error("undeclared reference"),
        id="invalid-CEL-all-devices",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 500))],
        CLASSES_A,
        [],
        {},
        Error("exceeds the claim limit"),
        id="too-many-devices-single-request",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 32))], CLASSES_A, [], {}, None, id="many-devices-okay"
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 32), request(REQ_1, CLASS_A))],
        CLASSES_A,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 33)],
        {},
        Error("exceeds the claim limit"),
        id="too-many-devices-total",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, BIG), request(REQ_1, CLASS_A, BIG))],
        CLASSES_A,
        [],
        {},
        Error("exceeds the claim limit"),
        id="exact-count-total-overflows-claim-limit",
    ),
    pytest.param(
        [claim("claim-0", *(request(r, CLASS_A, BIG) for r in (REQ_0, REQ_1, REQ_2, "req-3")))],
        CLASSES_A,
        [],
        {},
        Error("exceeds the claim limit"),
        id="exact-count-total-would-wrap-to-zero",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 16), request(REQ_1, CLASS_A, 16))],
        CLASSES_A,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 32)],
        {},
        [
            allocation(
                L1, *(result(REQ_0 if i < 16 else REQ_1, DRIVER_A, POOL_1, f"device-{i}") for i in range(32))
            )
        ],
        id="exact-count-sum-exactly-fills-claim-limit",
    ),
    pytest.param(
        [claim("claim-0", request(REQ_0, CLASS_A, 500))],
        CLASSES_A,
        [],
        {},
        Error("exceeds the claim limit"),
        id="all-devices-invalid-CEL",
    ),
    pytest.param(
        [claim("claim-0", first_available(REQ_0, sub_request(SUB_0, CLASS_B), sub_request(SUB_1, CLASS_A)))],
        CLASSES_AB,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="prioritized-list-first-unavailable",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_B, 2), sub_request(SUB_1, CLASS_A, 2)),
            )
        ],
        CLASSES_AB,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A), one("slice-2", NODE_1, POOL_2, DRIVER_B)],
        {},
        None,
        id="prioritized-list-non-available",
    ),
    pytest.param(
        [
            with_configs(
                claim(
                    "claim-0",
                    first_available(REQ_0, sub_request(SUB_0, CLASS_A), sub_request(SUB_1, CLASS_B, 2)),
                ),
                (["req-0/subReq-0"], opaque(DRIVER_A, "foo")),
                (["req-0/subReq-1"], opaque(DRIVER_B, "bar")),
            )
        ],
        CLASSES_AB,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_B, device("device-1"), device("device-2"))],
        {},
        [
            configured(
                L1,
                [result("req-0/subReq-1", DRIVER_B, POOL_1, d) for d in ("device-1", "device-2")],
                ("FromClaim", [], opaque(DRIVER_B, "bar")),
            )
        ],
        id="prioritized-list-device-config",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_A, 2), sub_request(SUB_1, CLASS_B, 2)),
            )
        ],
        [class_with_config(CLASS_A, DRIVER_A, "foo"), class_with_config(CLASS_B, DRIVER_B, "bar")],
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_B, device("device-1"), device("device-2")),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, device("device-3")),
        ],
        {},
        [
            configured(
                L1,
                [result("req-0/subReq-1", DRIVER_B, POOL_1, d) for d in ("device-1", "device-2")],
                ("FromClass", [], opaque(DRIVER_B, "bar")),
            )
        ],
        id="prioritized-list-class-config",
    ),
    pytest.param(
        [
            with_configs(
                claim(
                    "claim-0",
                    first_available(REQ_0, sub_request(SUB_0, CLASS_A), sub_request(SUB_1, CLASS_B)),
                    request(REQ_1, CLASS_A),
                ),
                (["req-0/subReq-0", "req-0/subReq-1"], opaque(DRIVER_A, "scoped")),
            )
        ],
        CLASSES_AB,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 2)],
        {},
        [
            configured(
                L1,
                [
                    result("req-0/subReq-0", DRIVER_A, POOL_1, "device-0"),
                    result(REQ_1, DRIVER_A, POOL_1, "device-1"),
                ],
                ("FromClaim", ["req-0/subReq-0", "req-0/subReq-1"], opaque(DRIVER_A, "scoped")),
            )
        ],
        id="claim-config-scoped-to-subrequests-of-one-request",
    ),
    pytest.param(
        [
            with_configs(
                claim(
                    "claim-0",
                    first_available(REQ_0, sub_request(SUB_0, CLASS_A), sub_request(SUB_1, CLASS_B)),
                    request(REQ_1, CLASS_A),
                ),
                (["req-0/subReq-0", REQ_1], opaque(DRIVER_A, "all")),
            )
        ],
        CLASSES_AB,
        [many("slice-1", NODE_1, POOL_1, DRIVER_A, 2)],
        {},
        [
            configured(
                L1,
                [
                    result("req-0/subReq-0", DRIVER_A, POOL_1, "device-0"),
                    result(REQ_1, DRIVER_A, POOL_1, "device-1"),
                ],
                ("FromClaim", [], opaque(DRIVER_A, "all")),
            )
        ],
        id="claim-config-covering-all-requests-is-cleared",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 1, at_least("1Gi")),
                first_available(
                    REQ_1,
                    sub_request(SUB_0, CLASS_A, 1, at_least("4Gi")),
                    sub_request(SUB_1, CLASS_A, 2, at_least("2Gi")),
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
                device("device-1", memory("2Gi")),
                device("device-2", memory("2Gi")),
                device("device-3", memory("1Gi")),
            )
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-3"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-2"),
            )
        ],
        id="prioritized-list-subrequests-with-expressions",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 1, at_least("8Gi")),
                first_available(
                    REQ_1,
                    sub_request(SUB_0, CLASS_A, 1, at_least("2Gi")),
                    sub_request(SUB_1, CLASS_A, 1, at_least("1Gi")),
                ),
                constraints=[match(VERSION, REQ_0, REQ_1)],
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", memory("8Gi"), attrs("1.0.0"))),
            slice_(
                "slice-2",
                NODE_1,
                POOL_2,
                DRIVER_A,
                device("device-2", memory("2Gi"), attrs("2.0.0")),
                device("device-3", memory("1Gi"), attrs("1.0.0")),
            ),
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_2, "device-3"),
            )
        ],
        id="prioritized-list-subrequests-with-constraints-ref-parent-request",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 1, at_least("8Gi")),
                first_available(
                    REQ_1,
                    sub_request(SUB_0, CLASS_A, 1, at_least("2Gi")),
                    sub_request(SUB_1, CLASS_A, 1, at_least("1Gi")),
                ),
                constraints=[match(VERSION, REQ_0, "req-1/subReq-0")],
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", memory("8Gi"), attrs("1.0.0"))),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, device("device-2", memory("2Gi"), attrs("2.0.0"))),
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_2, "device-2"),
            )
        ],
        id="prioritized-list-subrequests-with-constraints-ref-sub-request",
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
        {"allocated": [(DRIVER_A, POOL_1, "device-1")]},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-2"))],
        id="prioritized-list-subrequests-with-allocation-mode-all",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A),
                first_available(REQ_1, sub_request(SUB_0, CLASS_A, mode="All"), sub_request(SUB_1, CLASS_A)),
            )
        ],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-2"),
            )
        ],
        id="prioritized-list-allocation-mode-all-multiple-requests",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_1, CLASS_A, 1, at_least("8Gi")),
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 1, at_least("8Gi")),
                    sub_request(SUB_1, CLASS_A, 1, at_least("4Gi")),
                ),
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", memory("8Gi"))),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, device("device-2", memory("4Gi"))),
        ],
        {},
        [
            allocation(
                L1,
                result(REQ_1, DRIVER_A, POOL_1, "device-1"),
                result("req-0/subReq-1", DRIVER_A, POOL_2, "device-2"),
            )
        ],
        id="prioritized-list-multi-request",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(
                    REQ_0,
                    sub_request(SUB_0, CLASS_A, 1, at_least("8Gi")),
                    sub_request(SUB_1, CLASS_A, 1, at_least("4Gi")),
                ),
                request(REQ_1, CLASS_A, 1, at_least("8Gi")),
            )
        ],
        CLASSES_A,
        [
            slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1", memory("8Gi"))),
            slice_("slice-2", NODE_1, POOL_2, DRIVER_A, device("device-2", memory("4Gi"))),
        ],
        {},
        [
            allocation(
                L1,
                result("req-0/subReq-1", DRIVER_A, POOL_2, "device-2"),
                result(REQ_1, DRIVER_A, POOL_1, "device-1"),
            )
        ],
        id="prioritized-list-with-backtracking",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                first_available(REQ_0, sub_request(SUB_0, CLASS_B, 500), sub_request(SUB_1, CLASS_A)),
            )
        ],
        CLASSES_AB,
        [one("slice-1", NODE_1, POOL_1, DRIVER_A)],
        {},
        [allocation(L1, result("req-0/subReq-1", DRIVER_A, POOL_1, "device-1"))],
        id="prioritized-list-too-many-in-first-subrequest",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A, 20),
                first_available(REQ_1, sub_request(SUB_0, CLASS_A, 20), sub_request(SUB_1, CLASS_A, 24)),
            )
        ],
        CLASSES_A,
        [],
        {},
        Error("request req-1: adding 20 devices exceeds the claim limit"),
        id="prioritized-list-minimum-sum-exceeds-claim-limit",
    ),
    pytest.param(
        [
            claim(
                "claim-0",
                request(REQ_0, CLASS_A),
                first_available(
                    REQ_1, sub_request(SUB_0, CLASS_A, 9223372036854775807), sub_request(SUB_1, CLASS_A)
                ),
            )
        ],
        CLASSES_A,
        [slice_("slice-1", NODE_1, POOL_1, DRIVER_A, device("device-1"), device("device-2"))],
        {},
        [
            allocation(
                L1,
                result(REQ_0, DRIVER_A, POOL_1, "device-1"),
                result("req-1/subReq-1", DRIVER_A, POOL_1, "device-2"),
            )
        ],
        id="prioritized-list-overflowing-first-subrequest-is-pruned",
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
