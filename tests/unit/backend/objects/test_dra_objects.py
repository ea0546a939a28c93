"""DRA objects as the stores keep them: the API server's defaults, typed attributes, and a wrong field
refused with its path."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest

from kopf_scheduler.framework.objects import ObjectParseError
from kopf_scheduler.framework.objects.dra import parse_device_class, parse_resource_claim
from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice


def test_claim_defaults_and_status() -> None:
    claim = parse_resource_claim(
        {
            "metadata": {
                "name": "c",
                "namespace": "ns",
                "uid": "u",
                "resourceVersion": "7",
                "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": "gpu"}},
                        {"name": "all", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}},
                    ]
                }
            },
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r", "driver": "d", "pool": "p", "device": "x", "adminAccess": True}
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}],
            },
        }
    )
    exact, every = (r.exactly for r in claim.requests)
    assert exact is not None and (exact.allocation_mode, exact.count) == ("ExactCount", 1)
    assert every is not None and every.allocation_mode == "All"
    assert claim.controller_uid == "pod-uid" and claim.key == "ns/c" and claim.reserved_for_pod("pod-uid")
    assert claim.allocated[0].admin_access


def test_slice_attributes_and_capacity() -> None:
    slice_ = parse_resource_slice(
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d",
                "nodeName": "n1",
                "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "x",
                        "attributes": {"model": {"string": "a"}, "v": {"version": "1.0.0"}},
                        "capacity": {"memory": {"value": "1Gi"}},
                    }
                ],
            },
        }
    )
    device = slice_.devices[0]
    assert device.attributes == {"model": ("string", "a"), "v": ("version", "1.0.0")}
    assert device.capacity == {"memory": Fraction(2**30)}
    assert slice_.reachable_from({}, "n1") and not slice_.reachable_from({}, "n2")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {
                "metadata": {"name": "s"},
                "spec": {"devices": [{"name": "x", "capacity": {"m": {"value": "lots"}}}]},
            },
            "spec.devices[0].capacity[m].value: invalid quantity 'lots'",
        ),
        (
            {"metadata": {"name": "s"}, "spec": {"devices": [{"name": "x", "attributes": {"a": {}}}]}},
            "spec.devices[0].attributes[a]: exactly one of int, bool, string or version is required",
        ),
    ],
)
def test_bad_slices_name_the_field(raw: dict, message: str) -> None:
    with pytest.raises(
        ObjectParseError,
        match=rf"^{re.escape(message)}$",
    ):
        parse_resource_slice(raw)


def test_device_class_selectors() -> None:
    cls = parse_device_class(
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "true"}}, {}]}}
    )
    assert cls.selectors == ("true", None)
