"""The simulated cluster's volumes: the API server's answers to the volume binder's PUTs, the PV
controller binding a volume to its claim, a provisioner's volume in the selected node's topology, and
the ephemeral volume controller's claims."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    ObjectKind,
)
from kopf_scheduler.simulate.volumes import PROVISIONED, STATIC, SimulatedVolumes, ephemeral_claims

ZONE = "topology.kubernetes.io/zone"
CLAIM_PATH = "/api/v1/namespaces/default/persistentvolumeclaims/data"


def _sim(*objects: tuple[ObjectKind[Any], dict[str, Any]]) -> tuple[SimulatedVolumes, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    sim = SimulatedVolumes(on_object=lambda kind, obj: seen.append((kind.kind, obj["metadata"]["name"])))
    sim.node_labels["n1"] = {"kubernetes.io/hostname": "n1", ZONE: "a"}
    for kind, obj in objects:
        sim.load(kind, copy.deepcopy(obj))
    return sim, seen


CLAIM = {"metadata": {"name": "data"}, "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
         "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
VOLUME = {
    "metadata": {"name": "pv1"},
    "spec": {"capacity": {"storage": "5Gi"}},
    "status": {"phase": "Available"},
}


def _class(provisioner: str = "fast.csi", **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "fast"}, "provisioner": provisioner, **fields}


def test_loaded_objects_get_a_uid_and_a_resource_version() -> None:
    sim, _ = _sim((PERSISTENT_VOLUME_CLAIMS, CLAIM))
    claim = sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data")
    assert claim is not None
    assert claim["metadata"]["namespace"] == "default" and claim["metadata"]["uid"]
    assert claim["metadata"]["resourceVersion"].isdigit()


def test_unknown_objects_and_stale_versions_are_refused_as_the_api_server_does() -> None:
    sim, _ = _sim((PERSISTENT_VOLUMES, VOLUME))
    with pytest.raises(APIError) as caught:
        sim.update("/api/v1/persistentvolumes/nope", {"metadata": {"name": "nope", "resourceVersion": "1"}})
    assert (caught.value.status, caught.value.message) == (404, 'persistentvolumes "nope" not found')
    stale = {**VOLUME, "metadata": {"name": "pv1", "resourceVersion": "999"}}
    with pytest.raises(APIError) as caught:
        sim.update("/api/v1/persistentvolumes/pv1", stale)
    assert caught.value.status == 409
    assert caught.value.message.startswith('Operation cannot be fulfilled on persistentvolumes "pv1"')


def test_a_volume_with_a_claim_ref_is_bound_to_its_claim() -> None:
    sim, seen = _sim((PERSISTENT_VOLUME_CLAIMS, CLAIM), (PERSISTENT_VOLUMES, VOLUME))
    claim = sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data")
    volume = copy.deepcopy(sim.get(PERSISTENT_VOLUMES, "", "pv1"))
    assert claim is not None and volume is not None
    volume["spec"]["claimRef"] = {"namespace": "default", "name": "data", "uid": claim["metadata"]["uid"]}
    stored = sim.update("/api/v1/persistentvolumes/pv1", volume)
    assert stored["status"]["phase"] == "Bound"
    bound = sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data")
    assert bound is not None and bound["spec"]["volumeName"] == "pv1"
    assert bound["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert sim.bound_by_run == {"pv1": STATIC}
    assert seen == [
        ("PersistentVolume", "pv1"),
        ("PersistentVolume", "pv1"),
        ("PersistentVolumeClaim", "data"),
    ]


@pytest.mark.parametrize(
    ("objects", "affinity"),
    [
        ([(STORAGE_CLASSES, _class())], None),
        (
            [(STORAGE_CLASSES, _class()), (CSI_NODES, {"metadata": {"name": "n1"},
              "spec": {"drivers": [{"name": "fast.csi", "nodeID": "n1", "topologyKeys": [ZONE]}]}})],
            [{"key": ZONE, "operator": "In", "values": ["a"]}],
        ),
        (
            [(STORAGE_CLASSES, _class(allowedTopologies=[
                {"matchLabelExpressions": [{"key": "kubernetes.io/hostname", "values": ["n1", "n2"]}]}]))],
            [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}],
        ),
    ],
    ids=["no topology", "CSINode topology keys", "allowedTopologies keys"],
)  # fmt: skip
def test_a_claim_on_a_node_is_provisioned_there(objects: list[Any], affinity: Any) -> None:
    sim, _ = _sim((PERSISTENT_VOLUME_CLAIMS, CLAIM), *objects)
    claim = copy.deepcopy(sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data"))
    assert claim is not None
    claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n1"}
    sim.update(CLAIM_PATH, claim)
    bound = sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data")
    assert bound is not None
    name = bound["spec"]["volumeName"]
    assert name == f"pvc-{claim['metadata']['uid']}" and sim.bound_by_run == {name: PROVISIONED}
    volume = sim.get(PERSISTENT_VOLUMES, "", name)
    assert volume is not None and volume["spec"]["capacity"] == {"storage": "1Gi"}
    terms = (volume["spec"].get("nodeAffinity") or {}).get("required", {}).get("nodeSelectorTerms")
    assert (terms[0]["matchExpressions"] if terms else None) == affinity


def test_nothing_provisions_for_a_class_without_a_provisioner() -> None:
    sim, _ = _sim(
        (PERSISTENT_VOLUME_CLAIMS, CLAIM), (STORAGE_CLASSES, _class("kubernetes.io/no-provisioner"))
    )
    claim = copy.deepcopy(sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data"))
    assert claim is not None
    claim["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": "n1"}
    sim.update(CLAIM_PATH, claim)
    assert sim.bound_by_run == {}
    assert not (sim.get(PERSISTENT_VOLUME_CLAIMS, "default", "data") or {})["spec"].get("volumeName")


def test_ephemeral_claims_are_named_and_owned_as_the_controller_makes_them() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"volumes": [
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": {"a": "b"}},
                                                                      "spec": {"storageClassName": "fast"}}}},
            {"name": "other", "emptyDir": {}},
        ]},
    }  # fmt: skip
    [claim] = ephemeral_claims(pod)
    assert claim["metadata"]["name"] == "p-scratch" and claim["metadata"]["namespace"] == "ns"
    assert claim["metadata"]["labels"] == {"a": "b"}
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "u"
    assert claim["metadata"]["ownerReferences"][0]["controller"] is True
    assert claim["spec"] == {"storageClassName": "fast"}
