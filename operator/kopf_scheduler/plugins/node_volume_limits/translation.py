"""In-tree volumes as the CSI volumes they migrate to, as far as NodeVolumeLimits needs them: the CSI
driver and the volume handle (``k8s.io/csi-translation-lib`` v0.34: ``translate.go``, ``plugins/*.go``),
and whether migration counts on a node (``nodevolumelimits/utils.go`` ``isCSIMigrationOn``).

The translator knows seven in-tree plugins. Migration counts only where a CSINode exists, and then
always for AWS EBS, GCE PD, Azure Disk and Cinder (their migration is GA and locked on), for Portworx
only when the CSINode's ``storage.alpha.kubernetes.io/migrated-plugins`` annotation lists it, and never
for vSphere or Azure File (``isCSIMigrationOn`` has no case for them, so their volumes are not counted
though a pod that has them is not skipped by pre-filter).

Volume handles: an EBS ``aws://<zone>/<vol-id>`` ID becomes its ``vol-id`` (checked against
``^vol-[^/]*$``); a GCE PD becomes ``projects/UNSPECIFIED/zones/<zone>/disks/<pd>`` with the zone from
the volume's zone label (beta first, then GA; ``UNSPECIFIED`` without one, or
``.../regions/<region>/...`` for a multi-zone label); an Azure disk keeps its URI but only a ``Managed``
one translates (the API server defaults ``kind`` to ``Shared``); Cinder and Portworx keep their volume
ID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlparse

from kopf_scheduler.framework.objects import CSINode
from kopf_scheduler.framework.volumes import (
    AWS_EBS,
    AZURE_DISK,
    AZURE_FILE,
    CINDER,
    GCE_PD,
    PORTWORX,
    VSPHERE,
    InTreeDisk,
)

#: in-tree plugin -> the CSI driver that supersedes it
CSI_DRIVERS = {
    GCE_PD: "pd.csi.storage.gke.io",
    AWS_EBS: "ebs.csi.aws.com",
    CINDER: "cinder.csi.openstack.org",
    AZURE_DISK: "disk.csi.azure.com",
    AZURE_FILE: "file.csi.azure.com",
    VSPHERE: "csi.vsphere.vmware.com",
    PORTWORX: "pxd.portworx.com",
}
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"
_ALWAYS_MIGRATED = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER})

UNSPECIFIED = "UNSPECIFIED"
_EBS_VOLUME = re.compile(r"^vol-[^/]*$")
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_ZONE = "topology.kubernetes.io/zone"


class TranslationError(ValueError):
    """The in-tree volume cannot be translated (upstream's message)."""


def migratable(disk: InTreeDisk | None) -> bool:
    """``IsInlineMigratable`` / ``IsPVMigratable``: the translator knows the disk's plugin."""
    return disk is not None and disk.plugin in CSI_DRIVERS


def migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn`` with v1.34's gates (CSIMigrationPortworx GA, locked on)."""
    if csi_node is None or not plugin:
        return False
    if plugin in _ALWAYS_MIGRATED:
        return True
    if plugin != PORTWORX:
        return False
    return PORTWORX in csi_node.migrated_plugins


def ebs_volume_id(kubernetes_id: str) -> str:
    """``KubernetesVolumeIDToEBSVolumeID``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id  # a bare EBS volume ID
    try:
        url = urlparse(kubernetes_id)
    except ValueError as e:
        raise TranslationError(f"Invalid disk name ({kubernetes_id}): {e}") from None
    volume = url.path.strip("/")
    if not _EBS_VOLUME.match(volume):
        raise TranslationError(f"Invalid format for AWS volume ({kubernetes_id})")
    return volume


def _gce_region(zones: list[str]) -> str:
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise TranslationError(
                f"zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        raise TranslationError("multiple or no regions gotten from zones")
    return regions.pop()


def _gce_pv_handle(pd_name: str, labels: Mapping[str, str]) -> str:
    zones_label = labels.get(_BETA_ZONE) or labels.get(_ZONE) or ""
    zones = zones_label.split("__")
    if len(zones) == 1 and zones[0]:
        return f"projects/{UNSPECIFIED}/zones/{zones[0]}/disks/{pd_name}"
    if len(zones) > 1:
        try:
            region = _gce_region(zones)
        except TranslationError as e:
            raise TranslationError(f"failed to get region from zones: {e}") from None
        return f"projects/{UNSPECIFIED}/regions/{region}/disks/{pd_name}"
    return f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{pd_name}"


def translate(disk: InTreeDisk, pv_labels: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(CSI driver, volume handle) of an in-tree disk: a PersistentVolume's when ``pv_labels`` is given
    (its labels), else an inline volume's. Raises ``TranslationError``; ``disk`` must be migratable."""
    driver = CSI_DRIVERS[disk.plugin]
    if disk.plugin == AWS_EBS:
        try:
            return driver, ebs_volume_id(disk.disk_id)
        except TranslationError as e:
            raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID {e}") from None
    if disk.plugin == GCE_PD:
        if pv_labels is None:
            return driver, f"projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{disk.disk_id}"
        return driver, _gce_pv_handle(disk.disk_id, pv_labels)
    if disk.plugin == AZURE_DISK and disk.kind.lower() != "managed":
        raise TranslationError(f"kind({disk.kind}) is not supported in csi migration")
    # Azure disk URI, Cinder and Portworx volume IDs; vSphere and Azure File handles are never counted
    # (their migration is never on), only their drivers are compared.
    return driver, disk.disk_id
