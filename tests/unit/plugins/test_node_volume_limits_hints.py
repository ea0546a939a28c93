"""NodeVolumeLimits' queueing hints: upstream's ``TestCSILimitsQHint``, ``TestCSILimitsAddedPVCQHint``,
``TestCSILimitsDeletedVolumeAttachmentQHint`` and ``TestCSILimitsAfterCSINodeUpdatedQHint``
(``nodevolumelimits/csi_test.go``, v1.37.2), and the events the plugin registers."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_kit import (
    VolumeHandle,
    csi_node,
    disk_volume,
    ephemeral_volume,
    objects,
    pod,
    pod_with_claims,
    pvc,
    volume_attachment,
)

from kopf_scheduler.framework.events import Action, QueueingHint, Resource
from kopf_scheduler.framework.objects.attachments import parse_volume_attachment
from kopf_scheduler.framework.objects.storage import parse_csi_node, parse_persistent_volume_claim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.node_volume_limits import new
from kopf_scheduler.plugins.node_volume_limits.hints import (
    attachment_deleted,
    claim_added,
    csi_node_updated,
    pod_deleted,
)

# -- queueing hints -------------------------------------------------------------------------------------
POD_EBS = pod_with_claims("csi-ebs.csi.aws.com-2")

POD_DELETED = [
    ("deleted-pod-has-a-pvc", pod_with_claims("placeholder", name="d", node="n1"), QueueingHint.QUEUE),
    (
        "deleted-pod-has-inline-migratable",
        pod(disk_volume("awsElasticBlockStore"), name="d", node="n1"),
        QueueingHint.QUEUE,
    ),
    ("deleted-pod-has-no-volume", pod(name="d", node="n1"), QueueingHint.SKIP),
    ("deleted-pod-not-scheduled", pod_with_claims("csi-ebs.csi.aws.com-0", name="d"), QueueingHint.SKIP),
    (
        "deleted-pod-ephemeral-nominated",
        {**pod(ephemeral_volume("e"), name="d"), "status": {"nominatedNodeName": "n1"}},
        QueueingHint.QUEUE,
    ),
    (
        "deleted-pod-only-configmap",
        pod({"name": "c", "configMap": {"name": "c"}}, name="d", node="n1"),
        QueueingHint.SKIP,
    ),
]


@pytest.mark.parametrize(("deleted", "want"), [c[1:] for c in POD_DELETED], ids=[c[0] for c in POD_DELETED])
def test_hint_pod_deleted(deleted: dict[str, Any], want: QueueingHint) -> None:
    assert pod_deleted(PodInfo(POD_EBS), PodInfo(deleted), None) is want


def _claim(name: str, namespace: str = "ns1") -> Any:
    return parse_persistent_volume_claim(pvc(name, namespace))


CLAIM_ADDED = [
    ("pod-in-another-namespace", pod(namespace="ns1"), _claim("pvc", "ns2"), QueueingHint.SKIP),
    ("pod-uses-the-claim", pod_with_claims("pvc1", namespace="ns1"), _claim("pvc1"), QueueingHint.QUEUE),
    (
        "pod-ephemeral-volume-claim",
        pod(ephemeral_volume("ephemeral"), name="pod1", namespace="ns1"),
        _claim("pod1-ephemeral"),
        QueueingHint.QUEUE,
    ),
    ("pod-uses-another-claim", pod_with_claims("pvc1", namespace="ns1"), _claim("pvc2"), QueueingHint.SKIP),
    ("pod-without-claims", pod(namespace="ns1"), _claim("pvc2"), QueueingHint.SKIP),
]


@pytest.mark.parametrize(
    ("raw_pod", "added", "want"), [c[1:] for c in CLAIM_ADDED], ids=[c[0] for c in CLAIM_ADDED]
)
def test_hint_claim_added(raw_pod: dict[str, Any], added: Any, want: QueueingHint) -> None:
    assert claim_added(PodInfo(raw_pod), None, added) is want


def _va(attacher: str, pv_name: str | None) -> Any:
    return parse_volume_attachment(volume_attachment("volumeattachment1", "fake-node", attacher, pv_name))


EBS_INLINE = disk_volume("awsElasticBlockStore", volumeID="test")
ATTACHMENT_DELETED = [
    (
        "pod-has-a-pvc",
        pod_with_claims("pvc1", namespace="ns1"),
        _va("test.storage.gke.io", "pv1"),
        QueueingHint.QUEUE,
    ),
    ("inline-ebs-matches-ebs-attacher", pod(EBS_INLINE), _va("ebs.csi.aws.com", None), QueueingHint.QUEUE),
    (
        "inline-gce-against-ebs-attacher",
        pod(disk_volume("gcePersistentDisk", pdName="test")),
        _va("ebs.csi.aws.com", None),
        QueueingHint.SKIP,
    ),
    (
        "inline-ebs-and-pvc",
        pod(EBS_INLINE, {"name": "c", "persistentVolumeClaim": {"claimName": "pvc1"}}),
        _va("ebs.csi.aws.com", None),
        QueueingHint.QUEUE,
    ),
    (
        "inline-ebs-and-pvc-other-attacher",
        pod(EBS_INLINE, {"name": "c", "persistentVolumeClaim": {"claimName": "pvc1"}}),
        _va("test.storage.gke.io", "pv1"),
        QueueingHint.QUEUE,
    ),
    ("pod-without-pvc", pod(namespace="ns1"), _va("test.storage.gke.io", "pv1"), QueueingHint.SKIP),
    (
        "untranslatable-inline-queues",
        pod(disk_volume("azureDisk", diskURI="u")),
        _va("x", None),
        QueueingHint.QUEUE,
    ),
]


@pytest.mark.parametrize(
    ("raw_pod", "deleted", "want"),
    [c[1:] for c in ATTACHMENT_DELETED],
    ids=[c[0] for c in ATTACHMENT_DELETED],
)
def test_hint_attachment_deleted(raw_pod: dict[str, Any], deleted: Any, want: QueueingHint) -> None:
    assert attachment_deleted(PodInfo(raw_pod), deleted, None) is want


def _csi_node(count: int | None) -> Any:
    return parse_csi_node(csi_node("test-node", {"ebs.csi.aws.com": count}))


CSI_NODE_UPDATED = [
    ("limit-raised", _csi_node(1), _csi_node(2), QueueingHint.QUEUE),
    ("limit-decreased", _csi_node(2), _csi_node(1), QueueingHint.SKIP),
    ("limit-unchanged", _csi_node(1), _csi_node(1), QueueingHint.SKIP),
    ("limit-set-where-there-was-none", _csi_node(None), _csi_node(1), QueueingHint.QUEUE),
    ("driver-added", parse_csi_node(csi_node("test-node", {})), _csi_node(3), QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("old", "new_obj", "want"), [c[1:] for c in CSI_NODE_UPDATED], ids=[c[0] for c in CSI_NODE_UPDATED]
)
def test_hint_csi_node_updated(old: Any, new_obj: Any, want: QueueingHint) -> None:
    assert csi_node_updated(PodInfo(pod_with_claims("csi-ebs.csi.aws.com-0")), old, new_obj) is want


def test_registered_events() -> None:
    plugin = new(None, VolumeHandle(objects()))
    events = [(e.event.resource, e.event.action, e.hint) for e in plugin.events_to_register()]
    assert events == [
        (Resource.CSI_NODE, Action.ADD, None),
        (Resource.CSI_NODE, Action.UPDATE, csi_node_updated),
        (Resource.ASSIGNED_POD, Action.DELETE, pod_deleted),  # v1.37: bound pods' deletions only
        (Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD, claim_added),
        (Resource.VOLUME_ATTACHMENT, Action.DELETE, attachment_deleted),
    ]
