"""The binder's assume cache over the scheduler's stores (upstream's ``passive_assume_cache_test.go``) and
reserve's assume and revert (``TestAssumePodVolumes``, ``TestRevertAssumedPodVolumes``)."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_binding_kit import WAIT_PROVISIONER, claim, objects, pod_with_claims, volume

from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES
from kopf_scheduler.framework.objects.storage import parse_persistent_volume, parse_persistent_volume_claim
from kopf_scheduler.plugins.volume_binding.assume_cache import AssumeError, ClaimCache, VolumeCache
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, Provision, StaticBinding, VolumeBinder
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError

SELECTED = "volume.kubernetes.io/selected-node"


def _cache(*pvs: dict[str, Any]) -> tuple[VolumeCache, Any]:
    stores = objects(*pvs)
    return VolumeCache(stores.of(PERSISTENT_VOLUMES)), stores.store(PERSISTENT_VOLUMES)


@pytest.mark.parametrize(
    ("stored", "assumed", "error"),
    [
        ("5", "5", None),
        ("5", "6", '"pv1" is out of sync (stored: 5, assume: 6)'),
        (None, "5", 'persistentvolumes "pv1" not found'),
        ("5", "4", '"pv1" is out of sync (stored: 5, assume: 4)'),
        ("5", "a", '"pv1" is out of sync (stored: 5, assume: a)'),
        ("a", "5", '"pv1" is out of sync (stored: a, assume: 5)'),
    ],
    ids=[
        "success-same-version",
        "fail-new-higher-version",
        "fail-old-not-found",
        "fail-new-lower-version",
        "fail-new-bad-version",
        "fail-old-bad-version",
    ],
)
def test_assume(stored: str | None, assumed: str, error: str | None) -> None:
    cache, _ = _cache(*([volume("pv1", version=stored)] if stored else []))
    new = parse_persistent_volume(volume("pv1", "node1", version=assumed))
    if error is not None:
        with pytest.raises(AssumeError) as raised:
            cache.assume(new)
        assert str(raised.value) == error
        assert cache.assumed() == ()
        return
    cache.assume(new)
    assert cache.get("", "pv1") is new
    assert cache.get_api("", "pv1") is not new


def test_a_claim_is_named_by_its_namespace_and_name() -> None:
    stores = objects(claim("pvc1", version="5"))
    claims = ClaimCache(stores.of(PERSISTENT_VOLUME_CLAIMS))
    with pytest.raises(AssumeError) as raised:
        claims.assume(parse_persistent_volume_claim(claim("pvc1", version="6")))
    assert str(raised.value) == '"testns/pvc1" is out of sync (stored: 5, assume: 6)'
    with pytest.raises(AssumeError) as raised:
        claims.assume(parse_persistent_volume_claim(claim("pvc2", version="5")))
    assert str(raised.value) == 'persistentvolumeclaims "testns/pvc2" not found'


def test_restore() -> None:
    """Upstream's ``TestRestore``: restoring what is not assumed changes nothing."""
    cache, store = _cache(volume("pv1", version="5"))
    old = store.get("", "pv1")
    cache.restore(parse_persistent_volume(volume("nothing")))
    cache.restore(old)
    assert cache.get("", "pv1") is old
    new = parse_persistent_volume(volume("pv1", "node1", version="5"))
    cache.assume(new)
    assert cache.get("", "pv1") is new
    cache.restore(new)
    assert cache.get("", "pv1") is old
    cache.restore(new)
    assert cache.assumed() == ()


def test_concurrent_assume() -> None:
    """Upstream's ``TestConcurrentAssume``: restoring an outdated assumption keeps the newer one."""
    cache, store = _cache(volume("pv1", version="5"))
    first = parse_persistent_volume(volume("pv1", "node1", version="5"))
    cache.assume(first)
    assert cache.get("", "pv1") is first
    store.upsert(volume("pv1", version="7"))  # changed by someone else
    second = parse_persistent_volume(volume("pv1", "node2", version="7"))
    cache.assume(second)
    cache.restore(first)  # the first one's write failed with a conflict
    assert cache.get("", "pv1") is second


