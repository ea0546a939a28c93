"""VolumeRestrictions: upstream's tables (``volume_restrictions_test.go``, v1.37.2) for the in-tree disk
conflicts, ReadWriteOncePod claims and the queueing hints, plus the pre-filter extensions preemption
uses and what upstream leaves untested (read-only mounts, RBD's defaulted pool, unreadable volumes)."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_kit import (
    VolumeHandle,
    disk_volume,
    node_with,
    objects,
    pod,
    pod_with_claims,
    pvc,
    snapshot,
)

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import OBJECT_EVENTS, Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.objects.storage import parse_persistent_volume_claim
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    new,
)
from kopf_scheduler.plugins.volume_restrictions.plugin import claim_added, pod_deleted

DISK_CONFLICT = unschedulable(ERR_REASON_DISK_CONFLICT)
RWOP_CONFLICT = unschedulable(
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
    "another pod"
)

GCE = disk_volume("gcePersistentDisk", pdName="foo")
GCE_2 = disk_volume("gcePersistentDisk", pdName="bar")
GCE_RO = disk_volume("gcePersistentDisk", pdName="foo", readOnly=True)
AWS = disk_volume("awsElasticBlockStore", volumeID="foo")
AWS_2 = disk_volume("awsElasticBlockStore", volumeID="bar")
AWS_RO = disk_volume("awsElasticBlockStore", volumeID="foo", readOnly=True)
RBD = disk_volume("rbd", monitors=["a", "b"], pool="foo", image="bar", fsType="ext4")
RBD_2 = disk_volume("rbd", monitors=["c", "d"], pool="foo", image="bar", fsType="ext4")
RBD_RO = disk_volume("rbd", monitors=["b"], pool="foo", image="bar", readOnly=True)
RBD_DEFAULT_POOL = disk_volume("rbd", monitors=["a"], image="img")
RBD_EXPLICIT_POOL = disk_volume("rbd", monitors=["a"], pool="rbd", image="img")
ISCSI = disk_volume("iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2016-12.server:storage.target01", lun=0)
ISCSI_2 = disk_volume(
    "iscsi", targetPortal="127.0.0.1:3260", iqn="iqn.2017-12.server:storage.target01", lun=0
)
ISCSI_RO = disk_volume("iscsi", iqn="iqn.2016-12.server:storage.target01", readOnly=True)
NO_RESTRICTION = {"name": "volume with no restriction", "emptyDir": {}}


def _run(raw_pod: dict[str, Any], node: Any, store: Any = None) -> tuple[Status | None, Status | None]:
    """(pre-filter status, filter status or None when pre-filter did not succeed)."""
    plugin = new(None, VolumeHandle(store or objects(), snapshot(node)))
    state, info = CycleState(), PodInfo(raw_pod)
    _, pre = plugin.pre_filter(state, info, [node])
    if pre is not None:
        return pre, None
    return pre, plugin.filter(state, info, node)


DISK_CASES = [
    # (id, pod volumes, existing pods' volumes, pre-filter, filter)
    ("gce-nothing", [], [], SKIP, None),
    ("gce-one-state", [], [[GCE]], SKIP, None),
    ("gce-same-state", [GCE], [[GCE]], None, DISK_CONFLICT),
    ("gce-different-state", [GCE_2], [[GCE]], None, None),
    ("gce-no-restriction-volume", [NO_RESTRICTION], [], SKIP, None),
    ("aws-nothing", [], [], SKIP, None),
    ("aws-one-state", [], [[AWS]], SKIP, None),
    ("aws-same-state", [AWS], [[AWS]], None, DISK_CONFLICT),
    ("aws-different-state", [AWS_2], [[AWS]], None, None),
    ("rbd-nothing", [], [], SKIP, None),
    ("rbd-one-state", [], [[RBD]], SKIP, None),
    ("rbd-same-state", [RBD], [[RBD]], None, DISK_CONFLICT),
    ("rbd-different-monitors", [RBD_2], [[RBD]], None, None),
    ("iscsi-nothing", [], [], SKIP, None),
    ("iscsi-one-state", [], [[ISCSI]], SKIP, None),
    ("iscsi-same-state", [ISCSI], [[ISCSI]], None, DISK_CONFLICT),
    ("iscsi-different-state", [ISCSI_2], [[ISCSI]], None, None),
    # beyond upstream's tables
    ("gce-read-only-against-read-write", [GCE_RO], [[GCE]], None, DISK_CONFLICT),
    ("gce-both-read-only", [GCE_RO], [[GCE_RO]], None, None),
    ("aws-both-read-only-still-conflict", [AWS_RO], [[AWS_RO]], None, DISK_CONFLICT),
    ("rbd-one-shared-monitor", [RBD], [[RBD_RO]], None, DISK_CONFLICT),
    ("rbd-both-read-only", [RBD_RO], [[RBD_RO]], None, None),
    ("rbd-unset-pool-is-rbd", [RBD_DEFAULT_POOL], [[RBD_EXPLICIT_POOL]], None, DISK_CONFLICT),
    ("iscsi-both-read-only", [ISCSI_RO], [[ISCSI_RO]], None, None),
    ("different-kinds-never-conflict", [GCE], [[AWS], [NO_RESTRICTION]], None, None),
    ("second-pod-on-node-conflicts", [AWS], [[GCE_2], [AWS]], None, DISK_CONFLICT),
]


@pytest.mark.parametrize(
    ("volumes", "existing", "pre", "want"), [c[1:] for c in DISK_CASES], ids=[c[0] for c in DISK_CASES]
)
def test_disk_conflicts(
    volumes: list[dict[str, Any]],
    existing: list[list[dict[str, Any]]],
    pre: Status | None,
    want: Status | None,
) -> None:
    node = node_with(*(pod(*vols, name=f"e{i}", node="node-1") for i, vols in enumerate(existing)))
    assert _run(pod(*volumes), node) == (pre, want)


# -- ReadWriteOncePod (TestAccessModeConflicts) ---------------------------------------------------------
RWOP_1 = pvc("claim-with-rwop-1", access_modes=["ReadWriteOncePod"])
RWOP_2 = pvc("claim-with-rwop-2", access_modes=["ReadWriteOncePod"])
RWX = pvc("claim-with-rwx", access_modes=["ReadWriteMany"])
ON_NODE_ONE = pod_with_claims("claim-with-rwop-1", name="pod-with-one-pvc", node="node-1")
ON_NODE_TWO = pod_with_claims(
    "claim-with-rwop-1", "claim-with-rwop-2", name="pod-with-two-pvcs", node="node-1"
)
ON_NODE_RWX = pod_with_claims("claim-with-rwx", name="pod-with-rwx", node="node-1")

ACCESS_CASES = [
    # (id, pod, existing pods, claims, pre-filter, filter)
    ("nothing", pod(), [], [], SKIP, None),
    (
        "failed-to-get-pvc",
        pod_with_claims("claim-with-rwop-1"),
        [],
        [],
        unresolvable('persistentvolumeclaim "claim-with-rwop-1" not found'),
        None,
    ),
    (
        "no-access-mode-conflict",
        pod_with_claims("claim-with-rwop-1"),
        [ON_NODE_RWX],
        [RWOP_1, RWX],
        SKIP,
        None,
    ),
    (
        "access-mode-conflict-unschedulable",
        pod_with_claims("claim-with-rwop-1", name="pod-with-one-conflict"),
        [ON_NODE_ONE, ON_NODE_RWX],
        [RWOP_1, RWX],
        None,
        RWOP_CONFLICT,
    ),
    (
        "two-conflicts-unschedulable",
        pod_with_claims("claim-with-rwop-1", "claim-with-rwop-2", name="pod-with-two-conflicts"),
        [ON_NODE_TWO, ON_NODE_RWX],
        [RWOP_1, RWOP_2, RWX],
        None,
        RWOP_CONFLICT,
    ),
    # beyond upstream's table: the claim's user in another namespace is another claim
    (
        "same-name-other-namespace",
        pod_with_claims("claim-with-rwop-1"),
        [pod_with_claims("claim-with-rwop-1", namespace="other", node="node-1")],
        [RWOP_1, pvc("claim-with-rwop-1", "other", access_modes=["ReadWriteOncePod"])],
        SKIP,
        None,
    ),
]


@pytest.mark.parametrize(
    ("raw_pod", "existing", "claims", "pre", "want"),
    [c[1:] for c in ACCESS_CASES],
    ids=[c[0] for c in ACCESS_CASES],
)
def test_access_mode_conflicts(
    raw_pod: dict[str, Any],
    existing: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    pre: Status | None,
    want: Status | None,
) -> None:
    assert _run(raw_pod, node_with(*existing), objects(*claims)) == (pre, want)


def test_the_conflict_holds_on_every_node_and_preemption_of_the_holder_lifts_it() -> None:
    holder = PodInfo(ON_NODE_ONE)
    here, elsewhere = node_with(ON_NODE_ONE, name="node-1"), node_with(name="node-2")
    plugin = new(None, VolumeHandle(objects(RWOP_1), snapshot(here, elsewhere)))
    state, incoming = CycleState(), PodInfo(pod_with_claims("claim-with-rwop-1", name="incoming"))
    assert plugin.pre_filter(state, incoming, [here, elsewhere]) == (None, None)
    assert plugin.filter(state, incoming, elsewhere) == RWOP_CONFLICT
    trial = state.clone()
    assert plugin.remove_pod(trial, incoming, holder, here) is None
    assert plugin.filter(trial, incoming, here) is None
    assert plugin.filter(state, incoming, here) == RWOP_CONFLICT  # the original state is untouched
    assert plugin.add_pod(trial, incoming, holder, here) is None
    assert plugin.filter(trial, incoming, here) == RWOP_CONFLICT


def test_filter_without_pre_filter_state_is_upstreams_error() -> None:
    plugin = new(None, VolumeHandle(objects()))
    status = plugin.filter(CycleState(), PodInfo(pod()), node_with())
    assert status == error('cannot read "PreFilterVolumeRestrictions" from cycleState')


def test_an_unreadable_volume_names_the_field() -> None:
    raw = pod({"name": "v", "persistentVolumeClaim": {"claimName": 7}})
    plugin = new(None, VolumeHandle(objects()))
    _, status = plugin.pre_filter(CycleState(), PodInfo(raw), [])
    assert status is not None and status.code is Code.ERROR
    assert status.reasons == ("spec.volumes[0].persistentVolumeClaim.claimName: must be a string, not 7",)


# -- queueing hints -------------------------------------------------------------------------------------
HINT_POD_DELETED = [
    ("queue-gce-conflict", pod(GCE), pod(GCE), QueueingHint.QUEUE),
    ("skip-gce-no-conflict", pod(GCE), pod(GCE_2), QueueingHint.SKIP),
    ("queue-aws-conflict", pod(AWS), pod(AWS), QueueingHint.QUEUE),
    ("skip-aws-no-conflict", pod(AWS), pod(AWS_2), QueueingHint.SKIP),
    ("queue-rbd-conflict", pod(RBD), pod(RBD), QueueingHint.QUEUE),
    ("skip-rbd-no-conflict", pod(RBD), pod(RBD_2), QueueingHint.SKIP),
    ("queue-iscsi-conflict", pod(ISCSI), pod(ISCSI), QueueingHint.QUEUE),
    ("skip-iscsi-no-conflict", pod(ISCSI), pod(ISCSI_2), QueueingHint.SKIP),
    (
        "queue-has-same-claim",
        pod_with_claims("claim-rwop"),
        pod_with_claims("claim-rwop", name="p2"),
        QueueingHint.QUEUE,
    ),
    (
        "skip-no-same-claim",
        pod_with_claims("claim-1-rwop"),
        pod_with_claims("claim-2-rwop", name="p2"),
        QueueingHint.SKIP,
    ),
    ("skip-other-namespace", pod(AWS), pod(AWS, namespace="other"), QueueingHint.SKIP),
]


@pytest.mark.parametrize(
    ("raw_pod", "deleted", "want"), [c[1:] for c in HINT_POD_DELETED], ids=[c[0] for c in HINT_POD_DELETED]
)
def test_hint_pod_deleted(raw_pod: dict[str, Any], deleted: dict[str, Any], want: QueueingHint) -> None:
    assert pod_deleted(PodInfo(raw_pod), PodInfo(deleted), None) is want


POD_ONE = pod_with_claims("claim-with-rwx-1", name="pod-with-one-pvc", node="node-1")
POD_TWO = pod_with_claims("claim-with-rwx-1", "claim-with-rwx-2", name="pod-with-two-pvcs", node="node-1")
POD_KUBE_SYSTEM = pod_with_claims("claim-with-rwx-1", namespace="kube-system", node="node-1")
PVC_1 = parse_persistent_volume_claim(pvc("claim-with-rwx-1", access_modes=["ReadWriteMany"]))
PVC_2 = parse_persistent_volume_claim(pvc("claim-with-rwx-2", access_modes=["ReadWriteMany"]))

HINT_CLAIM_ADDED = [
    ("queue-new-object-pvc-belong-pod", POD_TWO, PVC_1, QueueingHint.QUEUE),
    ("skip-new-object-unused", POD_ONE, PVC_2, QueueingHint.SKIP),
    ("skip-new-object-namespace-not-equal-pod", POD_KUBE_SYSTEM, PVC_1, QueueingHint.SKIP),
    ("queue-on-an-unexpected-object", POD_ONE, "not-a-pvc", QueueingHint.QUEUE),
]


@pytest.mark.parametrize(
    ("raw_pod", "added", "want"), [c[1:] for c in HINT_CLAIM_ADDED], ids=[c[0] for c in HINT_CLAIM_ADDED]
)
def test_hint_claim_added(raw_pod: dict[str, Any], added: Any, want: QueueingHint) -> None:
    assert claim_added(PodInfo(raw_pod), None, added) is want


def test_registered_events() -> None:
    plugin = new(None, VolumeHandle(objects()))
    events = {(e.event.resource, e.event.action): e.hint for e in plugin.events_to_register()}
    assert events == {
        (Resource.ASSIGNED_POD, Action.DELETE): pod_deleted,
        (Resource.NODE, Action.ADD): None,
        (Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD): claim_added,
    }
    assert ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD).matches(
        OBJECT_EVENTS[Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD]
    )
