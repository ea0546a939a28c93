"""What DynamicResources keeps across cycles (each node's devices and selector verdicts, ``node_devices``)
and its short way for simple claims (``greedy``): a slice updated, a claim deallocated, a class or a
node's labels changed are seen at once, and the short way picks what the full search picks, with its
errors, on generated nodes and claims."""

from __future__ import annotations

import copy
import random
from collections.abc import Set as AbstractSet
from typing import Any

import pytest
from _dra_kit import DRIVER, Handle, allocated_on, claim, device, device_class, node, objects, pod, request
from _dra_kit import resource_slice as make_slice

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_SLICES, ObjectKind
from kopf_scheduler.framework.status import unresolvable
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources
from kopf_scheduler.plugins.dynamic_resources.allocator import AllocationError, Allocator, FailedOnNode
from kopf_scheduler.plugins.dynamic_resources.cel_env import DeviceMatcher, compile_selector, matches
from kopf_scheduler.plugins.dynamic_resources.manager import DraManager
from kopf_scheduler.plugins.dynamic_resources.node_devices import NodeDevices, enhance_runtime_error

GPU = device_class("gpu", f'device.driver == "{DRIVER}"')
CANNOT = unresolvable("cannot allocate all claims")


def allocator(
    store: ClusterObjects,
    devices: NodeDevices,
    matcher: DeviceMatcher,
    allocated: AbstractSet[tuple[str, str, str]] = frozenset(),
) -> Allocator:
    return Allocator(
        lambda name: store.of(DEVICE_CLASSES).get("", name),
        store.of(RESOURCE_SLICES).list(),
        allocated,
        matcher,
        devices=devices,
    )


def picks(store: ClusterObjects, devices: NodeDevices, matcher: DeviceMatcher) -> list[str]:
    """The devices the claim ``c`` gets on n1."""
    found = allocator(store, devices, matcher).allocate(
        "n1",
        {},
        [store.of(RESOURCE_CLAIMS).get("default", "c")],  # type: ignore[list-item]
    )
    return [] if found is None else [r["device"] for r in found[0]["devices"]["results"]]


def upsert(store: ClusterObjects, raw: dict[str, Any]) -> None:
    kinds: dict[str, ObjectKind[Any]] = {
        "ResourceSlice": RESOURCE_SLICES,
        "DeviceClass": DEVICE_CLASSES,
        "ResourceClaim": RESOURCE_CLAIMS,
    }
    store.store(kinds[raw["kind"]]).upsert(copy.deepcopy(raw))


# -- the views: kept while the node sees the same slices ----------------------------------------------
def test_view_is_kept_until_a_slice_the_node_sees_changes() -> None:
    store = objects(GPU, make_slice("n1", device("d0")), make_slice("n2", device("d0")))
    devices = NodeDevices()
    devices.refresh(store.of(RESOURCE_SLICES).list())
    n1, n2 = devices.view("n1", {}), devices.view("n2", {})
    assert devices.view("n1", {}) is n1
    upsert(store, make_slice("n2", device("d0"), device("d1")))
    devices.refresh(store.of(RESOURCE_SLICES).list())
    assert devices.view("n1", {}) is n1  # n1's slice is the same object
    assert devices.view("n2", {}) is not n2
    assert [d.name for d in devices.view("n2", {}).devices] == ["d0", "d1"]


