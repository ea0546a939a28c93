"""In-tree volumes as the CSI volumes they migrate to (``k8s.io/csi-translation-lib`` v0.37, as v0.34:
``translate.go``, ``plugins/*.go``), as far as the volume plugins read them: the CSI driver and the volume
handle, which NodeVolumeLimits counts, with whether migration counts on a node
(``nodevolumelimits/utils.go`` ``isCSIMigrationOn``, v1.37); and a PersistentVolume's node affinity after
translation, which VolumeBinding checks on nodes whose CSINode says the plugin is migrated
(``volumebinding/binder.go`` ``tryTranslatePVToCSI``).

The translator knows seven in-tree plugins. Migration counts only where a CSINode exists, and then
always for AWS EBS, GCE PD, Azure Disk, Cinder and Portworx (v1.37 no longer reads the CSINode's
migrated-plugins annotation for Portworx), and never for vSphere or Azure File (``isCSIMigrationOn`` has
no case for them, so their volumes are not counted though a pod that has them is not skipped by
pre-filter).

Volume handles: an EBS ``aws://<zone>/<vol-id>`` ID becomes its ``vol-id`` (checked against
``^vol-[^/]*$``); a GCE PD becomes ``projects/UNSPECIFIED/zones/<zone>/disks/<pd>`` with the zone from
the volume's zone label (beta first, then GA; ``UNSPECIFIED`` without one, or
``.../regions/<region>/...`` for a multi-zone label); an Azure disk keeps its URI but only a ``Managed``
one translates (the API server defaults ``kind`` to ``Shared``); Cinder and Portworx keep their volume
ID.

A translated PersistentVolume's node affinity (``translateTopologyFromInTreeToCSI``, for AWS EBS, GCE PD
and Cinder): zone requirements (GA key, else beta key, whichever the affinity or else the labels use)
are renamed to the driver's topology key (``topology.ebs.csi.aws.com/zone``, ``topology.gke.io/zone``,
``topology.cinder.csi.openstack.org/zone``); without any, the volume's zone label (``__``-separated
zones) becomes an ``In`` requirement on that key in every term; beta region requirements are renamed to
the GA key. Azure Disk and Portworx volumes keep their affinity. The binder translates only where the
node's CSINode lists the plugin as migrated, and only for AWS EBS, GCE PD, Azure Disk, Cinder and
Portworx (``isCSIMigrationOnForPlugin``: the others' migration is off in the scheduler).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlparse

from kopf_scheduler.framework.objects import CSINode, PersistentVolume
from kopf_scheduler.framework.selectors import NodeSelector
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
_ALWAYS_MIGRATED = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX})

#: in-tree plugins the volume binder translates (``isCSIMigrationOnForPlugin``, v1.37.2: Portworx no longer
#: behind a gate)
BINDER_MIGRATED = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX})
#: in-tree plugin -> its CSI driver's zone topology key (the others' translation keeps the affinity)
TOPOLOGY_KEYS = {
    AWS_EBS: "topology.ebs.csi.aws.com/zone",
    GCE_PD: "topology.gke.io/zone",
    CINDER: "topology.cinder.csi.openstack.org/zone",
}

UNSPECIFIED = "UNSPECIFIED"
_EBS_VOLUME = re.compile(r"^vol-[^/]*$")
_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
_ZONE = "topology.kubernetes.io/zone"
_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
_REGION = "topology.kubernetes.io/region"
_MULTI_ZONE = "__"


class TranslationError(ValueError):
    """The in-tree volume cannot be translated (upstream's message)."""


def migratable(disk: InTreeDisk | None) -> bool:
    """``IsInlineMigratable`` / ``IsPVMigratable``: the translator knows the disk's plugin."""
    return disk is not None and disk.plugin in CSI_DRIVERS


def migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn`` (v1.37): a CSINode exists and the plugin's migration is GA."""
    return csi_node is not None and plugin in _ALWAYS_MIGRATED


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


# -- PersistentVolumes as the volume binder reads them -----------------------------------------------------
def binder_translates(disk: InTreeDisk | None) -> bool:
    """``IsPVMigratable`` and ``isCSIMigrationOnForPlugin``: the binder translates the volume on nodes
    whose CSINode lists its plugin."""
    return disk is not None and disk.plugin in BINDER_MIGRATED


def migrated_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isPluginMigratedToCSIOnNode``: the CSINode's migrated-plugins annotation lists ``plugin``."""
    return csi_node is not None and plugin in csi_node.migrated_plugins


Terms = list[dict[str, Any]]


def _expressions(terms: Terms) -> Iterator[dict[str, Any]]:
    for term in terms:
        yield from term.get("matchExpressions") or ()


def _values(terms: Terms, key: str) -> list[str]:
    """``getTopologyValues``: the values of every requirement on ``key``."""
    return sorted({str(v) for e in _expressions(terms) if e.get("key") == key for v in e.get("values") or ()})


def _rename(terms: Terms, old: str, new: str) -> None:
    """``replaceTopology``."""
    for expression in _expressions(terms):
        if expression.get("key") == old:
            expression["key"] = new


def _zone_and_region_keys(terms: Terms, labels: Mapping[str, str]) -> tuple[str, str]:
    """``getTopologyLabel``: GA keys unless only beta ones are used, in the affinity first, then labels."""
    keys = {e.get("key") for e in _expressions(terms)}
    if _ZONE in keys:
        return _ZONE, _REGION
    if _BETA_ZONE in keys:
        return _BETA_ZONE, _BETA_REGION
    if _ZONE in labels:
        return _ZONE, _REGION
    if _BETA_ZONE in labels:
        return _BETA_ZONE, _BETA_REGION
    return _ZONE, _REGION


def translate_topology(
    required: dict[str, Any] | None, labels: Mapping[str, str], key: str
) -> dict[str, Any] | None:
    """``translateTopologyFromInTreeToCSI`` on ``required`` (a copy of the volume's
    ``nodeAffinity.required``, or None): the translated one."""
    terms: Terms = required.get("nodeSelectorTerms") or [] if required is not None else []
    zone_key, region_key = _zone_and_region_keys(terms, labels)
    if _values(terms, zone_key):
        _rename(terms, zone_key, key)
    elif zone_key in labels:  # ``addTopology``: the label's zones, trimmed, unique, sorted
        zones = sorted({z.strip() for z in labels[zone_key].split(_MULTI_ZONE) if z.strip()})
        if zones:
            if not terms:
                terms = [{}]
            for term in terms:
                expressions = term.get("matchExpressions") or []
                term["matchExpressions"] = [*expressions, {"key": key, "operator": "In", "values": zones}]
            required = {**(required or {}), "nodeSelectorTerms": terms}
    if region_key == _BETA_REGION and _values(terms, region_key):
        _rename(terms, region_key, _REGION)
    return required


def translated_affinity(volume: PersistentVolume) -> NodeSelector | None:
    """The node affinity of ``TranslateInTreePVToCSI(volume)`` (None: none). Raises ``TranslationError``
    with the translator's message; ``volume.in_tree`` must be one ``binder_translates``."""
    disk = volume.in_tree
    assert disk is not None, "not an in-tree volume"
    translate(disk, volume.labels)  # the source's errors (EBS volume ID, GCE regions, Azure disk kind)
    key = TOPOLOGY_KEYS.get(disk.plugin)
    if key is None:
        return volume.node_affinity
    required = ((volume.raw.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    copied = dict(copy.deepcopy(required)) if isinstance(required, Mapping) else None
    translated = translate_topology(copied, volume.labels, key)
    return None if translated is None else NodeSelector.parse(translated)
