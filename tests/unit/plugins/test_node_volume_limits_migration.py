"""NodeVolumeLimits beyond upstream's filter table: in-tree translation (csi-translation-lib v0.37's
handles and errors, unchanged since v0.34), where migration counts (``isCSIMigrationOn`` of v1.37, which
no longer reads the CSINode's migrated-plugins annotation for Portworx), and VolumeAttachments."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_kit import (
    VolumeHandle,
    csi_node,
    csi_pv,
    disk_volume,
    node_with,
    objects,
    pod,
    pod_with_claims,
    pv,
    pvc,
    storage_class,
    volume_attachment,
)

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.objects.storage import parse_csi_node
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unschedulable
from kopf_scheduler.framework.volumes import in_tree_disk
from kopf_scheduler.plugins._csi_translation import TranslationError, migration_on, translate
from kopf_scheduler.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, new

EXCEEDED = unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def _disk(source: str, **fields: Any) -> Any:
    return in_tree_disk({source: fields}, "spec")


# -- translation ----------------------------------------------------------------------------------------
TRANSLATIONS = [
    ("ebs-bare-id", _disk("awsElasticBlockStore", volumeID="vol-123"), None, ("ebs.csi.aws.com", "vol-123")),
    (
        "ebs-url-with-zone",
        _disk("awsElasticBlockStore", volumeID="aws://us-east-1a/vol-1"),
        None,
        ("ebs.csi.aws.com", "vol-1"),
    ),
    (
        "ebs-url-without-zone",
        _disk("awsElasticBlockStore", volumeID="aws:///vol-2"),
        None,
        ("ebs.csi.aws.com", "vol-2"),
    ),
    (
        "gce-inline",
        _disk("gcePersistentDisk", pdName="pd"),
        None,
        ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
    ),
    (
        "gce-pv-beta-zone",
        _disk("gcePersistentDisk", pdName="pd"),
        {"failure-domain.beta.kubernetes.io/zone": "us-central1-a", "topology.kubernetes.io/zone": "other"},
        ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/us-central1-a/disks/pd"),
    ),
    (
        "gce-pv-ga-zone",
        _disk("gcePersistentDisk", pdName="pd"),
        {"topology.kubernetes.io/zone": "us-central1-b"},
        ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/us-central1-b/disks/pd"),
    ),
    (
        "gce-pv-regional",
        _disk("gcePersistentDisk", pdName="pd"),
        {"topology.kubernetes.io/zone": "us-central1-a__us-central1-c"},
        ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/regions/us-central1/disks/pd"),
    ),
    (
        "gce-pv-no-zone",
        _disk("gcePersistentDisk", pdName="pd"),
        {},
        ("pd.csi.storage.gke.io", "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/pd"),
    ),
    (
        "azure-managed-disk",
        _disk("azureDisk", diskURI="/subs/d", kind="managed"),
        None,
        ("disk.csi.azure.com", "/subs/d"),
    ),
    ("cinder", _disk("cinder", volumeID="c-1"), None, ("cinder.csi.openstack.org", "c-1")),
    ("portworx", _disk("portworxVolume", volumeID="px-1"), None, ("pxd.portworx.com", "px-1")),
    (
        "vsphere-driver",
        _disk("vsphereVolume", volumePath="[ds] v.vmdk"),
        None,
        ("csi.vsphere.vmware.com", "[ds] v.vmdk"),
    ),
]


@pytest.mark.parametrize(
    ("disk", "labels", "want"), [c[1:] for c in TRANSLATIONS], ids=[c[0] for c in TRANSLATIONS]
)
def test_translate(disk: Any, labels: dict[str, str] | None, want: tuple[str, str]) -> None:
    assert translate(disk, labels) == want


TRANSLATION_ERRORS = [
    (
        "ebs-bad-url",
        _disk("awsElasticBlockStore", volumeID="aws://zone/disk-1"),
        None,
        "failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume (aws://zone/disk-1)",
    ),
    (
        "azure-disk-kind-defaults-to-shared",
        _disk("azureDisk", diskURI="u"),
        None,
        "kind(Shared) is not supported in csi migration",
    ),
    (
        "azure-dedicated-disk",
        _disk("azureDisk", diskURI="u", kind="Dedicated"),
        None,
        "kind(Dedicated) is not supported in csi migration",
    ),
    (
        "gce-zones-of-two-regions",
        _disk("gcePersistentDisk", pdName="pd"),
        {"topology.kubernetes.io/zone": "us-central1-a__europe-west1-b"},
        "failed to get region from zones: multiple or no regions gotten from zones",
    ),
]


@pytest.mark.parametrize(
    ("disk", "labels", "message"), [c[1:] for c in TRANSLATION_ERRORS], ids=[c[0] for c in TRANSLATION_ERRORS]
)
def test_translate_errors(disk: Any, labels: dict[str, str] | None, message: str) -> None:
    with pytest.raises(TranslationError) as info:
        translate(disk, labels)
    assert str(info.value) == message


MIGRATION = [
    ("no-csi-node", None, "kubernetes.io/aws-ebs", False),
    ("ebs", [], "kubernetes.io/aws-ebs", True),
    ("gce", [], "kubernetes.io/gce-pd", True),
    ("azure-disk", [], "kubernetes.io/azure-disk", True),
    ("cinder", [], "kubernetes.io/cinder", True),
    ("portworx-unannounced", [], "kubernetes.io/portworx-volume", True),
    ("portworx-announced", ["kubernetes.io/portworx-volume"], "kubernetes.io/portworx-volume", True),
    ("portworx-no-csi-node", None, "kubernetes.io/portworx-volume", False),
    ("vsphere-never", ["kubernetes.io/vsphere-volume"], "kubernetes.io/vsphere-volume", False),
    ("azure-file-never", ["kubernetes.io/azure-file"], "kubernetes.io/azure-file", False),
    ("empty-plugin", [], "", False),
]


@pytest.mark.parametrize(
    ("migrated", "plugin", "want"), [c[1:] for c in MIGRATION], ids=[c[0] for c in MIGRATION]
)
def test_migration_on(migrated: list[str] | None, plugin: str, want: bool) -> None:
    node = None if migrated is None else parse_csi_node(csi_node("n", {}, migrated))
    assert migration_on(node, plugin) is want


# -- the filter with in-tree volumes and attachments ----------------------------------------------------
def _filter(
    store: Any, raw_pod: dict[str, Any], *existing: dict[str, Any]
) -> tuple[Status | None, Status | None]:
    plugin = new(None, VolumeHandle(store))
    node = node_with(*existing, name="n1")
    state, info = CycleState(), PodInfo(raw_pod)
    _, pre = plugin.pre_filter(state, info, [node])
    return pre, (plugin.filter(state, info, node) if pre is None else None)


VSPHERE = disk_volume("vsphereVolume", volumePath="[ds] a.vmdk")
PORTWORX = disk_volume("portworxVolume", volumeID="px-1")
PORTWORX_2 = disk_volume("portworxVolume", volumeID="px-2")
AZURE_SHARED = disk_volume("azureDisk", diskName="d", diskURI="uri")

INLINE_CASES = [
    ("vsphere-not-skipped-never-counted", [VSPHERE], [], {"csi.vsphere.vmware.com": 0}, [], (None, None)),
    (
        "portworx-without-announcement",
        [PORTWORX],
        [[PORTWORX_2]],
        {"pxd.portworx.com": 1},
        [],
        (None, EXCEEDED),
    ),
    (
        "portworx-announced",
        [PORTWORX],
        [[PORTWORX_2]],
        {"pxd.portworx.com": 1},
        ["kubernetes.io/portworx-volume"],
        (None, EXCEEDED),
    ),
    (
        "azure-disk-of-default-kind-is-an-error",
        [AZURE_SHARED],
        [],
        {"disk.csi.azure.com": 5},
        [],
        (
            None,
            error(
                "converting volume(disk) from inline to csi: kind(Shared) is not supported in csi migration"
            ),
        ),
    ),
    ("emptydir-skips", [{"name": "e", "emptyDir": {}}], [], {}, [], (SKIP, None)),
]


@pytest.mark.parametrize(
    ("volumes", "existing", "limits", "migrated", "want"),
    [c[1:] for c in INLINE_CASES],
    ids=[c[0] for c in INLINE_CASES],
)
def test_inline_in_tree_volumes(
    volumes: list[dict[str, Any]],
    existing: list[list[dict[str, Any]]],
    limits: dict[str, int],
    migrated: list[str],
    want: tuple[Status | None, Status | None],
) -> None:
    store = objects(csi_node("n1", limits, migrated))
    others = [pod(*v, name=f"e{i}") for i, v in enumerate(existing)]
    assert _filter(store, pod(*volumes), *others) == want


IN_TREE_CLASS = [
    storage_class("gp2", "kubernetes.io/aws-ebs"),
    pvc("new", storage_class="gp2"),
    pvc("old", volume="pv-old"),
    pv("pv-old", awsElasticBlockStore={"volumeID": "aws://us-east-1a/vol-9"}),
]


def test_a_claim_of_an_in_tree_class_counts_as_its_csi_driver_where_migration_is_on() -> None:
    store = objects(*IN_TREE_CLASS, csi_node("n1", {"ebs.csi.aws.com": 1}))
    assert _filter(store, pod_with_claims("new"), pod_with_claims("old", name="e")) == (None, EXCEEDED)
    # without a CSINode there is no limit and no migration
    assert _filter(objects(*IN_TREE_CLASS), pod_with_claims("new"), pod_with_claims("old", name="e")) == (
        None,
        None,
    )


def test_an_azure_disk_volume_of_shared_kind_is_not_counted() -> None:
    store = objects(
        pvc("a", volume="pv-a"),
        pvc("b", volume="pv-b"),
        pv("pv-a", azureDisk={"diskName": "a", "diskURI": "uri-a", "kind": "Managed"}),
        pv("pv-b", azureDisk={"diskName": "b", "diskURI": "uri-b"}),
        csi_node("n1", {"disk.csi.azure.com": 1}),
    )
    assert _filter(store, pod_with_claims("a"), pod_with_claims("b", name="e")) == (None, None)
    assert _filter(store, pod_with_claims("a", name="x"), pod_with_claims("a", name="e")) == (None, None)


ATTACHMENTS = [
    ("counted", volume_attachment("va", "n1", "d", "pv-x"), EXCEEDED),
    ("other-node", volume_attachment("va", "n2", "d", "pv-x"), None),
    ("no-attacher", volume_attachment("va", "n1", "", "pv-x"), None),
    ("inline-source", volume_attachment("va", "n1", "d", None), None),
    ("missing-volume", volume_attachment("va", "n1", "d", "pv-missing"), None),
    ("not-a-csi-volume", volume_attachment("va", "n1", "d", "pv-hostpath"), None),
    ("the-pods-own-volume-counts-twice", volume_attachment("va", "n1", "d", "pv-new"), EXCEEDED),
]


@pytest.mark.parametrize(
    ("attachment", "want"), [c[1:] for c in ATTACHMENTS], ids=[c[0] for c in ATTACHMENTS]
)
def test_volume_attachments(attachment: dict[str, Any], want: Status | None) -> None:
    store = objects(
        csi_pv("pv-x", "d", "h-x"),
        csi_pv("pv-new", "d", "h-new"),
        pv("pv-hostpath", hostPath={"path": "/x"}),
        pvc("new", volume="pv-new"),
        csi_node("n1", {"d": 1}),
        attachment,
    )
    assert _filter(store, pod_with_claims("new")) == (None, want)


def test_attachments_are_regrouped_when_they_change() -> None:
    store = objects(csi_pv("pv-x", "d", "h-x"), csi_pv("pv-new", "d", "h-new"), pvc("new", volume="pv-new"),
                    csi_node("n1", {"d": 1}))  # fmt: skip
    plugin = new(None, VolumeHandle(store))
    node, info = node_with(name="n1"), PodInfo(pod_with_claims("new"))
    assert plugin.filter(CycleState(), info, node) is None
    store.store(_kind("VolumeAttachment")).upsert(volume_attachment("va", "n1", "d", "pv-x"))
    assert plugin.filter(CycleState(), info, node) == EXCEEDED
    store.store(_kind("VolumeAttachment")).delete("", "va")
    assert plugin.filter(CycleState(), info, node) is None


def _kind(name: str) -> Any:
    return next(k for k in WATCHED_KINDS if k.kind == name)