def test_slice_updated_changes_the_devices_picked() -> None:
    store = objects(GPU, make_slice("n1", device("d0", model="a"), device("d1", model="b")))
    store.store(RESOURCE_CLAIMS).upsert(
        claim(
            "c", request(selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a"'}}])
        )
    )
    devices, matcher = NodeDevices(), DeviceMatcher()
    assert picks(store, devices, matcher) == ["d0"]
    upsert(store, make_slice("n1", device("d0", model="b"), device("d1", model="a")))
    assert picks(store, devices, matcher) == ["d1"]
    upsert(store, make_slice("n1", device("d1", model="b")))
    assert picks(store, devices, matcher) == []
    store.store(RESOURCE_SLICES).delete("", "n1-slice")
    assert picks(store, devices, matcher) == []
    upsert(store, make_slice("n1", device("d7", model="a")))
    assert picks(store, devices, matcher) == ["d7"]


def test_device_class_changed_changes_the_devices_picked() -> None:
    store = objects(GPU, make_slice("n1", device("d0", model="a"), device("d1", model="b")), claim("c"))
    devices, matcher = NodeDevices(), DeviceMatcher()
    assert picks(store, devices, matcher) == ["d0"]
    upsert(store, device_class("gpu", f'device.attributes["{DRIVER}"].model == "b"'))
    assert picks(store, devices, matcher) == ["d1"]
    upsert(store, device_class("gpu", 'device.driver == "other"'))
    assert picks(store, devices, matcher) == []
    upsert(store, device_class("gpu", f'device.attributes["{DRIVER}"].nothing == 1'))
    with pytest.raises(AllocationError) as e:
        picks(store, devices, matcher)
    assert str(e.value) == (
        "class gpu: selector #0 on device gpu.example.com/n1/d0: CEL runtime error: no such key: nothing. "
        "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
        "for optional fields"
    )


# upstream's TestEnhanceRuntimeError (dynamic-resource-allocation's cel/errors_test.go at v0.37.2)
@pytest.mark.parametrize(
    ("detail", "want"),
    [
        pytest.param(
            "no such key: sharingStrategy",
            "no such key: sharingStrategy. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields",
            id="no such key error gets enhanced with usage hint",
        ),
        pytest.param("some other error", "some other error", id="other error is returned unchanged"),
        pytest.param(
            "context: no such key: fieldY",
            "context: no such key: fieldY. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields",
            id="wrapped no such key error gets enhanced",
        ),
        pytest.param(
            "no such key: fieldZ. consider using CEL optional chaining",
            "no such key: fieldZ. consider using CEL optional chaining. consider using CEL optional chaining "
            "(.? followed by orValue()) or guarding the check with has() for optional fields",
            id="error with hint text but not enhancedError type still gets enhanced",
        ),
    ],
)
def test_enhance_runtime_error(detail: str, want: str) -> None:
    assert enhance_runtime_error(detail) == want


def test_node_labels_change_what_a_node_selector_slice_offers() -> None:
    shared = make_slice(
        "",
        device("x0"),
        name="rack",
        pool="rack",
        nodeSelector={
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
        },
    )
    store = objects(GPU, shared)
    devices = NodeDevices()
    devices.refresh(store.of(RESOURCE_SLICES).list())
    assert devices.view("n1", {"rack": "r1"}).ids == [(DRIVER, "rack", "x0")]
    assert devices.view("n1", {"rack": "r2"}).ids == []
    assert devices.view("n1", {"rack": "r1"}).ids == [(DRIVER, "rack", "x0")]


def test_selector_error_names_the_claim_asking() -> None:
    """Verdicts are shared by claims with the same selectors; the error text is each claim's."""
    bad = request(selectors=[{"cel": {"expression": f'device.attributes["{DRIVER}"].nothing == 1'}}])
    store = objects(GPU, make_slice("n1", device("d0")), claim("a", bad), claim("b", bad))
    devices, matcher = NodeDevices(), DeviceMatcher()
    for name in ("a", "b"):
        parsed = store.of(RESOURCE_CLAIMS).get("default", name)
        with pytest.raises(
            AllocationError, match=rf"^claim default/{name}: selector #0 on device .*: CEL runtime"
        ):
            allocator(store, devices, matcher).allocate("n1", {}, [parsed])  # type: ignore[list-item]


# -- the plugin: allocated devices come and go between cycles -------------------------------------------
def test_claim_deallocated_frees_its_device_for_the_next_cycle() -> None:
    store = objects(GPU, make_slice("n1", device("d0")), claim("taken", allocation=allocated_on("n1", "d0")))
    store.store(RESOURCE_CLAIMS).upsert(claim("c"))
    pl = DynamicResources(Args(), Handle(store))

    def filter_n1() -> object:
        state = CycleState()
        assert pl.pre_filter(state, pod("p", "c"), [])[1] is None
        return pl.filter(state, pod("p", "c"), node("n1"))

    assert filter_n1() == CANNOT
    deallocated = claim("taken")
    deallocated["metadata"]["resourceVersion"] = "2"
    upsert(store, deallocated)
    assert filter_n1() is None
    upsert(store, make_slice("n1", device("d0"), device("d1")))
    store.store(RESOURCE_CLAIMS).upsert(claim("taken", allocation=allocated_on("n1", "d0", "d1")))
    assert filter_n1() == CANNOT


# -- the driver-name selector is answered without celpy ------------------------------------------------
@pytest.mark.parametrize(
    "expression",
    [
        f'device.driver == "{DRIVER}"',
        f"'{DRIVER}' == device.driver",
        ' device . driver=="other" ',
        'device.driver == ""',
        'device.driver == "a" || device.driver == "b"',
        'device.driver == "a\\"b"',
        f'device.driver != "{DRIVER}"',
    ],
)
def test_driver_selector_agrees_with_celpy(expression: str) -> None:
    slice_ = RESOURCE_SLICES.parse(make_slice("n1", device("d0")))
    compiled = compile_selector(expression)
    context = {"device": DeviceMatcher()._context(DRIVER, slice_.devices[0])["device"]}
    assert DeviceMatcher().matches(expression, DRIVER, slice_.devices[0]) is matches(compiled, context)


# -- the short way picks what the full search picks ----------------------------------------------------
EXPRESSIONS = [
    f'device.attributes["{DRIVER}"].model == "a"',
    f'device.attributes["{DRIVER}"].model != "a"',
    f'device.attributes["{DRIVER}"].n % 2 == 0',
    f'device.attributes["{DRIVER}"].n > 2 && device.attributes["{DRIVER}"].broken == 1',  # fails for n > 2
    f'device.driver == "{DRIVER}"',
    'device.driver == "other.example.com"',
]


def generated(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], frozenset[Any], dict[str, str]]:
    """Classes, slices and claims (``c0``...) for one node n1, and devices allocated already."""
    rng = random.Random(seed)
    classes = [GPU, device_class("sel", rng.choice(EXPRESSIONS)), device_class("other", EXPRESSIONS[5])]
    slices, allocated = [], set()
    for p in range(rng.randint(1, 3)):
        devices = []
        counted = rng.random() < 0.15  # a pool with a counter set of its own (partitionable devices)
        for i in range(rng.randint(0, 5)):
            raw = device(f"d{i}", model=rng.choice("ab"), n=rng.randint(0, 5))
            if rng.random() < 0.1:
                raw["bindingConditions"] = ["ready"]
            if rng.random() < 0.1:
                raw["consumesCounters"] = [{"counterSet": "s", "counters": {}}]
            elif counted and rng.random() < 0.6:
                raw["consumesCounters"] = [{"counterSet": "cs", "counters": {"c": {"value": "1"}}}]
            if rng.random() < 0.1:  # shared by capacity (consumable capacity)
                raw["allowMultipleAllocations"] = True
                raw["capacity"] = {"mem": {"value": str(rng.randint(1, 4))}}
            devices.append(raw)
            if rng.random() < 0.3:
                allocated.add((DRIVER, f"p{p}", f"d{i}"))
        if devices and rng.random() < 0.1:
            devices.append(dict(devices[0]))  # a duplicate name: the pool is invalid
        where: dict[str, Any] = {"allNodes": True} if rng.random() < 0.2 else {}
        pool_slices = [make_slice("" if where else "n1", *devices, name=f"s{p}", pool=f"p{p}", **where)]
        if counted:
            shared = [{"name": "cs", "counters": {"c": {"value": str(rng.randint(0, 2))}}}]
            pool_slices.append(make_slice("n1", name=f"s{p}-counters", pool=f"p{p}", sharedCounters=shared))
            for made in pool_slices:
                made["spec"]["pool"]["resourceSliceCount"] = 2
        slices += pool_slices
    claims = []
    for c in range(rng.randint(1, 3)):
        requests = []
        for r in range(rng.randint(1, 2)):
            exactly: dict[str, Any] = {"count": rng.randint(0, 3)}
            if rng.random() < 0.4:
                exactly["selectors"] = [{"cel": {"expression": rng.choice(EXPRESSIONS)}}]
            if rng.random() < 0.05:
                exactly["adminAccess"] = True
            if rng.random() < 0.08:
                exactly["capacity"] = {"requests": {"mem": str(rng.randint(1, 3))}}
            requests.append(request(f"r{r}", rng.choice(["gpu", "gpu", "sel", "other"]), **exactly))
        claims.append(claim(f"c{c}", *requests))
    return classes + slices, claims, frozenset(allocated), {}