@pytest.mark.parametrize(
    ("api_version", "assumption_stands"),
    [("1", True), ("2", False), ("0", False)],
    ids=["same-version-keeps-the-assumption", "newer-version-replaces-it", "any-other-version-replaces-it"],
)
def test_the_store_catching_up_replaces_an_assumption(api_version: str, assumption_stands: bool) -> None:
    cache, store = _cache(volume("pv1"))
    assumed = parse_persistent_volume(volume("pv1", "node1"))
    cache.assume(assumed)
    store.upsert(volume("pv1", version=api_version, phase="Bound"))
    assert (cache.get("", "pv1") is assumed) == assumption_stands
    assert cache.get_api("", "pv1") is store.get("", "pv1")
    assert bool(cache.assumed()) == assumption_stands


def test_a_deleted_object_takes_its_assumption_with_it() -> None:
    cache, store = _cache(volume("pv1"))
    cache.assume(parse_persistent_volume(volume("pv1", "node1")))
    store.delete("", "pv1")
    assert cache.get("", "pv1") is None
    assert cache.list() == []


def test_volumes_are_listed_by_class_with_assumptions_in_place() -> None:
    """The index is the stored objects' (upstream's ``ByIndex``): an assumed value is listed under the
    class of the stored object."""
    cache, store = _cache(
        volume("a", storage_class="gold"),
        volume("b", storage_class="silver"),
        volume("c", storage_class="gold"),
    )
    assert [pv.name for pv in cache.list_by_class("gold")] == ["a", "c"]
    moved = parse_persistent_volume(volume("c", "node1", storage_class="silver"))
    cache.assume(moved)
    assert [pv.name for pv in cache.list_by_class("gold")] == ["a", "c"]
    assert cache.list_by_class("gold")[1] is moved
    assert [pv.name for pv in cache.list_by_class("silver")] == ["b"]
    store.upsert(volume("d", storage_class="gold"))
    assert [pv.name for pv in cache.list_by_class("gold")] == ["a", "c", "d"]
    beta = volume("e", storage_class="")
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": "gold"}
    store.upsert(beta)
    assert [pv.name for pv in cache.list_by_class("gold")] == ["a", "c", "d", "e"]
    assert cache.list_by_class("bronze") == []


unbound = claim("unbound-pvc", "1G")
unbound2 = claim("unbound-pvc2", "5G")
provisioned = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER)
pv_node1a = volume("pv-node1a", "node1", "5G")
pv_node1b = volume("pv-node1b", "node1", "10G")
pv_node1a_bound = volume("pv-node1a", "node1", "5G", bound_to=unbound)


def _binding(pvc: dict[str, Any], pv: dict[str, Any]) -> StaticBinding:
    return StaticBinding(parse_persistent_volume_claim(pvc), parse_persistent_volume(pv))


def test_assume_all_bound() -> None:
    bound = claim("bound-pvc", volume="pv-bound", bound=True)
    binder = VolumeBinder(objects(bound, volume("pv-bound", "node1", bound_to=bound)))
    assert binder.all_bound(pod_with_claims("bound-pvc"))


