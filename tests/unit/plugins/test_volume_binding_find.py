"""The volume binder's per-node decision (``FindPodVolumes``), upstream's ``binder_test.go`` cases:
``TestFindPodVolumesWithoutProvisioning``, ``...WithProvisioning`` and ``TestCapacity``, each run without
a CSIDriver and with one that does or does not track capacity, as there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from _volume_binding_kit import (
    IMMEDIATE,
    NS,
    TOPO_MISMATCH,
    WAIT_PROVISIONER,
    capacity,
    claim,
    csi_driver,
    node,
    objects,
    pod_with_claims,
    volume,
)

from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
)
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, VolumeBinder
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError
from kopf_scheduler.testing import make_pod

unbound = claim("unbound-pvc", "1G")
unbound2 = claim("unbound-pvc2", "5G")
prebound = claim("prebound-pvc", "1G", volume="pv-node1a")
bound = claim("bound-pvc", "1G", volume="pv-bound", bound=True)
immediate_unbound = claim("immediate-unbound-pvc", storage_class=IMMEDIATE)
immediate_bound = claim(
    "immediate-bound-pvc", storage_class=IMMEDIATE, volume="pv-bound-immediate", bound=True
)
provisioned = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER)
no_provisioner = claim("no-provisioner-pvc", "1Gi")
topo_mismatch = claim("topo-mismatch-pvc", "1Gi", storage_class=TOPO_MISMATCH)
selected_node = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER, selected_node="node1")

pv_node1a = volume("pv-node1a", "node1", "5G")
pv_node1b = volume("pv-node1b", "node1", "10G")
pv_node2 = volume("pv-node2", "node2", "1G")
pv_bound = volume("pv-bound", "node1", "1G", bound_to=bound)
pv_bound_immediate = volume("pv-bound-immediate", "node1", bound_to=immediate_bound, storage_class=IMMEDIATE)
pv_bound_immediate_node2 = volume(
    "pv-bound-immediate", "node2", bound_to=immediate_bound, storage_class=IMMEDIATE
)

EPHEMERAL_POD = PodInfo(
    make_pod()
    .name("test-pod")
    .namespace(NS)
    .uid("pod-uid")
    .set("spec.volumes", [{"name": "test-volume", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}])
    .obj()
)


def _ephemeral_claim(owned: bool) -> dict[str, Any]:
    body = claim("test-pod-test-volume", volume="pv-bound", bound=True, storage_class=IMMEDIATE)
    if owned:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": "test-pod", "uid": "pod-uid", "controller": True}
        ]
    return body


pv_bound_generic = volume("pv-bound", "node1", bound_to=_ephemeral_claim(True))

FAIL = "error"  # the binder raises (upstream: shouldFail)


def find(
    items: list[Mapping[str, Any]], pod: PodInfo, driver: Mapping[str, Any] | None = None
) -> tuple[PodVolumes, list[str]]:
    """``findPodVolumes`` of ``binder_test.go``: claims sorted, immediate ones an error, then node1."""
    binder = VolumeBinder(objects(*items, *([driver] if driver else [])))
    claims = binder.pod_volume_claims(pod)
    if claims.immediate:
        raise VolumeBindingError("pod has unbound immediate PersistentVolumeClaims")
    target = node("node1")
    return binder.find_pod_volumes(pod, claims, target.name, target.labels)


def _pairs(found: PodVolumes) -> list[tuple[str, str]]:
    return [(b.claim.name, b.volume.name) for b in found.static_bindings]


DRIVERS = {
    "no CSIDriver": None,
    "CSIDriver with capacity tracking": csi_driver(storage_capacity=True),
    "CSIDriver without capacity tracking": csi_driver(storage_capacity=False),
}

# (pod claims, other claims in the store (None: the pod's), volumes, expected bindings, reasons or FAIL)
WITHOUT_PROVISIONING: dict[str, tuple[Any, ...]] = {
    "no-pvcs": ([], None, [], [], []),
    "pvc-not-found": ([bound], [], [], [], FAIL),
    "bound-pvc": ([bound], None, [pv_bound], [], []),
    "bound-pvc,pv-not-exists": ([bound], None, [], [], [ERR_REASON_PV_NOT_EXIST]),
    "prebound-pvc": ([prebound], None, [volume("pv-node1a", "node1", "5G", bound_to=unbound)], [], FAIL),
    "unbound-pvc,pv-same-node": (
        [unbound], None, [pv_node2, pv_node1a, pv_node1b], [("unbound-pvc", "pv-node1a")], []
    ),
    "unbound-pvc,pv-different-node": ([unbound], None, [pv_node2], [], [ERR_REASON_BIND_CONFLICT]),
    "two-unbound-pvcs": (
        [unbound, unbound2], None, [pv_node1a, pv_node1b],
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], [],
    ),
    "two-unbound-pvcs,order-by-size": (
        [unbound2, unbound], None, [pv_node1a, pv_node1b],
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")], [],
    ),
    "two-unbound-pvcs,partial-match": (
        [unbound, unbound2], None, [pv_node1a], [("unbound-pvc", "pv-node1a")], [ERR_REASON_BIND_CONFLICT]
    ),
    "one-bound,one-unbound": (
        [unbound, bound], None, [pv_bound, pv_node1a], [("unbound-pvc", "pv-node1a")], []
    ),
    "one-bound,one-unbound,no-match": (
        [unbound, bound], None, [pv_bound, pv_node2], [], [ERR_REASON_BIND_CONFLICT]
    ),
    "one-prebound,one-unbound": ([unbound, prebound], None, [pv_node1a, pv_node1b], [], FAIL),
    "immediate-bound-pvc": ([immediate_bound], None, [pv_bound_immediate], [], []),
    "immediate-bound-pvc-wrong-node": (
        [immediate_bound], None, [pv_bound_immediate_node2], [], [ERR_REASON_NODE_CONFLICT]
    ),
    "immediate-unbound-pvc": ([immediate_unbound], None, [], [], FAIL),
    "immediate-unbound-pvc,delayed-mode-bound": ([immediate_unbound, bound], None, [pv_bound], [], FAIL),
    "immediate-unbound-pvc,delayed-mode-unbound": ([immediate_unbound, unbound], None, [], [], FAIL),
}  # fmt: skip


@pytest.mark.parametrize("driver", DRIVERS.values(), ids=DRIVERS.keys())
@pytest.mark.parametrize(
    ("pod_claims", "stored", "volumes", "bindings", "reasons"),
    WITHOUT_PROVISIONING.values(),
    ids=WITHOUT_PROVISIONING.keys(),
)
def test_find_pod_volumes_without_provisioning(
    driver: Any, pod_claims: list[Any], stored: Any, volumes: list[Any], bindings: Any, reasons: Any
) -> None:
    pod = pod_with_claims(*(c["metadata"]["name"] for c in pod_claims))
    items = [*(pod_claims if stored is None else stored), *volumes]
    if reasons == FAIL:
        with pytest.raises(VolumeBindingError):
            find(items, pod, driver)
        return
    found, got = find(items, pod, driver)
    assert (got, _pairs(found)) == (reasons, bindings)


@pytest.mark.parametrize("driver", DRIVERS.values(), ids=DRIVERS.keys())
@pytest.mark.parametrize(
    ("stored", "fails"),
    [([], True), ([_ephemeral_claim(True)], False), ([_ephemeral_claim(False)], True)],
    ids=["generic-ephemeral,no-pvc", "generic-ephemeral,with-pvc", "generic-ephemeral,wrong-pvc"],
)
def test_generic_ephemeral_volumes(driver: Any, stored: list[Any], fails: bool) -> None:
    items = [*stored, pv_bound_generic]
    if fails:
        with pytest.raises(VolumeBindingError):
            find(items, EPHEMERAL_POD, driver)
        return
    assert find(items, EPHEMERAL_POD, driver)[1] == []


# (pod claims, volumes, expected bindings, expected provisions, reasons or FAIL)
WITH_PROVISIONING: dict[str, tuple[Any, ...]] = {
    "one-provisioned": ([provisioned], [], [], ["provisioned-pvc"], []),
    "two-unbound-pvcs,one-matched,one-provisioned": (
        [unbound, provisioned],
        [pv_node1a],
        [("unbound-pvc", "pv-node1a")],
        ["provisioned-pvc"],
        [],
    ),
    "one-bound,one-provisioned": ([bound, provisioned], [pv_bound], [], ["provisioned-pvc"], []),
    "one-binding,one-selected-node": ([bound, selected_node], [pv_bound], [], ["provisioned-pvc"], []),
    "immediate-unbound-pvc": ([immediate_unbound], [], [], [], FAIL),
    "one-immediate-bound,one-provisioned": (
        [immediate_bound, provisioned],
        [pv_bound_immediate],
        [],
        ["provisioned-pvc"],
        [],
    ),
    "invalid-provisioner": ([no_provisioner], [], [], [], [ERR_REASON_BIND_CONFLICT]),
    "volume-topology-unsatisfied": ([topo_mismatch], [], [], [], [ERR_REASON_BIND_CONFLICT]),
}


@pytest.mark.parametrize("driver", DRIVERS.values(), ids=DRIVERS.keys())
@pytest.mark.parametrize(
    ("pod_claims", "volumes", "bindings", "provisions", "reasons"),
    WITH_PROVISIONING.values(),
    ids=WITH_PROVISIONING.keys(),
)
def test_find_pod_volumes_with_provisioning(
    driver: Any, pod_claims: list[Any], volumes: list[Any], bindings: Any, provisions: Any, reasons: Any
) -> None:
    pod = pod_with_claims(*(c["metadata"]["name"] for c in pod_claims))
    items = [*pod_claims, *volumes]
    if reasons == FAIL:
        with pytest.raises(VolumeBindingError):
            find(items, pod, driver)
        return
    found, got = find(items, pod, driver)
    tracked = driver is not None and driver["spec"]["storageCapacity"]
    if tracked and provisions:  # upstream's needsCapacity: no CSIStorageCapacity, no room
        reasons, provisions = [*reasons, ERR_REASON_NOT_ENOUGH_SPACE], []
    assert (got, _pairs(found), [p.claim.name for p in found.dynamic_provisions]) == (
        reasons,
        bindings,
        provisions,
    )


def test_a_claim_provisioned_for_another_node_fails_fast_with_the_bound_claims_verdict() -> None:
    other = claim("provisioned-pvc", "1Gi", storage_class=WAIT_PROVISIONER, selected_node="node2")
    wrong_node_pv = volume("pv-bound", "node2", "1G", bound_to=bound)
    found, reasons = find([bound, other, wrong_node_pv], pod_with_claims("bound-pvc", "provisioned-pvc"))
    assert reasons == [ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT]
    assert found.dynamic_provisions == []


NO_ROOM = [ERR_REASON_NOT_ENOUGH_SPACE]

# TestCapacity: (capacities, the capacity chosen (None: none needed or found), reasons with tracking)
CAPACITY: dict[str, tuple[Any, ...]] = {
    "network-attached": ([capacity("net", WAIT_PROVISIONER, None, "1Gi")], "net", []),
    "local-storage": ([capacity("node1", WAIT_PROVISIONER, "node1", "1Gi")], "node1", []),
    "multiple": (
        [
            capacity("net", WAIT_PROVISIONER, None, "1Gi", topology=False),
            capacity("node2", WAIT_PROVISIONER, "node2", "1Gi"),
            capacity("node1", WAIT_PROVISIONER, "node1", "1Gi"),
        ],
        "node1",
        [],
    ),
    "no-storage": ([], None, NO_ROOM),
    "wrong-node": ([capacity("c", WAIT_PROVISIONER, "node2", "1Gi")], None, NO_ROOM),
    "wrong-storage-class": ([capacity("c", "waitClass", "node1", "1Gi")], None, NO_ROOM),
    "insufficient-storage": ([capacity("c", WAIT_PROVISIONER, "node1", "1Mi")], None, NO_ROOM),
    "insufficient-volume-size": (
        [capacity("c", WAIT_PROVISIONER, "node1", "1Gi", "1Mi")], None, NO_ROOM
    ),
    "zero-storage": ([capacity("c", WAIT_PROVISIONER, "node1", "0Mi")], None, NO_ROOM),
    "zero-volume-size": ([capacity("c", WAIT_PROVISIONER, "node1", "", "0Mi")], None, NO_ROOM),
    "nil-storage": ([capacity("c", WAIT_PROVISIONER, "node1")], None, NO_ROOM),
}  # fmt: skip


@pytest.mark.parametrize("opt_in", [True, False], ids=["CSIDriver.StorageCapacity=true", "false"])
@pytest.mark.parametrize(("capacities", "chosen", "reasons"), CAPACITY.values(), ids=CAPACITY.keys())
def test_capacity(opt_in: bool, capacities: list[Any], chosen: str | None, reasons: list[str]) -> None:
    found, got = find(
        [provisioned, *capacities], pod_with_claims("provisioned-pvc"), csi_driver(storage_capacity=opt_in)
    )
    if not opt_in:  # the driver does not track capacity: nothing is checked, nothing recorded
        assert got == []
        assert [p.capacity for p in found.dynamic_provisions] == [None]
        return
    assert got == reasons
    if not reasons:
        assert [p.capacity.name if p.capacity else None for p in found.dynamic_provisions] == [chosen]


def test_a_claim_without_a_storage_request_needs_no_capacity() -> None:
    no_request = claim("provisioned-pvc", storage_class=WAIT_PROVISIONER)
    del no_request["spec"]["resources"]
    found, reasons = find([no_request], pod_with_claims("provisioned-pvc"), csi_driver())
    assert (reasons, [p.capacity for p in found.dynamic_provisions]) == ([], [None])


def test_volumes_bound_to_other_claims_are_left_out_once_per_pod() -> None:
    """A volume whose claimRef names another claim is no candidate on any node: pre-filter leaves it out
    of the class's volumes, so the filter does not look at it again for every node. Volumes that are
    available, or bound to the pod's own claim (its uid or none), stay; the
    bindings found are those found with every volume."""
    other = claim("other-pvc", "1G", uid="other-uid")
    mine_by_name = volume("pv-mine-by-name", "node1", "1G", bound_to=claim("unbound-pvc", uid=""))
    taken = [volume(f"pv-taken-{i}", "node1", "1G", bound_to=other, phase="Bound") for i in range(3)]
    items = [unbound, other, *taken, pv_node1b, mine_by_name, pv_node2]
    binder = VolumeBinder(objects(*items))
    pod = pod_with_claims("unbound-pvc")
    claims = binder.pod_volume_claims(pod)
    kept = sorted(v.name for v in claims.volumes_by_class["waitClass"])
    assert kept == ["pv-mine-by-name", "pv-node1b", "pv-node2"]
    target = node("node1")
    found, reasons = binder.find_pod_volumes(pod, claims, target.name, target.labels)
    assert (reasons, _pairs(found)) == ([], [("unbound-pvc", "pv-mine-by-name")])
