"""NodeVolumeLimits: upstream's ``TestCSILimits`` table (``nodevolumelimits/csi_test.go``, v1.37.2) with
its fixtures rebuilt: four claims and volumes per driver (``csi-<driver>-<j>``, in-tree ones as AWS EBS
or hostPath volumes), claims ``csi-4`` (unbound, class ``csi-sc``), ``csi-5`` (no class), ``csi-6``
(bound to a missing volume), the class's provisioner the first driver, the node's CSINode per
``limit source`` with AWS EBS migration announced, and ``va`` VolumeAttachments per driver.

Upstream's fakes word a missing claim ``persistentvolumeclaims "x" not found``; the informer listers
kube-scheduler reads say ``persistentvolumeclaim``, which these expectations follow."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_kit import (
    VolumeHandle,
    claim_volume,
    csi_node,
    disk_volume,
    ephemeral_volume,
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
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, error, unresolvable, unschedulable
from kopf_scheduler.plugins.node_volume_limits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, new

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
IN_TREE_EBS = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"
NODE = "node-for-max-pd-test-1"
SC = "csi-sc"
EXCEEDED = unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def _volumes_of(driver: str) -> list[dict[str, Any]]:
    out = []
    for j in range(4):
        name = f"csi-{driver}-{j}"
        if driver == IN_TREE_EBS:
            out.append(pv(name, awsElasticBlockStore={"volumeID": name}))
        elif driver == HOSTPATH:
            out.append(pv(name, hostPath={"path": "/tmp"}))
        else:
            out.append(pv(name, csi={"driver": driver, "volumeHandle": name}))
        out.append(pvc(name, volume=name))
    return out


def cluster(drivers: list[str], source: str, limit: int, va: int, extra: list[dict[str, Any]]) -> Any:
    raws: list[dict[str, Any]] = [storage_class(SC, drivers[0])]
    for driver in drivers:
        raws += _volumes_of(driver)
        raws += [volume_attachment(f"va-{driver}-{j}", NODE, driver, f"csi-{driver}-{j}") for j in range(va)]
    raws += [
        pvc("csi-4", storage_class=SC),
        pvc("csi-5"),
        pvc("csi-6", storage_class=SC, volume="missing-in-action"),
    ]
    if source == "csinode":
        raws.append(csi_node(NODE, dict.fromkeys(drivers, limit), migrated=[IN_TREE_EBS]))
    elif source == "csinode-with-no-limit":
        raws.append(csi_node(NODE, dict.fromkeys(drivers), migrated=[IN_TREE_EBS]))
    return objects(*raws, *extra)


def _pod(*claims: str, name: str = "p") -> dict[str, Any]:
    return pod_with_claims(*claims, name=name)


RUNNING = _pod(f"csi-{EBS}-3", name="running")
PENDING_VOLUME = _pod("csi-4", name="pending-volume")
UNBOUND_2 = _pod("csi-4", name="unbound-2")
MISSING_PV = _pod("csi-6", name="missing-pv")
NO_SC = _pod("csi-5", name="no-sc")
GCE_TWO = _pod(f"csi-{GCE}-1", f"csi-{GCE}-2", name="gce-two")
IN_TREE_ONE = _pod(f"csi-{IN_TREE_EBS}-0", name="in-tree-one")
IN_TREE_TWO = _pod(f"csi-{IN_TREE_EBS}-1", f"csi-{IN_TREE_EBS}-2", name="in-tree-two")
EBS_ONE = _pod(f"csi-{EBS}-0", name="ebs-one")
EBS_TWO = _pod(f"csi-{EBS}-1", f"csi-{EBS}-2", name="ebs-two")
NON_MIGRATABLE = _pod(f"csi-{HOSTPATH}-0", name="non-migratable")
EPHEMERAL = pod(ephemeral_volume("xyz"), name="abc", namespace="test", uid="12345")
EPHEMERAL_CLAIM = pvc("abc-xyz", "test", storage_class=SC, owner_uid="12345")
CONFLICTING_CLAIM = pvc("abc-xyz", "test", storage_class=SC)
EPHEMERAL_TWO = pod(ephemeral_volume("x"), ephemeral_volume("y"), name="abc", namespace="test", uid="12345II")
CLAIM_X = pvc("abc-x", "test", storage_class=SC, owner_uid="12345II")
CLAIM_Y = pvc("abc-y", "test", storage_class=SC, owner_uid="12345II")
INLINE = pod(disk_volume("awsElasticBlockStore", volumeID="aws-inline1"), name="inline")
INLINE_SAME_ID = pod(disk_volume("awsElasticBlockStore", volumeID=f"csi-{EBS}-1"), name="inline-same-id")
CONFIG = [{"name": "cm", "configMap": {"name": "c"}}, {"name": "s", "secret": {"secretName": "s"}}]
ONLY_CONFIG = pod(*CONFIG, name="only-config")
CLAIM_AND_CONFIG = pod(*CONFIG, claim_volume(f"csi-{EBS}-0"), name="claim-and-config")
EPHEMERAL_AND_CONFIG = pod(*CONFIG, ephemeral_volume("xyz"), name="abc", namespace="test")
INLINE_AND_CONFIG = pod(
    *CONFIG, disk_volume("awsElasticBlockStore", volumeID="aws-inline1"), name="inline-cfg"
)

NOT_FOUND_ABC_XYZ = unresolvable('looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found')
MIGRATING = [IN_TREE_EBS, EBS]

# (id, new pod, existing pods, extra claims, max volumes, va count, drivers, limit source, filter, pre)
CASES: list[tuple[Any, ...]] = [
    ("count-volume-attachments-when-no-pods", EBS_ONE, [], [], 2, 2, [EBS], "csinode", EXCEEDED, None),
    ("attachments-within-limit", EBS_ONE, [], [], 2, 1, [EBS], "csinode", None, None),
    ("fits-when-limit-geq-volumes", EBS_ONE, [RUNNING, EBS_TWO], [], 4, 0, [EBS], "csinode", None, None),
    (
        "doesnt-when-limit-leq-volumes",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        [],
        2,
        0,
        [EBS],
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "driver-without-limits",
        EBS_ONE,
        [RUNNING, EBS_TWO],
        [],
        2,
        0,
        [EBS],
        "csinode-with-no-limit",
        None,
        None,
    ),
    ("count-pending-pvcs", EBS_ONE, [PENDING_VOLUME, EBS_TWO], [], 2, 0, [EBS], "csinode", EXCEEDED, None),
    (
        "same-pending-pvc-counts-once",
        EBS_ONE,
        [PENDING_VOLUME, UNBOUND_2, EBS_TWO],
        [],
        4,
        0,
        [EBS],
        "csinode",
        None,
        None,
    ),
    (
        "pvc-with-missing-pv-counts-by-class",
        EBS_ONE,
        [MISSING_PV, EBS_TWO],
        [],
        2,
        0,
        [EBS],
        "csinode",
        EXCEEDED,
        None,
    ),
    ("pvc-without-class-not-counted", EBS_ONE, [RUNNING, NO_SC], [], 2, 0, [EBS], "csinode", None, None),
    ("same-type-counted", EBS_ONE, [GCE_TWO, EBS_TWO], [], 2, 0, [EBS, GCE], "csinode", EXCEEDED, None),
    ("other-type-not-counted", GCE_TWO, [EBS_TWO, RUNNING], [], 2, 0, [EBS, GCE], "csinode", None, None),
    (
        "in-tree-counted-with-migration",
        IN_TREE_ONE,
        [IN_TREE_TWO],
        [],
        2,
        0,
        MIGRATING,
        "csinode",
        EXCEEDED,
        None,
    ),
    ("nil-csi-node", INLINE, [IN_TREE_TWO], [], 0, 0, MIGRATING, "", None, None),
    (
        "unbound-in-tree-counted",
        PENDING_VOLUME,
        [IN_TREE_TWO],
        [],
        2,
        0,
        MIGRATING,
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "no-limit-reported",
        IN_TREE_ONE,
        [IN_TREE_TWO],
        [],
        2,
        0,
        MIGRATING,
        "csinode-with-no-limit",
        None,
        None,
    ),
    (
        "non-migratable-not-counted",
        NON_MIGRATABLE,
        [EBS_TWO],
        [],
        2,
        0,
        [HOSTPATH, EBS],
        "csinode",
        None,
        None,
    ),
    ("in-tree-inline-counted", INLINE, [IN_TREE_TWO], [], 2, 0, MIGRATING, "csinode", EXCEEDED, None),
    ("in-tree-and-csi-counted", IN_TREE_ONE, [EBS_TWO], [], 2, 0, MIGRATING, "csinode", EXCEEDED, None),
    (
        "in-tree-inline-and-csi",
        INLINE,
        [EBS_TWO, IN_TREE_ONE],
        [],
        3,
        0,
        MIGRATING,
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "inline-same-handle-counts-once",
        INLINE_SAME_ID,
        [EBS_TWO, IN_TREE_ONE],
        [],
        3,
        0,
        MIGRATING,
        "csinode",
        None,
        None,
    ),
    ("csi-and-in-tree-counted", EBS_ONE, [IN_TREE_TWO], [], 2, 0, MIGRATING, "csinode", EXCEEDED, None),
    (
        "ephemeral-volume-missing",
        EPHEMERAL,
        [],
        [],
        0,
        0,
        [EBS],
        "csinode-with-no-limit",
        NOT_FOUND_ABC_XYZ,
        None,
    ),
    (
        "ephemeral-volume-not-owned",
        EPHEMERAL,
        [],
        [CONFLICTING_CLAIM],
        0,
        0,
        [EBS],
        "csinode-with-no-limit",
        error("PVC test/abc-xyz was not created for pod test/abc (pod is not owner)"),
        None,
    ),
    (
        "ephemeral-volume-unbound",
        EPHEMERAL,
        [],
        [EPHEMERAL_CLAIM],
        0,
        0,
        [EBS],
        "csinode-with-no-limit",
        None,
        None,
    ),
    (
        "ephemeral-exceeds",
        EPHEMERAL,
        [RUNNING, EBS_TWO],
        [EPHEMERAL_CLAIM],
        2,
        0,
        [EBS],
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "existing-ephemeral-counted",
        EBS_ONE,
        [RUNNING, EPHEMERAL_TWO],
        [CLAIM_X, CLAIM_Y],
        2,
        0,
        [EBS],
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "persistent-plus-ephemeral-exceeds",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        3,
        0,
        [EBS],
        "csinode",
        EXCEEDED,
        None,
    ),
    (
        "persistent-plus-ephemeral-fits",
        EBS_ONE,
        [RUNNING, EPHEMERAL, EBS_TWO],
        [EPHEMERAL_CLAIM],
        5,
        0,
        [EBS],
        "csinode",
        None,
        None,
    ),
    ("only-configmaps-and-secrets-skip", ONLY_CONFIG, [], [], 2, 0, [EBS], "csinode", None, SKIP),
    ("claims-do-not-skip", CLAIM_AND_CONFIG, [], [], 2, 0, [EBS], "csinode", None, None),
    (
        "ephemeral-does-not-skip",
        EPHEMERAL_AND_CONFIG,
        [],
        [],
        0,
        0,
        [EBS],
        "csinode-with-no-limit",
        NOT_FOUND_ABC_XYZ,
        None,
    ),
    (
        "inline-migratable-does-not-skip",
        INLINE_AND_CONFIG,
        [IN_TREE_TWO],
        [],
        2,
        0,
        MIGRATING,
        "csinode",
        EXCEEDED,
        None,
    ),
]


@pytest.mark.parametrize(
    ("new_pod", "existing", "extra", "limit", "va", "drivers", "source", "want", "want_pre"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_csi_limits(
    new_pod: dict[str, Any],
    existing: list[dict[str, Any]],
    extra: list[dict[str, Any]],
    limit: int,
    va: int,
    drivers: list[str],
    source: str,
    want: Status | None,
    want_pre: Status | None,
) -> None:
    plugin = new(None, VolumeHandle(cluster(drivers, source, limit, va, extra)))
    node = node_with(*existing, name=NODE)
    state, info = CycleState(), PodInfo(new_pod)
    _, pre = plugin.pre_filter(state, info, [node])
    assert pre == want_pre
    if pre is None:
        assert plugin.filter(state, info, node) == want
