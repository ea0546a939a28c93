"""A pod's volumes as the volume plugins read them, and the in-tree disk sources that pods and
PersistentVolumes may name (``core/v1`` ``VolumeSource`` / ``PersistentVolumeSource``).

``pod_volumes(pod)`` parses ``spec.volumes`` once per pod (kept in ``PodInfo.extra``) into ``PodVolume``
values: the claim of a ``persistentVolumeClaim`` volume, whether it is a generic ephemeral volume (its
claim is ``<pod>-<volume>``), and the identity of an in-tree disk. A field of the wrong type raises
``VolumeParseError`` whose message starts with the field path.

In-tree sources take the API server's defaults where the plugins compare them (``core/v1``
``SetDefaults_*``): an RBD pool is ``rbd`` when unset, an Azure disk's ``kind`` is ``Shared``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.pod_info import PodInfo

#: in-tree plugin names (``k8s.io/csi-translation-lib/plugins``, ``pkg/volume``)
AWS_EBS = "kubernetes.io/aws-ebs"
GCE_PD = "kubernetes.io/gce-pd"
AZURE_DISK = "kubernetes.io/azure-disk"
AZURE_FILE = "kubernetes.io/azure-file"
CINDER = "kubernetes.io/cinder"
VSPHERE = "kubernetes.io/vsphere-volume"
PORTWORX = "kubernetes.io/portworx-volume"
RBD = "kubernetes.io/rbd"
ISCSI = "kubernetes.io/iscsi"

#: source field -> (in-tree plugin, the field naming the disk)
IN_TREE_SOURCES: dict[str, tuple[str, str]] = {
    "gcePersistentDisk": (GCE_PD, "pdName"),
    "awsElasticBlockStore": (AWS_EBS, "volumeID"),
    "azureDisk": (AZURE_DISK, "diskURI"),
    "azureFile": (AZURE_FILE, "shareName"),
    "cinder": (CINDER, "volumeID"),
    "vsphereVolume": (VSPHERE, "volumePath"),
    "portworxVolume": (PORTWORX, "volumeID"),
    "rbd": (RBD, "image"),
    "iscsi": (ISCSI, "iqn"),
}

_EXTRA_KEY = "framework.volumes"


class VolumeParseError(ValueError):
    """A volume field the scheduler cannot read; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class InTreeDisk:
    """An in-tree volume source: which plugin serves it and the fields that identify the disk."""

    #: the in-tree plugin (``kubernetes.io/aws-ebs``)
    plugin: str
    #: the API field of the source (``awsElasticBlockStore``)
    source: str
    #: pdName, volumeID, diskURI, shareName, volumePath, RBD image or iSCSI IQN
    disk_id: str
    read_only: bool = False
    #: RBD: Ceph monitors and RADOS pool
    monitors: tuple[str, ...] = ()
    pool: str = ""
    #: Azure disk: ``Managed``, ``Shared`` or ``Dedicated``
    kind: str = ""


@dataclass(frozen=True, slots=True)
class PodVolume:
    name: str
    #: ``persistentVolumeClaim.claimName`` ("" when empty); None for other volumes
    claim_name: str | None = None
    #: a generic ephemeral volume (``ephemeral``): its claim is ``<pod name>-<volume name>``
    ephemeral: bool = False
    disk: InTreeDisk | None = None


def _string(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise VolumeParseError(f"{path}: must be a string, not {value!r}")
    return value


def _bool(value: Any, path: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise VolumeParseError(f"{path}: must be a boolean, not {value!r}")
    return value


def in_tree_disk(spec: Mapping[str, Any], path: str) -> InTreeDisk | None:
    """The in-tree disk of a ``VolumeSource`` or ``PersistentVolumeSource`` (``path``: where ``spec``
    is), or None when it names none."""
    for source, (plugin, id_field) in IN_TREE_SOURCES.items():
        fields = spec.get(source)
        if fields is None:
            continue
        where = f"{path}.{source}"
        if not isinstance(fields, Mapping):
            raise VolumeParseError(f"{where}: must be an object")
        monitors: tuple[str, ...] = ()
        if source == "rbd":
            raw = fields.get("monitors")
            if raw is not None and (not isinstance(raw, list) or not all(isinstance(m, str) for m in raw)):
                raise VolumeParseError(f"{where}.monitors: must be a list of strings")
            monitors = tuple(raw or ())
        return InTreeDisk(
            plugin=plugin,
            source=source,
            disk_id=_string(fields.get(id_field), f"{where}.{id_field}"),
            read_only=_bool(fields.get("readOnly"), f"{where}.readOnly"),
            monitors=monitors,
            pool=_string(fields.get("pool"), f"{where}.pool", "rbd") if source == "rbd" else "",
            kind=_string(fields.get("kind"), f"{where}.kind", "Shared") if source == "azureDisk" else "",
        )
    return None


def _parse(raw: Any) -> tuple[PodVolume, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise VolumeParseError("spec.volumes: must be a list")
    volumes: list[PodVolume] = []
    for i, volume in enumerate(raw):
        path = f"spec.volumes[{i}]"
        if not isinstance(volume, Mapping):
            raise VolumeParseError(f"{path}: must be an object")
        name = _string(volume.get("name"), f"{path}.name")
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            if not isinstance(claim, Mapping):
                raise VolumeParseError(f"{path}.persistentVolumeClaim: must be an object")
            claim_name = _string(claim.get("claimName"), f"{path}.persistentVolumeClaim.claimName")
            volumes.append(PodVolume(name, claim_name=claim_name))
        elif volume.get("ephemeral") is not None:
            volumes.append(PodVolume(name, ephemeral=True))
        else:
            volumes.append(PodVolume(name, disk=in_tree_disk(volume, path)))
    return tuple(volumes)


def pod_volumes(pod: PodInfo) -> tuple[PodVolume, ...]:
    """The pod's ``spec.volumes``, parsed once; raises ``VolumeParseError``."""
    found = pod.extra.get(_EXTRA_KEY)
    if found is None:
        spec = pod.raw.get("spec")
        found = pod.extra[_EXTRA_KEY] = _parse(spec.get("volumes") if isinstance(spec, Mapping) else None)
    return found  # type: ignore[no-any-return]


def claim_names(pod: PodInfo) -> frozenset[str]:
    """The claims the pod's ``persistentVolumeClaim`` volumes name (not its ephemeral ones)."""
    return frozenset(v.claim_name for v in pod_volumes(pod) if v.claim_name is not None)


def ephemeral_claim_name(pod: PodInfo, volume: PodVolume) -> str:
    """The claim of a generic ephemeral volume (``ephemeral.VolumeClaimName``)."""
    return f"{pod.name}-{volume.name}"


def volume_claim_name(pod: PodInfo, volume: PodVolume) -> str | None:
    """The claim a volume uses: the one a ``persistentVolumeClaim`` volume names, or a generic ephemeral
    volume's ``<pod>-<volume>``; None for a volume without a claim."""
    if volume.claim_name is not None:
        return volume.claim_name
    return ephemeral_claim_name(pod, volume) if volume.ephemeral else None
