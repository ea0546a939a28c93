"""DraManager's allocated-device index (upstream's ``allocatedDevices`` plus ``inFlightAllocations``):
kept up to date from the claims store's changes, assumed claims and in-flight allocations, and always
equal to recounting every claim as shown."""

from __future__ import annotations

import copy
from typing import Any

from _dra_kit import DRIVER, allocated_on, claim, objects

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.objects import RESOURCE_CLAIMS
from kopf_scheduler.framework.objects.dra import parse_resource_claim
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager


def dev(name: str, node: str = "n1") -> tuple[str, str, str]:
    return (DRIVER, node, name)


def versioned(raw: dict[str, Any], version: int) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["metadata"]["resourceVersion"] = str(version)
    return out


def recount(manager: DraManager) -> frozenset[tuple[str, str, str]]:
    """What the index must equal: every claim as shown, plus the in-flight ones."""
    return frozenset(
        (d.driver, d.pool, d.device)
        for c in [*manager.list(), *manager.in_flight()]
        for d in c.allocated
        if not d.admin_access
    )


def setup(*raws: dict[str, Any]) -> tuple[ClusterObjects, DraManager]:
    store = objects(*raws)
    return store, DraManager(store)


def upsert(store: ClusterObjects, raw: dict[str, Any]) -> None:
    store.store(RESOURCE_CLAIMS).upsert(copy.deepcopy(raw))


def check(manager: DraManager, expected: set[tuple[str, str, str]]) -> None:
    got = manager.allocated_devices()
    assert got == expected
    assert got == recount(manager)


def test_claims_added_updated_deallocated_and_deleted() -> None:
    store, manager = setup(claim("a", allocation=allocated_on("n1", "d0")), claim("b"))
    check(manager, {dev("d0")})
    upsert(store, versioned(claim("b", allocation=allocated_on("n1", "d1", "d2")), 2))
    check(manager, {dev("d0"), dev("d1"), dev("d2")})
    upsert(store, versioned(claim("a"), 3))  # deallocated
    check(manager, {dev("d1"), dev("d2")})
    store.store(RESOURCE_CLAIMS).delete("default", "b")
    check(manager, set())
    upsert(store, claim("c", namespace="other", allocation=allocated_on("n2", "d0")))
    check(manager, {dev("d0", "n2")})


def test_unchanged_store_hands_out_the_same_set() -> None:
    store, manager = setup(claim("a", allocation=allocated_on("n1", "d0")))
    first = manager.allocated_devices()
    assert manager.allocated_devices() is first
    upsert(store, versioned(claim("b"), 2))  # a change that frees or takes no device
    assert manager.allocated_devices() is first


def test_admin_access_results_take_no_device() -> None:
    allocation = allocated_on("n1", "d0", "d1")
    allocation["devices"]["results"][1]["adminAccess"] = True
    _, manager = setup(claim("a", allocation=allocation))
    check(manager, {dev("d0")})


def test_a_device_two_claims_hold_stays_allocated_until_both_let_go() -> None:
    store, manager = setup(
        claim("a", allocation=allocated_on("n1", "d0")), claim("b", allocation=allocated_on("n1", "d0"))
    )
    check(manager, {dev("d0")})
    store.store(RESOURCE_CLAIMS).delete("default", "a")
    check(manager, {dev("d0")})
    upsert(store, versioned(claim("b"), 2))
    check(manager, set())


def test_in_flight_allocations_count_until_removed() -> None:
    store, manager = setup(claim("a"))
    pending = parse_resource_claim(claim("a", allocation=allocated_on("n1", "d3")))
    manager.signal_pending_allocation(pending.uid, pending)
    check(manager, {dev("d3")})
    # The write lands while it is still in flight: counted once, freed by neither alone.
    upsert(store, versioned(claim("a", allocation=allocated_on("n1", "d3")), 2))
    check(manager, {dev("d3")})
    assert manager.remove_pending_allocation(pending.uid)
    check(manager, {dev("d3")})
    assert not manager.remove_pending_allocation(pending.uid)
    upsert(store, versioned(claim("a"), 3))
    check(manager, set())


