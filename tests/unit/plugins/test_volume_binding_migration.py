"""VolumeBinding with in-tree volumes migrated to CSI (``tryTranslatePVToCSI``): upstream's
``TestFindPodVolumesWithCSIMigration`` and ``TestCheckBindingsWithCSIMigration`` (``binder_test.go``,
v1.37.2), the node-affinity translation of csi-translation-lib (``TestTranslateTopologyFromInTreeToCSI``,
``TestAddTopology``), and untranslatable volumes failing the filter with upstream's message."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from _volume_binding_kit import (
    WAIT,
    WAIT_PROVISIONER,
    FakeHandle,
    claim,
    objects,
    pod_with_claims,
    volume,
)

from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import CSI_NODES
from kopf_scheduler.framework.objects.storage import parse_persistent_volume, parse_persistent_volume_claim
from kopf_scheduler.framework.selectors import NodeSelector
from kopf_scheduler.framework.status import error, unresolvable
from kopf_scheduler.plugins._csi_translation import translate_topology, translated_affinity
from kopf_scheduler.plugins.volume_binding import ERR_REASON_NODE_CONFLICT, Args, VolumeBinding
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, Provision, StaticBinding, VolumeBinder
from kopf_scheduler.plugins.volume_binding.binding import PodVolumesBinding
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError
from kopf_scheduler.testing import make_node
from kopf_scheduler.testing.framework import make_framework

GCE_PD = "kubernetes.io/gce-pd"
GKE_ZONE = "topology.gke.io/zone"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
#: upstream's zone1Labels
ZONE1_LABELS = {BETA_ZONE: "us-east-1", BETA_REGION: "us-east-1a"}

unbound = claim("unbound-pvc", "1G")
bound_migration = claim("pvc-migration-bound", "1G", volume="pv-migration-bound", bound=True)
provisioned_migration_bound = claim(
    "pvc-migration-provisioned",
    "1Gi",
    storage_class=WAIT_PROVISIONER,
    volume="pv-migration-bound",
    bound=True,
)


def migration_volume(bound_to: dict[str, Any], migrated: bool = True, **source: Any) -> dict[str, Any]:
    """``makeTestPVForCSIMigration``: no node affinity (the translation writes it), zone1's labels, a GCE
    PD (or, not migrated, an RBD image)."""
    body = volume("pv-migration-bound", "", "1G", bound_to=bound_to, storage_class=WAIT)
    body["metadata"]["labels"] = dict(ZONE1_LABELS)
    if not source and migrated:
        source = {"gcePersistentDisk": {"pdName": "test-disk", "fsType": "ext4"}}
    elif not source:
        source = {"rbd": {"image": "test-disk", "monitors": ["m"]}}
    body["spec"].update(source)
    return body


def csi_node(migrated: str) -> dict[str, Any]:
    """``makeCSINode``: node1 with the migrated-plugins annotation."""
    annotations = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return {
        "kind": "CSINode",
        "metadata": {"name": "node1", "annotations": annotations},
        "spec": {"drivers": []},
    }


def node1(zone: str) -> NodeInfo:
    """``node1Zone1`` / ``node1Zone2``: only the GCE PD driver's zone label."""
    return NodeInfo(make_node().name("node1").label(GKE_ZONE, zone).obj())


def stores(*items: dict[str, Any], csi: str | None = None) -> ClusterObjects:
    found = objects(*items)
    if csi is not None:
        found.store(CSI_NODES).upsert(csi_node(csi))
    return found


# -- TestFindPodVolumesWithCSIMigration ----------------------------------------------------------------
FIND = {
    "pvc-bound": ("us-east-1", GCE_PD, []),
    "pvc-bound,csinode-not-migrated": ("us-east-1", "", []),
    "pvc-bound,missing-csinode": ("us-east-1", None, []),
    "pvc-bound,node-different-zone": ("us-east-2", GCE_PD, [ERR_REASON_NODE_CONFLICT]),
}


@pytest.mark.parametrize(("zone", "migrated", "reasons"), FIND.values(), ids=FIND.keys())
def test_find_pod_volumes_with_csi_migration(zone: str, migrated: str | None, reasons: list[str]) -> None:
    binder = VolumeBinder(stores(bound_migration, migration_volume(bound_migration), csi=migrated))
    pod = pod_with_claims("pvc-migration-bound")
    claims = binder.pod_volume_claims(pod)
    target = node1(zone)
    assert binder.find_pod_volumes(pod, claims, target.name, target.labels) == (PodVolumes(), reasons)


def _filter_chain(items: list[dict[str, Any]], target: NodeInfo, migrated: str | None) -> Any:
    handle = FakeHandle(stores(*items, csi=migrated), [target])
    plugin = VolumeBinding(Args(), handle)
    framework = make_framework(pre_filter=[plugin], filter=[plugin])
    state, pod = CycleState(), pod_with_claims("pvc-migration-bound")
    _, pre, _ = framework.run_pre_filter(state, pod, [target])
    assert pre is None
    return framework.run_filter_chain(state, pod, target), framework, state, pod, handle