def outcome(found: Any) -> Any:
    return None if found is None else [[r["device"] for r in a["devices"]["results"]] for a in found]


@pytest.mark.parametrize("seed", range(300))
def test_short_way_agrees_with_the_search(seed: int) -> None:
    raws, claims, allocated, labels = generated(seed)
    store = objects(*raws, *claims)
    parsed = [store.of(RESOURCE_CLAIMS).get("default", c["metadata"]["name"]) for c in claims]
    kept, matcher = NodeDevices(), DeviceMatcher()  # the second short way reuses the first's verdicts
    answers = []
    for search_only in (True, False, False):
        subject = allocator(store, kept if not search_only else NodeDevices(), matcher, allocated)
        subject.search_only = search_only
        try:
            answers.append(outcome(subject.allocate("n1", labels, parsed)))  # type: ignore[arg-type]
        except (AllocationError, FailedOnNode) as e:
            answers.append(f"{type(e).__name__}: {e}")
    assert answers[1] == answers[0]
    assert answers[2] == answers[0]


# -- what a node gave a request is reused while its pools' allocations stay the same ----------------------
@pytest.mark.parametrize("seed", range(40))
def test_kept_outcomes_follow_allocations_and_slices(seed: int) -> None:
    """Claims allocated, deallocated, deleted, in flight, slices replaced: the allocator that reuses what
    it found per node answers as a fresh full search over the same allocated devices."""
    rng = random.Random(seed)
    nodes = ["n0", "n1", "n2"]

    def node_slice(name: str) -> dict[str, Any]:
        count = rng.randint(1, 4)
        return make_slice(name, *(device(f"d{i}", model=rng.choice("ab")) for i in range(count)))

    store = objects(GPU, *(node_slice(n) for n in nodes))
    manager = DraManager(store)
    devices, matcher = NodeDevices(), DeviceMatcher()
    version = iter(range(2, 10_000))
    for step in range(40):
        action = rng.random()
        name = f"c{rng.randint(0, 5)}"
        if action < 0.4:  # allocated on some node (or re-allocated)
            raw = claim(name, allocation=allocated_on(rng.choice(nodes), f"d{rng.randint(0, 3)}"))
            raw["metadata"]["resourceVersion"] = str(next(version))
            store.store(RESOURCE_CLAIMS).upsert(raw)
        elif action < 0.6:  # deallocated
            raw = claim(name)
            raw["metadata"]["resourceVersion"] = str(next(version))
            store.store(RESOURCE_CLAIMS).upsert(raw)
        elif action < 0.7:
            store.store(RESOURCE_CLAIMS).delete("default", name)
        elif action < 0.8:  # in flight, or no longer
            if manager.has_pending_allocation(name):
                manager.remove_pending_allocation(name)
            else:
                flying = claim(name, allocation=allocated_on(rng.choice(nodes), f"d{rng.randint(0, 3)}"))
                manager.signal_pending_allocation(name, RESOURCE_CLAIMS.parse(flying))
        elif action < 0.9:
            upsert(store, node_slice(rng.choice(nodes)))
        exactly: dict[str, Any] = {"count": rng.randint(1, 2)}
        if rng.random() < 0.5:
            model = rng.choice("ab")
            exactly["selectors"] = [
                {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "{model}"'}}
            ]
        probe = [RESOURCE_CLAIMS.parse(claim("probe", request(**exactly)))]
        allocated = manager.allocated_devices()
        kept = Allocator(
            lambda n: store.of(DEVICE_CLASSES).get("", n),
            store.of(RESOURCE_SLICES).list(),
            allocated,
            matcher,
            devices=devices,
            versions=manager.pool_versions(),
        )
        fresh = allocator(store, NodeDevices(), DeviceMatcher(), allocated)
        fresh.search_only = True
        for n in nodes:
            assert outcome(kept.allocate(n, {}, probe)) == outcome(fresh.allocate(n, {}, probe)), (step, n)
