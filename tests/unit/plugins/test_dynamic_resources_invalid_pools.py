"""Invalid resource pools, as the structured allocator of v0.37.2 treats them: their devices are never
allocated, and a node where nothing can be allocated while it sees an invalid pool is unschedulable with
``invalid resource pools were encountered`` (``ErrFailedAllocationOnNode``), the other nodes still tried.
Upstream's ``invalid-pool-is-ok-if-devices-can-be-allocated-from-other``,
``invalid-pool-is-error-if-no-other-device-can-be-allocated`` and ``duplicate-slice``
(``allocatortesting``) as literals, through the plugin's Filter."""

from __future__ import annotations

from typing import Any

import pytest
from _dra_kit import DRIVER, Handle, claim, device, device_class, node, objects, pod, resource_slice

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.status import Status, unresolvable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources

GPU = device_class("gpu", f'device.driver == "{DRIVER}"')
INVALID = unresolvable("invalid resource pools were encountered")


def pool_slice(name: str, node_name: str, pool: str, count: int, *devices: dict[str, Any]) -> dict[str, Any]:
    raw = resource_slice(node_name, *devices, name=name, pool=pool)
    raw["spec"]["pool"]["resourceSliceCount"] = count
    return raw


#: pool1 on n1 publishes device1 twice (two slices): invalid; pool2 on n1 has device2
N1 = (
    pool_slice("slice1", "n1", "pool1", 2, device("device1")),
    pool_slice("slice2", "n1", "pool1", 2, device("device1")),
    pool_slice("slice3", "n1", "pool2", 1, device("device2")),
)


def filtered(*raws: dict[str, Any], nodes: tuple[str, ...] = ("n1",)) -> dict[str, Status | None]:
    pl = DynamicResources(Args(), Handle(objects(GPU, *raws)))
    state = CycleState()
    subject = pod("p", "c")
    assert pl.pre_filter(state, subject, []) == (None, None)
    out = {name: pl.filter(state, subject, node(name)) for name in nodes}
    if out.get("n1") is None and "n1" in nodes:
        found = state.read(_key()).node_allocations["n1"]
        assert [r.device_id for r in found.results[0]] == [(DRIVER, "pool2", "device2")]
    return out


def _key() -> Any:
    from kopf_scheduler.plugins.dynamic_resources.plugin import _KEY

    return _KEY


def test_invalid_pool_is_ok_if_devices_can_be_allocated_from_other() -> None:
    assert filtered(claim("c"), *N1) == {"n1": None}


def test_invalid_pool_is_error_if_no_other_device_can_be_allocated() -> None:
    taken = claim(
        "other",
        allocation={
            "devices": {
                "results": [{"request": "req", "driver": DRIVER, "pool": "pool2", "device": "device2"}]
            }
        },
        reserved_for=["q"],
    )
    # n2 sees a valid pool with a free device: the invalid pool of n1 fails n1 only
    n2 = pool_slice("slice4", "n2", "pool3", 1, device("device3"))
    assert filtered(claim("c"), taken, *N1, n2, nodes=("n1", "n2")) == {"n1": INVALID, "n2": None}


@pytest.mark.parametrize("count", [2, 1], ids=["duplicate-slice", "duplicate-device-in-one-slice"])
def test_duplicate_slice(count: int) -> None:
    if count == 2:  # the same slice published twice under two names
        raws = (pool_slice("slice1", "n1", "pool1", 2, device("device1")),)
        raws += (pool_slice("slice1-2", "n1", "pool1", 2, device("device1")),)
    else:
        raws = (pool_slice("slice1", "n1", "pool1", 1, device("device1"), device("device1")),)
    assert filtered(claim("c"), *raws) == {"n1": INVALID}