@pytest.mark.parametrize(
    ("claims", "pvs", "bindings", "provisions"),
    [
        ([unbound], [pv_node1a], [(unbound, pv_node1a)], []),
        ([unbound, unbound2], [pv_node1a, pv_node1b], [(unbound, pv_node1a), (unbound2, pv_node1b)], []),
        ([unbound], [pv_node1a_bound], [(unbound, pv_node1a_bound)], []),
        ([unbound, provisioned], [pv_node1a], [(unbound, pv_node1a)], [provisioned]),
    ],
    ids=["one-binding", "two-bindings", "pv-already-bound", "one-binding, one-pvc-provisioned"],
)
def test_assume_pod_volumes(
    claims: list[Any], pvs: list[Any], bindings: list[Any], provisions: list[Any]
) -> None:
    binder = VolumeBinder(objects(*claims, *pvs))
    pod = pod_with_claims(*(c["metadata"]["name"] for c in claims))
    pod_volumes = PodVolumes(
        [_binding(c, v) for c, v in bindings],
        [Provision(parse_persistent_volume_claim(c)) for c in provisions],
    )
    assert not binder.all_bound(pod)
    binder.assume_pod_volumes(pod_volumes, "node1")
    for (pvc, pv), assumed in zip(bindings, pod_volumes.static_bindings, strict=True):
        shown = binder.volumes.get("", pv["metadata"]["name"])
        assert shown is not None and shown.claim_ref is not None
        assert (shown.claim_ref.namespace, shown.claim_ref.name, shown.claim_ref.uid) == (
            "testns", pvc["metadata"]["name"], "pvc-uid",
        )  # fmt: skip
        assert shown.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
        assert shown.raw["spec"]["claimRef"]["resourceVersion"] == "1"
        assert assumed.volume.name == shown.name
    for pvc in provisions:
        shown_claim = binder.claims.get("testns", pvc["metadata"]["name"])
        assert shown_claim is not None and shown_claim.annotations[SELECTED] == "node1"
        assert binder.claims.get_api("testns", pvc["metadata"]["name"]).annotations == {}  # type: ignore[union-attr]
    assert binder.volumes.get_api("", "pv-node1a").raw == next(  # type: ignore[union-attr]
        pv for pv in pvs if pv["metadata"]["name"] == "pv-node1a"
    )


@pytest.mark.parametrize(
    ("bindings", "provisions"),
    [
        ([(unbound, pv_node1a), (unbound2, pv_node1b)], []),
        ([(unbound, pv_node1a)], [claim("provisioned-pvc2", "1Gi", storage_class=WAIT_PROVISIONER)]),
    ],
    ids=["tmpupdate-failed", "one-binding, one-provision-tmpupdate-failed"],
)
def test_a_failed_assume_undoes_what_it_assumed(bindings: list[Any], provisions: list[Any]) -> None:
    # the second volume is not in the store / the store has a newer version of the claim
    newer = claim("provisioned-pvc2", "1Gi", storage_class=WAIT_PROVISIONER, version="2")
    binder = VolumeBinder(objects(unbound, newer, pv_node1a))
    pod_volumes = PodVolumes(
        [_binding(c, v) for c, v in bindings],
        [Provision(parse_persistent_volume_claim(c)) for c in provisions],
    )
    with pytest.raises(VolumeBindingError):
        binder.assume_pod_volumes(pod_volumes, "node1")
    assert binder.volumes.assumed() == () and binder.claims.assumed() == ()
    assert binder.volumes.get("", "pv-node1a").claim_ref is None  # type: ignore[union-attr]


def test_revert_assumed_pod_volumes() -> None:
    binder = VolumeBinder(objects(unbound, provisioned, pv_node1a))
    pod_volumes = PodVolumes(
        [_binding(unbound, pv_node1a)], [Provision(parse_persistent_volume_claim(provisioned))]
    )
    binder.assume_pod_volumes(pod_volumes, "node1")
    assert binder.volumes.assumed() == (("", "pv-node1a"),)
    assert binder.claims.assumed() == (("testns", "provisioned-pvc"),)
    binder.revert(pod_volumes)
    assert binder.volumes.assumed() == () and binder.claims.assumed() == ()
    assert binder.volumes.get("", "pv-node1a") is binder.objects.of(PERSISTENT_VOLUMES).get("", "pv-node1a")
    assert binder.claims.get("testns", "provisioned-pvc") is binder.objects.of(PERSISTENT_VOLUME_CLAIMS).get(
        "testns", "provisioned-pvc"
    )


def test_an_assumed_volume_is_not_offered_to_another_claim() -> None:
    other = claim("other-pvc", "1G", uid="other-uid")
    binder = VolumeBinder(objects(unbound, other, pv_node1a))
    binder.assume_pod_volumes(PodVolumes([_binding(unbound, pv_node1a)]), "node1")
    pod = pod_with_claims("other-pvc", name="other", uid="other-pod")
    claims = binder.pod_volume_claims(pod)
    found, reasons = binder.find_pod_volumes(pod, claims, "node1", {"nodeKey": "node1"})
    assert reasons == ["node(s) didn't find available persistent volumes to bind"]
    assert found.static_bindings == []