def test_in_flight_allocation_dropped_by_unreserve() -> None:
    _, manager = setup(claim("a"))
    pending = parse_resource_claim(claim("a", allocation=allocated_on("n1", "d3")))
    manager.signal_pending_allocation(pending.uid, pending)
    manager.remove_pending_allocation(pending.uid)
    check(manager, set())


def test_assumed_claim_counts_until_the_store_catches_up() -> None:
    store, manager = setup(versioned(claim("a"), 5))
    check(manager, set())
    manager.assume(parse_resource_claim(versioned(claim("a", allocation=allocated_on("n1", "d0")), 6)))
    check(manager, {dev("d0")})
    # An older version arriving late does not hide the assumed one.
    upsert(store, versioned(claim("a"), 5))
    check(manager, {dev("d0")})
    # A newer one (here: deallocated meanwhile) replaces it.
    upsert(store, versioned(claim("a"), 7))
    check(manager, set())
    assert manager.get("default", "a").resource_version == "7"


def test_restored_claim_shows_the_store_again() -> None:
    _, manager = setup(versioned(claim("a"), 5))
    manager.assume(parse_resource_claim(versioned(claim("a", allocation=allocated_on("n1", "d0")), 6)))
    check(manager, {dev("d0")})
    manager.restore("default", "a")
    check(manager, set())


def test_assumed_claim_whose_store_object_is_deleted_counts_no_more() -> None:
    store, manager = setup(versioned(claim("a"), 5))
    manager.assume(parse_resource_claim(versioned(claim("a", allocation=allocated_on("n1", "d0")), 6)))
    check(manager, {dev("d0")})
    store.store(RESOURCE_CLAIMS).delete("default", "a")  # deleted, or dropped by a resync
    check(manager, set())
    assert manager.get("default", "a") is None


def test_a_resync_that_drops_and_readds_claims_is_followed() -> None:
    store, manager = setup(
        claim("a", allocation=allocated_on("n1", "d0")), claim("b", allocation=allocated_on("n1", "d1"))
    )
    check(manager, {dev("d0"), dev("d1")})
    claims = store.store(RESOURCE_CLAIMS)
    # A resync: several changes between two reads, one claim gone, one re-listed with the same content.
    claims.delete("default", "a")
    upsert(store, claim("b", allocation=allocated_on("n1", "d1")))
    upsert(store, claim("e", allocation=allocated_on("n1", "d4")))
    check(manager, {dev("d1"), dev("d4")})


def test_index_follows_many_random_changes() -> None:
    import random

    rng = random.Random(7)
    store, manager = setup()
    claims = store.store(RESOURCE_CLAIMS)
    version = 1
    for _ in range(400):
        name = f"c{rng.randrange(12)}"
        version += 1
        action = rng.randrange(6)
        if action == 0:
            claims.delete("default", name)
        elif action == 1:
            upsert(store, versioned(claim(name), version))
        elif action == 2:
            upsert(
                store, versioned(claim(name, allocation=allocated_on("n1", f"d{rng.randrange(8)}")), version)
            )
        elif action == 3 and manager.get("default", name) is not None:
            written = versioned(claim(name, allocation=allocated_on("n1", f"d{rng.randrange(8)}")), version)
            manager.assume(parse_resource_claim(written))
        elif action == 4:
            uid = f"claim-{name}"
            if manager.has_pending_allocation(uid):
                manager.remove_pending_allocation(uid)
            else:
                pending = parse_resource_claim(
                    claim(name, allocation=allocated_on("n1", f"d{rng.randrange(8)}"))
                )
                manager.signal_pending_allocation(uid, pending)
        else:
            manager.restore("default", name)
        if rng.randrange(3) == 0:
            assert manager.allocated_devices() == recount(manager)
    assert manager.allocated_devices() == recount(manager)


def test_deleting_one_of_many_claims_shifts_the_listing() -> None:
    """A deletion moves every later claim in the store's listing: the index compares by identity then."""
    raws = [claim(f"c{i}", allocation=allocated_on("n1", f"d{i}")) for i in range(150)]
    store, manager = setup(*raws)
    check(manager, {dev(f"d{i}") for i in range(150)})
    store.store(RESOURCE_CLAIMS).delete("default", "c0")
    upsert(store, versioned(claim("c75"), 2))
    check(manager, {dev(f"d{i}") for i in range(1, 150) if i != 75})
