"""The binding cycle of VolumeBinding: the API writes (upstream's ``TestBindAPIUpdate``), the checks of
what the API server reports (``TestCheckBindings``), and waiting for the PV controller in virtual time
(``TestBindPodVolumes``): success after a while, a timeout, a pod deleted while it waits, a write
refused; and the plugin's reserve, pre-bind and unreserve together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from _volume_binding_kit import (
    WAIT_PROVISIONER,
    FakeHandle,
    claim,
    node,
    objects,
    pod_with_claims,
    volume,
)

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from kopf_scheduler.framework.objects.storage import parse_persistent_volume, parse_persistent_volume_claim
from kopf_scheduler.plugins.volume_binding import Args, new
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, Provision, StaticBinding
from kopf_scheduler.plugins.volume_binding.binding import PodVolumesBinding
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError

SELECTED = "volume.kubernetes.io/selected-node"
POD = pod_with_claims("unbound-pvc")
AFFINITY_MISMATCH = 'pv "pv-node1a" node affinity doesn\'t match node "node1": no matching NodeSelectorTerms'
P = WAIT_PROVISIONER

unbound = claim("unbound-pvc", "1G")
unbound2 = claim("unbound-pvc2", "5G")
prebound_node1a = claim("unbound-pvc", "1G", volume="pv-node1a")
bound_node1a = claim("unbound-pvc", "1G", volume="pv-node1a", bound=True)
provisioned = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER)
provisioned_selected = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER, selected_node="node1")
provisioned_bound = claim(
    "provisioned-pvc", "1Gi", storage_class=P, selected_node="node1", volume="pv-bound", bound=True
)
pv_node1a = volume("pv-node1a", "node1", "5G")
pv_node1a_bound = volume("pv-node1a", "node1", "5G", bound_to=unbound)
pv_node1b = volume("pv-node1b", "node1", "10G")
pv_node1b_bound = volume("pv-node1b", "node1", "10G", bound_to=unbound2)
pv_bound = volume("pv-bound", "node1", "1G", bound_to=provisioned_bound)


def _env(
    *items: dict[str, Any], timeout: float = 10, nodes: Any = None
) -> tuple[PodVolumesBinding, FakeHandle]:
    handle = FakeHandle(objects(*items), [node("node1")] if nodes is None else nodes)
    plugin = new(Args(), handle)

    def labels(name: str) -> Any:
        found = handle.snapshot().get(name)
        return None if found is None else found.labels

    binding = PodVolumesBinding(
        plugin.binder, handle.client, handle.clock, timeout, labels, handle.pod_exists
    )
    return binding, handle


def _volumes(bindings: list[tuple[Any, Any]] = (), provisions: list[Any] = ()) -> PodVolumes:  # type: ignore[assignment]
    return PodVolumes(
        [StaticBinding(parse_persistent_volume_claim(c), parse_persistent_volume(v)) for c, v in bindings],
        [Provision(parse_persistent_volume_claim(c)) for c in provisions],
    )


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


# -- the writes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("bindings", "stored", "api_newer", "provisions", "fails", "claim_refs"),
    [
        ([], [], [], [], None, {}),
        ([(unbound, pv_node1a_bound)], [pv_node1a], [], [], None, {"pv-node1a": "unbound-pvc"}),
        (
            [(unbound, pv_node1a_bound), (unbound2, pv_node1b_bound)], [pv_node1a, pv_node1b], [], [], None,
            {"pv-node1a": "unbound-pvc", "pv-node1b": "unbound-pvc2"},
        ),
        ([(unbound, pv_node1a_bound)], [pv_node1a_bound], [], [], None, {"pv-node1a": "unbound-pvc"}),
        (
            [(unbound, pv_node1a_bound), (unbound2, pv_node1b_bound)], [pv_node1a, pv_node1b],
            [volume("pv-node1b", "node1", "10G", version="2", bound_to=unbound2)], [],
            'Operation cannot be fulfilled on persistentvolumes "pv-node1b"', {"pv-node1a": "unbound-pvc"},
        ),
        ([], [], [], [provisioned_selected], None, {}),
        (
            [(unbound, pv_node1a_bound)], [pv_node1a],
            [claim("provisioned-pvc", "1Gi", storage_class=P, version="2")], [provisioned_selected],
            'Operation cannot be fulfilled on persistentvolumeclaims "provisioned-pvc"',
            {"pv-node1a": "unbound-pvc"},
        ),
    ],
    ids=[
        "nothing-to-bind-empty", "one-binding", "two-bindings", "api-already-updated", "api-update-failed",
        "one-provisioned-pvc", "binding-succeed, provision-api-update-failed",
    ],
)  # fmt: skip
def test_bind_api_update(
    bindings: Any, stored: Any, api_newer: Any, provisions: Any, fails: str | None, claim_refs: Any
) -> None:
    binding, handle = _env(unbound, unbound2, provisioned, *stored)
    pod_volumes = _volumes(bindings, provisions)
    for b in pod_volumes.static_bindings:  # assumed, as reserve leaves them
        binding.binder.volumes.assume(b.volume)
    for newer in api_newer:  # changed by someone else since
        kind = PERSISTENT_VOLUMES if newer["kind"] == "PersistentVolume" else PERSISTENT_VOLUME_CLAIMS
        handle.objects.store(kind).upsert(newer)
    if fails is not None:
        with pytest.raises(VolumeBindingError, match=fails):
            _run(binding.write(pod_volumes))
    else:
        _run(binding.write(pod_volumes))
    volumes = handle.objects.of(PERSISTENT_VOLUMES)
    newer = {v["metadata"]["name"]: v["spec"].get("claimRef", {}).get("name") for v in api_newer}
    expected = {**claim_refs, **{k: v for k, v in newer.items() if v and k.startswith("pv-")}}
    assert {v.name: v.claim_ref.name for v in volumes.list() if v.claim_ref} == expected
    # what was written is the API server's now, what was not is dropped: nothing stays assumed
    assert binding.binder.volumes.assumed() == ()
    if provisions and fails is None:
        stored_claim = handle.objects.of(PERSISTENT_VOLUME_CLAIMS).get("testns", "provisioned-pvc")
        assert stored_claim is not None and stored_claim.annotations[SELECTED] == "node1"


# -- the checks ----------------------------------------------------------------------------------------
CHECKS: dict[str, tuple[Any, ...]] = {
    # (bindings, provisions, what the API server holds, delete, expected: True / False / error text)
    "nothing-to-bind": ([], [], [], None, True),
    "binding-bound": ([(unbound, pv_node1a_bound)], [], [pv_node1a_bound, bound_node1a], None, True),
    "binding-prebound": ([(unbound, pv_node1a_bound)], [], [pv_node1a_bound, prebound_node1a], None, False),
    "binding-unbound": ([(unbound, pv_node1a_bound)], [], [pv_node1a_bound, unbound], None, False),
    "binding-pvc-not-exists": (
        [(unbound, pv_node1a_bound)], [], [pv_node1a_bound], None,
        'failed to check binding: persistentvolumeclaims "testns/unbound-pvc" not found',
    ),
    "binding-pv-not-exists": (
        [(unbound, pv_node1a_bound)], [], [bound_node1a], None,
        'failed to check binding: persistentvolumes "pv-node1a" not found',
    ),
    "binding-claimref-nil": (
        [(unbound, pv_node1a_bound)], [], [pv_node1a, bound_node1a], None,
        'ClaimRef got reset for pv "pv-node1a"',
    ),
    "binding-claimref-uid-empty": (
        [(unbound, pv_node1a_bound)], [],
        [volume("pv-node1a", "node1", "5G", bound_to=claim("unbound-pvc", uid="")), bound_node1a],
        None, 'ClaimRef got reset for pv "pv-node1a"',
    ),
    "binding-one-bound,one-unbound": (
        [(unbound, pv_node1a_bound), (unbound2, pv_node1b_bound)], [],
        [pv_node1a_bound, pv_node1b_bound, bound_node1a, unbound2], None, False,
    ),
    "binding-older-api-object-waits": (
        [(unbound, volume("pv-node1a", "node1", "5G", version="3", bound_to=unbound))], [],
        [pv_node1a, bound_node1a], None, False,
    ),
    "binding-node-affinity-fails": (
        [(unbound, volume("pv-node1a", "node2", "5G", bound_to=unbound))], [],
        [volume("pv-node1a", "node2", "5G", bound_to=unbound), bound_node1a], None,
        AFFINITY_MISMATCH,
    ),
    "provisioning-pvc-bound": ([], [provisioned_selected], [pv_bound, provisioned_bound], None, True),
    "provisioning-pvc-unbound": ([], [provisioned_selected], [provisioned_selected], None, False),
    "provisioning-pvc-not-exists": (
        [], [provisioned_selected], [], None,
        'failed to check provisioning pvc: persistentvolumeclaims "testns/provisioned-pvc" not found',
    ),
    "provisioning-pvc-annotations-nil": (
        [], [provisioned_selected], [provisioned], None,
        'selectedNode annotation reset for PVC "provisioned-pvc"',
    ),
    "provisioning-pvc-selected-node-dropped": (
        [], [provisioned_selected],
        [{**provisioned, "metadata": {**provisioned["metadata"], "annotations": {"other": "x"}}}], None,
        'provisioning failed for PVC "provisioned-pvc"',
    ),
    "provisioning-pvc-selected-node-wrong-node": (
        [], [provisioned_selected],
        [claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER, selected_node="wrong-node")], None,
        'provisioning failed for PVC "provisioned-pvc"',
    ),
    "binding-bound-provisioning-unbound": (
        [(unbound, pv_node1a_bound)], [provisioned_selected],
        [pv_node1a_bound, bound_node1a, provisioned_selected], None, False,
    ),
    "tolerate-provisioning-pvc-bound-pv-not-found": (
        [], [provisioned_selected], [provisioned_bound], None, False,
    ),
    "node-gone": ([], [], [], "node", 'failed to get node "node1": node "node1" not found'),
    "pod-deleted": ([], [], [], "pod", 'pod does not exist any more: pod "test-pod" not found'),
}  # fmt: skip


@pytest.mark.parametrize(
    ("bindings", "provisions", "api", "gone", "expected"), CHECKS.values(), ids=CHECKS.keys()
)
def test_check_bindings(bindings: Any, provisions: Any, api: Any, gone: str | None, expected: Any) -> None:
    binding, handle = _env(*api, nodes=[] if gone == "node" else None)
    if gone == "pod":
        handle.deleted.add(POD.uid)
    pod_volumes = _volumes(bindings, provisions)
    if isinstance(expected, str):
        with pytest.raises(VolumeBindingError) as caught:
            binding.check(POD, "node1", pod_volumes)
        assert str(caught.value) == expected
    else:
        assert binding.check(POD, "node1", pod_volumes) is expected


# -- waiting, in virtual time --------------------------------------------------------------------------
async def _drive(
    handle: FakeHandle, coro: Coroutine[Any, Any, None], at: dict[int, Callable[[], None]], limit: int = 700
) -> tuple[float, BaseException | None]:
    """Runs ``coro`` while the virtual clock moves a second at a time; ``at[s]`` runs after s seconds.
    Returns the seconds it took and what it raised."""
    started = handle.clock.now()
    task = asyncio.ensure_future(coro)
    for second in range(limit):
        for _ in range(10):
            await asyncio.sleep(0)
        if task.done():
            break
        if second in at:
            at[second]()
        handle.clock.advance(1)
    for _ in range(10):
        await asyncio.sleep(0)
    assert task.done(), "still waiting"
    return handle.clock.now() - started, task.exception()


def _pv_controller_binds(handle: FakeHandle, claim_name: str, volume_name: str) -> Callable[[], None]:
    def act() -> None:
        store = handle.objects.store(PERSISTENT_VOLUME_CLAIMS)
        current = store.get("testns", claim_name)
        assert current is not None
        raw = {**current.raw, "spec": {**current.raw["spec"], "volumeName": volume_name}}
        raw["metadata"] = {
            **raw["metadata"],
            "resourceVersion": str(int(current.resource_version) + 1),
            "annotations": {**current.annotations, "pv.kubernetes.io/bind-completed": "yes"},
        }
        store.upsert(raw)

    return act


def _bind(binding: PodVolumesBinding, pod_volumes: PodVolumes) -> Coroutine[Any, Any, None]:
    return binding.bind(POD, "node1", pod_volumes)


@pytest.mark.parametrize("timeout", [10, 600])
def test_a_static_binding_succeeds_once_the_pv_controller_binds_the_claim(timeout: int) -> None:
    binding, handle = _env(unbound, pv_node1a, timeout=timeout)
    pod_volumes = _volumes([(unbound, pv_node1a_bound)])
    controller = _pv_controller_binds(handle, "unbound-pvc", "pv-node1a")
    took, raised = _run(_drive(handle, _bind(binding, pod_volumes), {5: controller}))
    assert (took, raised) == (6, None)
    assert handle.client.writes == ["/api/v1/persistentvolumes/pv-node1a"]


def test_a_provisioned_claim_succeeds_once_its_volume_is_made_and_bound() -> None:
    binding, handle = _env(provisioned)
    pod_volumes = _volumes(provisions=[provisioned_selected])

    def provision() -> None:
        made = volume("dynamic-pv", "node1", "1Gi", bound_to=provisioned)
        handle.objects.store(PERSISTENT_VOLUMES).upsert(made)
        _pv_controller_binds(handle, "provisioned-pvc", "dynamic-pv")()

    took, raised = _run(_drive(handle, _bind(binding, pod_volumes), {5: provision}))
    assert (took, raised) == (6, None)
    assert handle.client.writes == ["/api/v1/namespaces/testns/persistentvolumeclaims/provisioned-pvc"]


def test_already_bound_claims_need_no_wait() -> None:
    binding, handle = _env(bound_node1a, pv_node1a_bound)
    took, raised = _run(_drive(handle, _bind(binding, _volumes([(unbound, pv_node1a_bound)])), {}))
    assert (took, raised) == (0, None)


@pytest.mark.parametrize(
    ("timeout", "took"), [(10, 10), (0, 0)], ids=["after bindTimeoutSeconds", "zero: at once"]
)
def test_binding_times_out(timeout: int, took: int) -> None:
    binding, handle = _env(unbound, pv_node1a, timeout=timeout)
    elapsed, raised = _run(_drive(handle, _bind(binding, _volumes([(unbound, pv_node1a_bound)])), {}))
    assert elapsed == took
    assert isinstance(raised, VolumeBindingError)
    assert str(raised) == "binding volumes: context deadline exceeded"
    # written all the same, as upstream
    assert handle.client.writes == ["/api/v1/persistentvolumes/pv-node1a"]


def test_a_pod_deleted_while_waiting_stops_the_wait() -> None:
    binding, handle = _env(unbound, pv_node1a, timeout=600)
    pod_volumes = _volumes([(unbound, pv_node1a_bound)])
    delete = lambda: handle.deleted.add(POD.uid)  # noqa: E731
    took, raised = _run(_drive(handle, _bind(binding, pod_volumes), {5: delete}))
    assert took == 6
    assert str(raised) == 'binding volumes: pod does not exist any more: pod "test-pod" not found'


def test_a_claim_deleted_while_waiting_fails_the_check() -> None:
    binding, handle = _env(unbound, pv_node1a)
    delete = lambda: handle.objects.store(PERSISTENT_VOLUME_CLAIMS).delete("testns", "unbound-pvc")  # noqa: E731
    took, raised = _run(_drive(handle, _bind(binding, _volumes([(unbound, pv_node1a_bound)])), {5: delete}))
    assert took == 6
    assert str(raised) == (
        'binding volumes: failed to check binding: persistentvolumeclaims "testns/unbound-pvc" not found'
    )


def test_a_volume_bound_elsewhere_by_the_pv_controller_fails_the_write() -> None:
    binding, handle = _env(bound_node1a, volume("pv-node1a", "node1", "5G", version="2", bound_to=unbound))
    took, raised = _run(_drive(handle, _bind(binding, _volumes([(unbound, pv_node1a_bound)])), {}))
    assert took == 0
    assert str(raised) == 'Operation cannot be fulfilled on persistentvolumes "pv-node1a"'


def test_a_provisioned_volume_on_another_node_fails_the_check() -> None:
    binding, handle = _env(provisioned_selected, volume("pv-node2", "node2", "1Gi", bound_to=provisioned))
    took, raised = _run(
        _drive(handle, _bind(binding, _volumes(provisions=[provisioned_selected])), {
            3: _pv_controller_binds(handle, "provisioned-pvc", "pv-node2"),
        })
    )  # fmt: skip
    assert took == 4
    assert str(raised) == "binding volumes: " + AFFINITY_MISMATCH.replace("pv-node1a", "pv-node2")


# -- the plugin: reserve, pre-bind, unreserve ----------------------------------------------------------
def _cycle(*items: dict[str, Any], timeout: int = 600) -> tuple[Any, FakeHandle, CycleState]:
    handle = FakeHandle(objects(*items), [node("node1")])
    plugin = new(Args(bind_timeout_seconds=timeout), handle)
    state = CycleState()
    assert plugin.pre_filter(state, POD, []) == (None, None)
    assert plugin.filter(state, POD, node("node1")) is None
    assert plugin.reserve(state, POD, "node1") is None
    return plugin, handle, state


def test_pre_bind_writes_the_reserved_volume_and_waits_for_the_claim() -> None:
    plugin, handle, state = _cycle(unbound, pv_node1a)
    assert plugin.binder.volumes.assumed() == (("", "pv-node1a"),)
    controller = _pv_controller_binds(handle, "unbound-pvc", "pv-node1a")
    took, raised = _run(_drive(handle, plugin.pre_bind(state, POD, "node1"), {2: controller}))
    assert (took, raised) == (3, None)
    stored = handle.objects.of(PERSISTENT_VOLUMES).get("", "pv-node1a")
    assert stored is not None and stored.claim_ref is not None and stored.claim_ref.name == "unbound-pvc"
    assert plugin.binder.volumes.get("", "pv-node1a") is stored  # the store caught up: no assumption left


def test_a_failed_pre_bind_is_undone_by_unreserve() -> None:
    plugin, handle, state = _cycle(unbound, pv_node1a, timeout=5)
    _, raised = _run(_drive(handle, plugin.pre_bind(state, POD, "node1"), {}))
    assert str(raised) == "binding volumes: context deadline exceeded"
    # the write stands (upstream takes nothing back); the cache shows what the API server holds
    plugin.unreserve(state, POD, "node1")
    assert plugin.binder.volumes.assumed() == ()
    assert plugin.binder.volumes.get("", "pv-node1a").claim_ref is not None  # type: ignore[union-attr]


def test_pre_bind_of_a_refused_write_fails_with_the_api_servers_message() -> None:
    plugin, handle, state = _cycle(unbound, pv_node1a)
    handle.client.fail = APIError(403, 'persistentvolumes "pv-node1a" is forbidden: no')
    _, raised = _run(_drive(handle, plugin.pre_bind(state, POD, "node1"), {}))
    assert str(raised) == 'persistentvolumes "pv-node1a" is forbidden: no'
    assert plugin.binder.volumes.assumed() == ()  # not written: dropped from the assume cache at once


def test_pre_bind_of_all_bound_claims_writes_nothing() -> None:
    plugin, handle, state = _cycle(bound_node1a, pv_node1a_bound)
    assert _run(plugin.pre_bind(state, POD, "node1")) is None
    assert handle.client.writes == []