@pytest.mark.parametrize(("zone", "migrated", "reasons"), FIND.values(), ids=FIND.keys())
def test_the_filter_with_csi_migration(zone: str, migrated: str | None, reasons: list[str]) -> None:
    items = [bound_migration, migration_volume(bound_migration)]
    status, framework, state, pod, handle = _filter_chain(items, node1(zone), migrated)
    assert status == (unresolvable(*reasons, plugin="VolumeBinding") if reasons else None)
    outcome = framework.find_feasible(state, pod, handle.snapshot(), np.arange(1), 1)  # vectorised
    assert outcome.feasible.tolist() == ([] if reasons else [0])
    assert outcome.statuses.get("node1") == status


UNTRANSLATABLE = {
    "azure-disk-of-kind-shared": (
        {"azureDisk": {"diskName": "d", "diskURI": "uri", "kind": "Shared"}},
        "kubernetes.io/azure-disk",
        "could not translate pv: kind(Shared) is not supported in csi migration",
    ),
    "ebs-volume-id": (
        {"awsElasticBlockStore": {"volumeID": "aws://zone/disk-1"}},
        "kubernetes.io/aws-ebs",
        "could not translate pv: failed to translate Kubernetes ID to EBS Volume ID "
        "Invalid format for AWS volume (aws://zone/disk-1)",
    ),
}


@pytest.mark.parametrize(("source", "plugin", "message"), UNTRANSLATABLE.values(), ids=UNTRANSLATABLE.keys())
def test_a_volume_that_cannot_be_translated_fails_the_filter_where_migrated(
    source: dict[str, Any], plugin: str, message: str
) -> None:
    items = [bound_migration, migration_volume(bound_migration, **source)]
    status, framework, state, pod, handle = _filter_chain(items, node1("us-east-1"), plugin)
    expected = error(f'running "VolumeBinding" filter plugin: {message}', plugin="VolumeBinding")
    assert status == expected
    outcome = framework.find_feasible(state, pod, handle.snapshot(), np.arange(1), 1)
    assert outcome.statuses.error == expected  # the vectorised filter fails the attempt the same way
    status, *_ = _filter_chain(items, node1("us-east-1"), "kubernetes.io/gce-pd")
    assert status is None  # not migrated on the node: the volume is checked as written


# -- TestCheckBindingsWithCSIMigration -----------------------------------------------------------------
def _binding(items: list[dict[str, Any]], zone: str, migrated: str | None) -> PodVolumesBinding:
    handle = FakeHandle(stores(*items, csi=migrated), [node1(zone)])
    plugin = VolumeBinding(Args(), handle)

    def labels(name: str) -> Any:
        found = handle.snapshot().get(name)
        return None if found is None else found.labels

    return PodVolumesBinding(plugin.binder, handle.client, handle.clock, 10, labels, handle.pod_exists)


def _selected(body: dict[str, Any]) -> dict[str, Any]:
    """``addProvisionAnn``."""
    body = copy.deepcopy(body)
    body["metadata"].setdefault("annotations", {})["volume.kubernetes.io/selected-node"] = "node1"
    return body


AFFINITY_MISMATCH = (
    'pv "pv-migration-bound" node affinity doesn\'t match node "node1": no matching NodeSelectorTerms'
)
MIGRATION_TO_UNBOUND = migration_volume(unbound)
NOT_MIGRATED_TO_UNBOUND = migration_volume(unbound, migrated=False)
CHECKS = {
    "provisioning-pvc-bound": ([], [_selected(provisioned_migration_bound)], [migration_volume(bound_migration), _selected(provisioned_migration_bound)], "us-east-1", GCE_PD, True),  # noqa: E501
    "binding-node-pv-same-zone": ([(unbound, MIGRATION_TO_UNBOUND)], [], [MIGRATION_TO_UNBOUND, unbound], "us-east-1", GCE_PD, False),  # noqa: E501
    "binding-without-csinode": ([(unbound, MIGRATION_TO_UNBOUND)], [], [MIGRATION_TO_UNBOUND, unbound], "us-east-1", None, False),  # noqa: E501
    "binding-non-migrated-plugin": ([(unbound, MIGRATION_TO_UNBOUND)], [], [MIGRATION_TO_UNBOUND, unbound], "us-east-1", "", False),  # noqa: E501
    "binding-node-pv-in-different-zones": ([(unbound, MIGRATION_TO_UNBOUND)], [], [MIGRATION_TO_UNBOUND, unbound], "us-east-2", GCE_PD, AFFINITY_MISMATCH),  # noqa: E501
    "binding-node-pv-different-zones-migration-off": ([(unbound, NOT_MIGRATED_TO_UNBOUND)], [], [NOT_MIGRATED_TO_UNBOUND, unbound], "us-east-2", GCE_PD, False),  # noqa: E501
}  # fmt: skip


