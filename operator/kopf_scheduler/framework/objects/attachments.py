"""VolumeAttachments: which CSI volumes the attach/detach controller has attached, or is attaching, to
which node. NodeVolumeLimits counts them against a node's CSI attach limit besides the volumes of the
pods on the node (a volume stays attached for a while after its pod is gone), and a deleted one may
free a slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key


def _text(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ObjectParseError(f"{path}: must be a string, not {value!r}")
    return value


@dataclass(frozen=True, slots=True, eq=False)
class VolumeAttachment:
    name: str
    raw: Mapping[str, Any]
    #: ``spec.attacher``: the CSI driver that attaches the volume
    attacher: str
    node_name: str
    #: ``spec.source.persistentVolumeName``; None for an inline volume's attachment
    persistent_volume_name: str | None


def parse_volume_attachment(raw: Mapping[str, Any]) -> VolumeAttachment:
    _, name = object_key(raw, namespaced=False)
    spec = raw.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ObjectParseError("spec: must be an object")
    source = spec.get("source") or {}
    if not isinstance(source, Mapping):
        raise ObjectParseError("spec.source: must be an object")
    pv = source.get("persistentVolumeName")
    return VolumeAttachment(
        name=name,
        raw=raw,
        attacher=_text(spec.get("attacher"), "spec.attacher"),
        node_name=_text(spec.get("nodeName"), "spec.nodeName"),
        persistent_volume_name=None if pv is None else _text(pv, "spec.source.persistentVolumeName"),
    )


VOLUME_ATTACHMENTS: ObjectKind[VolumeAttachment] = ObjectKind(
    "VolumeAttachment",
    "storage.k8s.io",
    "v1",
    "volumeattachments",
    False,
    parse_volume_attachment,
    Resource.VOLUME_ATTACHMENT,
)
