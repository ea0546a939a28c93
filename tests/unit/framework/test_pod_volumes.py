"""A pod's volumes and in-tree disk sources as the volume plugins read them (``framework.volumes``), the
PersistentVolume fields parsed for them, and VolumeAttachments: the API server's defaults, and
unreadable fields refused with their path."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.framework.objects import ObjectParseError
from kopf_scheduler.framework.objects.attachments import VolumeAttachment, parse_volume_attachment
from kopf_scheduler.framework.objects.storage import parse_persistent_volume
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.volumes import (
    InTreeDisk,
    PodVolume,
    VolumeParseError,
    claim_names,
    ephemeral_claim_name,
    pod_volumes,
)
from kopf_scheduler.testing import make_pod


def _pod(volumes: Any) -> PodInfo:
    return PodInfo(make_pod().name("web").set("spec.volumes", volumes).obj())


VOLUMES = [
    (
        "claim",
        {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
        PodVolume("a", claim_name="data"),
    ),
    ("claim-without-name", {"name": "a", "persistentVolumeClaim": {}}, PodVolume("a", claim_name="")),
    ("ephemeral", {"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}, PodVolume("e", ephemeral=True)),
    ("config-map", {"name": "c", "configMap": {"name": "x"}}, PodVolume("c")),
    (
        "gce-pd",
        {"name": "g", "gcePersistentDisk": {"pdName": "pd", "readOnly": True, "partition": 1}},
        PodVolume("g", disk=InTreeDisk("kubernetes.io/gce-pd", "gcePersistentDisk", "pd", read_only=True)),
    ),
    (
        "rbd-pool-defaults-to-rbd",
        {"name": "r", "rbd": {"monitors": ["m1", "m2"], "image": "img"}},
        PodVolume("r", disk=InTreeDisk("kubernetes.io/rbd", "rbd", "img", monitors=("m1", "m2"), pool="rbd")),
    ),
    (
        "azure-disk-kind-defaults-to-shared",
        {"name": "z", "azureDisk": {"diskName": "d", "diskURI": "uri"}},
        PodVolume("z", disk=InTreeDisk("kubernetes.io/azure-disk", "azureDisk", "uri", kind="Shared")),
    ),
    (
        "iscsi",
        {"name": "i", "iscsi": {"targetPortal": "t", "iqn": "iqn.x", "lun": 0}},
        PodVolume("i", disk=InTreeDisk("kubernetes.io/iscsi", "iscsi", "iqn.x")),
    ),
]


@pytest.mark.parametrize(("raw", "want"), [c[1:] for c in VOLUMES], ids=[c[0] for c in VOLUMES])
def test_pod_volumes(raw: dict[str, Any], want: PodVolume) -> None:
    assert pod_volumes(_pod([raw])) == (want,)


def test_claims_and_ephemeral_claim_names() -> None:
    pod = _pod(
        [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
        ]
    )
    assert claim_names(pod) == frozenset({"data"})
    assert ephemeral_claim_name(pod, pod_volumes(pod)[1]) == "web-scratch"
    assert pod_volumes(pod) is pod_volumes(pod)  # parsed once


UNREADABLE = [
    ("not-a-list", {"a": 1}, "spec.volumes: must be a list"),
    ("not-an-object", ["x"], "spec.volumes[0]: must be an object"),
    (
        "claim-not-an-object",
        [{"name": "a", "persistentVolumeClaim": "data"}],
        "spec.volumes[0].persistentVolumeClaim: must be an object",
    ),
    (
        "read-only-not-a-boolean",
        [{"name": "a"}, {"name": "g", "gcePersistentDisk": {"pdName": "p", "readOnly": "yes"}}],
        "spec.volumes[1].gcePersistentDisk.readOnly: must be a boolean, not 'yes'",
    ),
    (
        "monitors-not-strings",
        [{"name": "r", "rbd": {"monitors": [1], "image": "i"}}],
        "spec.volumes[0].rbd.monitors: must be a list of strings",
    ),
    (
        "disk-id-not-a-string",
        [{"name": "e", "awsElasticBlockStore": {"volumeID": 5}}],
        "spec.volumes[0].awsElasticBlockStore.volumeID: must be a string, not 5",
    ),
]


@pytest.mark.parametrize(("raw", "message"), [c[1:] for c in UNREADABLE], ids=[c[0] for c in UNREADABLE])
def test_unreadable_volumes_name_the_field(raw: Any, message: str) -> None:
    with pytest.raises(VolumeParseError) as info:
        pod_volumes(_pod(raw))
    assert str(info.value) == message


def _pv(spec: dict[str, Any]) -> Any:
    return parse_persistent_volume({"metadata": {"name": "v"}, "spec": spec})


def test_persistent_volume_sources() -> None:
    csi = _pv({"csi": {"driver": "d", "volumeHandle": "h"}})
    assert (csi.is_csi, csi.csi_driver, csi.csi_handle, csi.in_tree) == (True, "d", "h", None)
    ebs = _pv({"awsElasticBlockStore": {"volumeID": "vol-1"}})
    assert not ebs.is_csi
    assert ebs.in_tree == InTreeDisk("kubernetes.io/aws-ebs", "awsElasticBlockStore", "vol-1")
    assert _pv({"hostPath": {"path": "/x"}}).in_tree is None


def test_an_unreadable_persistent_volume_source_names_the_field() -> None:
    with pytest.raises(ObjectParseError) as info:
        _pv({"cinder": {"volumeID": ["x"]}})
    assert str(info.value) == "spec.cinder.volumeID: must be a string, not ['x']"


def test_volume_attachments() -> None:
    raw = {
        "metadata": {"name": "csi-123"},
        "spec": {"attacher": "d", "nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}},
    }
    va = parse_volume_attachment(raw)
    assert isinstance(va, VolumeAttachment)
    assert (va.name, va.attacher, va.node_name, va.persistent_volume_name) == ("csi-123", "d", "n1", "pv-1")
    inline = parse_volume_attachment(
        {"metadata": {"name": "x"}, "spec": {"source": {"inlineVolumeSpec": {}}}}
    )
    assert inline.persistent_volume_name is None
    with pytest.raises(ObjectParseError) as info:
        parse_volume_attachment({"metadata": {"name": "x"}, "spec": {"nodeName": 3}})
    assert str(info.value) == "spec.nodeName: must be a string, not 3"