@pytest.mark.parametrize(
    ("bindings", "provisions", "api", "zone", "migrated", "expected"), CHECKS.values(), ids=CHECKS.keys()
)
def test_check_bindings_with_csi_migration(
    bindings: Any, provisions: Any, api: Any, zone: str, migrated: str | None, expected: Any
) -> None:
    binding = _binding(api, zone, migrated)
    pod_volumes = PodVolumes(
        [StaticBinding(parse_persistent_volume_claim(c), parse_persistent_volume(v)) for c, v in bindings],
        [Provision(parse_persistent_volume_claim(c)) for c in provisions],
    )
    pod = pod_with_claims("unbound-pvc")
    if isinstance(expected, str):
        with pytest.raises(VolumeBindingError) as caught:
            binding.check(pod, "node1", pod_volumes)
        assert str(caught.value) == expected
    else:
        assert binding.check(pod, "node1", pod_volumes) is expected


def test_check_bindings_of_a_volume_that_cannot_be_translated() -> None:
    """A static binding's error is wrapped (``failed to translate pv to csi``), a provisioned claim's
    volume's is not, as upstream's ``checkBindings`` words them."""
    shared = {"azureDisk": {"diskName": "d", "diskURI": "uri", "kind": "Shared"}}
    static = migration_volume(unbound, **shared)
    binding = _binding([static, unbound], "us-east-1", "kubernetes.io/azure-disk")
    pod_volumes = PodVolumes(
        [StaticBinding(parse_persistent_volume_claim(unbound), parse_persistent_volume(static))]
    )
    with pytest.raises(VolumeBindingError) as caught:
        binding.check(pod_with_claims("unbound-pvc"), "node1", pod_volumes)
    message = "could not translate pv: kind(Shared) is not supported in csi migration"
    assert str(caught.value) == f"failed to translate pv to csi: {message}"
    provisioned = migration_volume(bound_migration, **shared)
    selected = _selected(provisioned_migration_bound)
    binding = _binding([provisioned, selected], "us-east-1", "kubernetes.io/azure-disk")
    with pytest.raises(VolumeBindingError) as caught:
        binding.check(
            pod_with_claims("unbound-pvc"),
            "node1",
            PodVolumes([], [Provision(parse_persistent_volume_claim(selected))]),
        )
    assert str(caught.value) == message


# -- csi-translation-lib: the node affinity of a translated volume --------------------------------------
def _terms(*expressions: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in expressions]}
        ]
    }


TOPOLOGY = {
    # TestTranslateTopologyFromInTreeToCSI
    "ga-zone-to-gce-csi-topology": (
        _terms((ZONE, ["us-east1-a"]), (REGION, ["us-east1"])),
        {ZONE: "us-east1-a", REGION: "us-east1"},
        _terms((GKE_ZONE, ["us-east1-a"]), (REGION, ["us-east1"])),
    ),
    "beta-zone-to-gce-csi-topology-and-ga-region": (
        _terms((BETA_ZONE, ["us-west2-b"]), (BETA_REGION, ["us-west2"])),
        {ZONE: "us-east1-a", REGION: "us-east1"},
        _terms((GKE_ZONE, ["us-west2-b"]), (REGION, ["us-west2"])),
    ),
    # no zone requirement: the label's zones (trimmed, unique, sorted; TestAddTopology) in every term
    "zones-from-the-label": (None, {BETA_ZONE: "us-east1-c__ us-east1-a__us-east1-a"}, _terms((GKE_ZONE, ["us-east1-a", "us-east1-c"]))),  # noqa: E501
    "zones-added-to-each-term": (
        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}]},
        {ZONE: "z1"},
        {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": GKE_ZONE, "operator": "In", "values": ["z1"]}]},  # noqa: E501
            {"matchExpressions": [{"key": GKE_ZONE, "operator": "In", "values": ["z1"]}]},
        ]},
    ),
    "only-whitespace-zones": (None, {ZONE: " __\t"}, None),
    "no-zone-anywhere": (None, {}, None),
}  # fmt: skip


@pytest.mark.parametrize(("required", "labels", "expected"), TOPOLOGY.values(), ids=TOPOLOGY.keys())
def test_translate_topology(required: Any, labels: dict[str, str], expected: Any) -> None:
    assert translate_topology(copy.deepcopy(required), labels, GKE_ZONE) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"gcePersistentDisk": {"pdName": "pd"}}, _terms((GKE_ZONE, ["us-east-1"]))),
        (
            {"awsElasticBlockStore": {"volumeID": "vol-1"}},
            _terms(("topology.ebs.csi.aws.com/zone", ["us-east-1"])),
        ),
        ({"cinder": {"volumeID": "c"}}, _terms(("topology.cinder.csi.openstack.org/zone", ["us-east-1"]))),
        ({"portworxVolume": {"volumeID": "px"}}, None),  # its translation leaves the affinity alone
        ({"azureDisk": {"diskName": "d", "diskURI": "u", "kind": "Managed"}}, None),
    ],
    ids=["gce-pd", "aws-ebs", "cinder", "portworx", "azure-disk"],
)
def test_translated_affinity_of_each_plugin(source: dict[str, Any], expected: Any) -> None:
    pv = parse_persistent_volume(migration_volume(unbound, **source))
    assert translated_affinity(pv) == (None if expected is None else NodeSelector.parse(expected))
    assert pv.node_affinity is None  # the stored volume is left as it is
