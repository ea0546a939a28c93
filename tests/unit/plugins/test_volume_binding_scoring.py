"""VolumeBinding's volume-capacity scoring with ``StorageCapacityScoring`` (upstream's ``scorer_test.go``
and the scoring cases of ``TestVolumeBinding`` at v1.37.2), its default shape and its gate."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _volume_binding_kit import (
    NS,
    FakeHandle,
    capacity,
    claim,
    csi_driver,
    node,
    objects,
    pod_with_claims,
    storage_class,
    volume,
)

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.args import ShapePoint
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects.storage import parse_csi_storage_capacity, parse_persistent_volume_claim
from kopf_scheduler.framework.status import SKIP, Status, unresolvable
from kopf_scheduler.plugins.volume_binding import Args, new
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, Provision
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError
from kopf_scheduler.plugins.volume_binding.scorer import (
    StorageResource,
    VolumeCapacityScorer,
    class_resources,
)

DEFAULT = (ShapePoint(0, 10), ShapePoint(100, 0))
GATE_OFF = FeatureGates((1, 37), {"StorageCapacityScoring": False})
HOSTNAME = "kubernetes.io/hostname"
REGION, ZONE = "topology.kubernetes.io/region", "topology.kubernetes.io/zone"
NO_PV = unresolvable("node(s) didn't find available persistent volumes to bind")


# -- scorer_test.go ------------------------------------------------------------------------------------
def _classes(*pairs: tuple[int, int]) -> dict[str, StorageResource]:
    return {name: StorageResource(r, c) for name, (r, c) in zip(("hdd", "ssd"), pairs, strict=False)}


@pytest.mark.parametrize(
    ("shape", "pairs", "score"),
    [
        (DEFAULT, [(0, 100)], 100),
        (DEFAULT, [(30, 100)], 70),
        (DEFAULT, [(50, 100)], 50),
        (DEFAULT, [(100, 100)], 0),
        (DEFAULT, [(0, 100), (0, 100)], 100),
        (DEFAULT, [(0, 100), (30, 100)], 85),
        (DEFAULT, [(30, 100), (30, 100)], 70),
        (DEFAULT, [(30, 100), (60, 100)], 55),
        (DEFAULT, [(50, 100), (50, 100)], 50),
        (DEFAULT, [(50, 100), (100, 100)], 25),
        (DEFAULT, [(100, 100), (100, 100)], 0),
        *[
            ((ShapePoint(50, 0), ShapePoint(80, 3), ShapePoint(100, 5)), pairs, score)
            for pairs, score in [
                ([(0, 100), (0, 100)], 0),
                ([(0, 100), (30, 100)], 0),
                ([(30, 100), (30, 100)], 0),
                ([(30, 100), (60, 100)], 5),
                ([(50, 100), (100, 100)], 25),
                ([(90, 100), (90, 100)], 40),
                ([(100, 100), (100, 100)], 50),
            ]
        ],
        (DEFAULT, [], 0),
        (DEFAULT, [(1, 0)], 0),  # no capacity: full
        (DEFAULT, [(101, 100)], 0),  # more than the capacity: full
        (DEFAULT, [(1, 3)], 67),  # 33 % -> 67
        # hdd: 100 + (-100 * 1) / 30 = 97 (Go truncates -3.3 to -3), ssd: 100; (97 + 100) / 2 = 98.5 -> 99
        ((ShapePoint(0, 10), ShapePoint(30, 0)), [(1, 100), (0, 100)], 99),
    ],
)
def test_score(shape: tuple[ShapePoint, ...], pairs: list[tuple[int, int]], score: int) -> None:
    assert VolumeCapacityScorer(shape)(_classes(*pairs)) == score


# -- TestVolumeBinding's scoring cases -----------------------------------------------------------------
WAIT_SC, WAIT_HDD_SC, CAPACITY_SC = "wait-sc", "wait-hdd-sc", "wait-sc-with-storage-capacity"
DRIVER = "driver-with-storage-capacity"
CLASSES = [
    storage_class("immediate-sc", mode="Immediate"),
    storage_class(WAIT_SC, provisioner=""),
    storage_class(WAIT_HDD_SC, provisioner=""),
    storage_class(CAPACITY_SC, provisioner=DRIVER),
    csi_driver(DRIVER),
]


def _pv(name: str, storage_class: str, size: str, **affinity: str) -> dict[str, Any]:
    body = volume(name, capacity=size, storage_class=storage_class)
    body["spec"]["nodeAffinity"] = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": key, "operator": "In", "values": [value]} for key, value in affinity.items()
                    ]
                }
            ]
        }
    }
    return body


def _host(name: str) -> dict[str, str]:
    return {HOSTNAME: name}


def _zone(region: str, zone: str) -> dict[str, str]:
    return {REGION: region, ZONE: zone}


def _node(name: str, **labels: str) -> NodeInfo:
    return node(name, **{HOSTNAME: name}, **labels)


def _zonal_node(name: str, region: str, zone: str) -> NodeInfo:
    return node(name, **{HOSTNAME: name, REGION: region, ZONE: zone})


LOCAL = [_node("node-a"), _node("node-b"), _node("node-c")]
ZONAL = [
    _zonal_node(f"zone-{z}-node-{n}", f"region-{z}", f"zone-{z}") for z in ("a", "b", "c") for n in ("a", "b")
]
LOCAL_PVS = [
    _pv("pv-a-0", WAIT_SC, "200Gi", **_host("node-a")),
    _pv("pv-a-1", WAIT_SC, "200Gi", **_host("node-a")),
    _pv("pv-b-0", WAIT_SC, "100Gi", **_host("node-b")),
    _pv("pv-b-1", WAIT_SC, "100Gi", **_host("node-b")),
]
ZONAL_PVS = [
    _pv("pv-a-0", WAIT_SC, "200Gi", **_zone("region-a", "zone-a")),
    _pv("pv-a-1", WAIT_SC, "200Gi", **_zone("region-a", "zone-a")),
    _pv("pv-b-0", WAIT_SC, "100Gi", **_zone("region-b", "zone-b")),
    _pv("pv-b-1", WAIT_SC, "100Gi", **_zone("region-b", "zone-b")),
]
CAPACITIES = [
    capacity("node-a", CAPACITY_SC, "node-a", "100Gi"),
    capacity("node-b", CAPACITY_SC, "node-b", "50Gi"),
    capacity("node-c", CAPACITY_SC, "node-c", "10Gi"),
]
SMALL_CAPACITIES = [
    capacity("node-a", CAPACITY_SC, "node-a", "100Gi"),
    capacity("node-b", CAPACITY_SC, "node-b", "20Gi"),
    capacity("node-c", CAPACITY_SC, "node-c", "10Gi"),
]
RISING = (ShapePoint(0, 0), ShapePoint(100, 10))

# name: (pod's claims, claims, volumes and capacities, nodes, shape (None: the default), gate on,
#        filter statuses, pre-score status, scores)
CASES: dict[str, tuple[Any, ...]] = {
    "local volumes with close capacity are preferred": (
        ["pvc-a"], [claim("pvc-a", "50Gi", storage_class=WAIT_SC)], LOCAL_PVS, LOCAL, None, True,
        [None, None, NO_PV], None, [75, 50, 0],
    ),
    "local volumes with close capacity are preferred (StorageCapacityScoring disabled)": (
        ["pvc-a"], [claim("pvc-a", "50Gi", storage_class=WAIT_SC)], LOCAL_PVS, LOCAL, None, False,
        [None, None, NO_PV], SKIP, None,
    ),
    "local volumes with close capacity are preferred (multiple pvcs)": (
        ["pvc-0", "pvc-1"],
        [claim("pvc-0", "50Gi", storage_class=WAIT_SC), claim("pvc-1", "100Gi", storage_class=WAIT_HDD_SC)],
        [
            _pv("pv-a-0", WAIT_SC, "200Gi", **_host("node-a")),
            _pv("pv-a-1", WAIT_SC, "200Gi", **_host("node-a")),
            _pv("pv-a-2", WAIT_HDD_SC, "200Gi", **_host("node-a")),
            _pv("pv-a-3", WAIT_HDD_SC, "200Gi", **_host("node-a")),
            _pv("pv-b-0", WAIT_SC, "100Gi", **_host("node-b")),
            _pv("pv-b-1", WAIT_SC, "100Gi", **_host("node-b")),
            _pv("pv-b-2", WAIT_HDD_SC, "100Gi", **_host("node-b")),
            _pv("pv-b-3", WAIT_HDD_SC, "100Gi", **_host("node-b")),
        ],
        LOCAL, None, True, [None, None, NO_PV], None, [63, 25, 0],
    ),
    "zonal volumes with close capacity are preferred": (
        ["pvc-a"], [claim("pvc-a", "50Gi", storage_class=WAIT_SC)], ZONAL_PVS, ZONAL, None, True,
        [None, None, None, None, NO_PV, NO_PV], None, [75, 75, 50, 50, 0, 0],
    ),
    "zonal volumes with close capacity are preferred (StorageCapacityScoring disabled)": (
        ["pvc-a"], [claim("pvc-a", "50Gi", storage_class=WAIT_SC)], ZONAL_PVS, ZONAL, None, False,
        [None, None, None, None, NO_PV, NO_PV], SKIP, None,
    ),
    "zonal volumes with close capacity are preferred (custom shape)": (
        ["pvc-a"], [claim("pvc-a", "50Gi", storage_class=WAIT_SC)], ZONAL_PVS, ZONAL,
        (ShapePoint(0, 0), ShapePoint(50, 3), ShapePoint(100, 5)), True,
        [None, None, None, None, NO_PV, NO_PV], None, [15, 15, 30, 30, 0, 0],
    ),
    "storage capacity score": (
        ["pvc-dynamic"], [claim("pvc-dynamic", "10Gi", storage_class=CAPACITY_SC)], CAPACITIES, LOCAL,
        None, True, [None, None, None], None, [90, 80, 0],
    ),
    "storage capacity score with static binds": (
        ["pvc-dynamic", "pvc-static"],
        [
            claim("pvc-dynamic", "10Gi", storage_class=CAPACITY_SC),
            claim("pvc-static", "50Gi", storage_class=WAIT_SC),
        ],
        [
            _pv("pv-static-a", WAIT_SC, "100Gi", **_host("node-a")),
            _pv("pv-static-b", WAIT_SC, "100Gi", **_host("node-b")),
            _pv("pv-static-c", WAIT_SC, "100Gi", **_host("node-c")),
            *CAPACITIES,
        ],
        LOCAL, None, True, [None, None, None], None, [50, 50, 50],
    ),
    "dynamic provisioning with multiple PVCs of the same StorageClass": (
        ["pvc-dynamic-0", "pvc-dynamic-1"],
        [
            claim("pvc-dynamic-0", "50Gi", storage_class=CAPACITY_SC),
            claim("pvc-dynamic-1", "50Gi", storage_class=CAPACITY_SC),
        ],
        [capacity("node-a", CAPACITY_SC, "node-a", "100Gi")], LOCAL[:1], None, True, [None], None, [0],
    ),
    "prefer node with least allocatable": (
        ["pvc-dynamic"], [claim("pvc-dynamic", "10Gi", storage_class=CAPACITY_SC)], SMALL_CAPACITIES, LOCAL,
        RISING, True, [None, None, None], None, [10, 50, 100],
    ),
    "prefer node with maximum allocatable": (
        ["pvc-dynamic"], [claim("pvc-dynamic", "10Gi", storage_class=CAPACITY_SC)], SMALL_CAPACITIES, LOCAL,
        DEFAULT, True, [None, None, None], None, [90, 50, 0],
    ),
}  # fmt: skip


@pytest.mark.parametrize(
    ("claims", "pvcs", "items", "nodes", "shape", "gate", "filtered", "pre_score", "scores"),
    CASES.values(),
    ids=CASES.keys(),
)
def test_volume_binding_scores(
    claims: list[str],
    pvcs: list[Any],
    items: list[Any],
    nodes: list[NodeInfo],
    shape: tuple[ShapePoint, ...] | None,
    gate: bool,
    filtered: list[Status | None],
    pre_score: Status | None,
    scores: list[int] | None,
) -> None:
    gates = FeatureGates((1, 37), {"StorageCapacityScoring": gate})
    handle = FakeHandle(objects(*pvcs, *items, classes=CLASSES), nodes, gates)
    plugin = new(Args(bind_timeout_seconds=300, shape=shape), handle)
    state, pod = CycleState(), pod_with_claims(*claims, name="pod-a")
    assert plugin.pre_filter(state, pod, nodes) == (None, None)
    assert [plugin.filter(state, pod, info) for info in nodes] == filtered
    assert plugin.pre_score(state, pod, NodeSet(handle.snapshot(), np.arange(len(nodes)))) == pre_score
    if scores is None:
        return
    assert [plugin.score(state, pod, info) for info in nodes] == scores
    rows = np.arange(len(nodes))
    assert plugin.score_rows(state, pod, handle.snapshot().table, rows).tolist() == scores


def test_pods_without_claims_to_bind_score_0_everywhere() -> None:
    """With the gate on, pre-score does not skip (upstream's), and a node without a decision (a pod
    without claims, or with every claim bound) scores 0."""
    bound = claim("pvc-a", volume="pv-a", bound=True)
    handle = FakeHandle(objects(bound, volume("pv-a")), LOCAL)
    plugin = new(Args(), handle)
    nodes = NodeSet(handle.snapshot(), np.arange(3))
    for pod in (pod_with_claims(), pod_with_claims("pvc-a")):
        state = CycleState()
        plugin.pre_filter(state, pod, LOCAL)
        assert plugin.pre_score(state, pod, nodes) is None
        assert [plugin.score(state, pod, info) for info in LOCAL] == [0, 0, 0]
        assert plugin.score_rows(state, pod, handle.snapshot().table, np.arange(3)).tolist() == [0, 0, 0]


def test_the_gate_follows_the_emulated_version() -> None:
    """Off at 1.35 and 1.36 (pre-score skips), beta and on at 1.37 (default shape)."""
    for version, scorer in [((1, 35), False), ((1, 36), False), ((1, 37), True)]:
        plugin = new(Args(), FakeHandle(objects(), LOCAL, FeatureGates(version)))
        assert (plugin.scorer is not None) == scorer
        if scorer:
            assert plugin.scorer.shape == [(0, 100), (100, 0)]


def test_a_capacity_without_capacity_is_an_error() -> None:
    """Where kube-scheduler dereferences a nil ``capacity`` (it reported only ``maximumVolumeSize``)
    or a claim without ``spec.storageClassName`` (a beta annotation), the score is an error."""
    only_maximum = parse_csi_storage_capacity(capacity("node-a", CAPACITY_SC, "node-a", maximum="100Gi"))
    with_class = parse_persistent_volume_claim(claim("pvc", "1Gi", storage_class=CAPACITY_SC))
    with pytest.raises(VolumeBindingError) as raised:
        class_resources(PodVolumes(dynamic_provisions=[Provision(with_class, only_maximum)]))
    assert str(raised.value) == f'CSIStorageCapacity "{NS}/node-a" has no capacity to score'
    beta = claim("pvc", "1Gi", storage_class=None)
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": CAPACITY_SC}
    full = parse_csi_storage_capacity(capacity("node-a", CAPACITY_SC, "node-a", "100Gi"))
    with pytest.raises(VolumeBindingError) as raised:
        class_resources(PodVolumes(dynamic_provisions=[Provision(parse_persistent_volume_claim(beta), full)]))
    assert str(raised.value) == f'claim "{NS}/pvc" has no spec.storageClassName to score'
    assert class_resources(PodVolumes(dynamic_provisions=[Provision(with_class, None)])) == {}
