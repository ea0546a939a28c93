"""VolumeZone: upstream's tables (``volume_zone_test.go``, v1.37.2): single zone, multi-zone labels,
claims not yet bound, and the queueing hints, with whole statuses.

Upstream's tests read fakes whose not-found texts are plural (``storageclasses.storage.k8s.io``) and a
class without a binding mode; kube-scheduler reads informer listers (singular) and classes the API
server defaulted to Immediate, which these expectations follow."""

from __future__ import annotations

from typing import Any

import pytest
from _volume_kit import VolumeHandle, node_with, objects, pod, pod_with_claims, pv, pvc, storage_class

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, QueueingHint, Resource
from kopf_scheduler.framework.objects.storage import (
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Status, unresolvable
from kopf_scheduler.plugins.volume_zone import ERR_REASON_CONFLICT, new
from kopf_scheduler.plugins.volume_zone.plugin import (
    BETA_REGION,
    BETA_ZONE,
    REGION,
    ZONE,
    claim_changed,
    storage_class_added,
    volume_changed,
)

CONFLICT = unresolvable(ERR_REASON_CONFLICT)


def _run(store: Any, raw_pod: dict[str, Any], labels: dict[str, str]) -> tuple[Status | None, Status | None]:
    """(pre-filter, filter); filter runs whatever pre-filter said, as upstream's tests call both."""
    plugin = new(None, VolumeHandle(store))
    node = node_with(name="host1", labels=labels)
    state, info = CycleState(), PodInfo(raw_pod)
    _, pre = plugin.pre_filter(state, info, [node])
    return pre, plugin.filter(state, info, node)


def _claim_of(name: str, volume: str) -> dict[str, Any]:
    return pvc(name, volume=volume)


SINGLE_ZONE = objects(
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", {BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
    _claim_of("PVC_1", "Vol_1"),
    _claim_of("PVC_2", "Vol_2"),
    _claim_of("PVC_3", "Vol_3"),
    _claim_of("PVC_4", "Vol_not_exist"),
    _claim_of("PVC_Stable_1", "Vol_Stable_1"),
    _claim_of("PVC_Stable_2", "Vol_Stable_2"),
    _claim_of("PVC_Stable_3", "Vol_Stable_3"),
)
USELESS = {"uselessLabel": "none"}

SINGLE_ZONE_CASES = [
    # (id, claim of the pod (None: no volume), node labels, pre-filter, filter)
    ("pod-without-volume", None, {BETA_ZONE: "us-west1-a"}, SKIP, None),
    ("node-without-labels", "PVC_1", {}, None, None),
    ("beta-zone-label-matched", "PVC_1", {BETA_ZONE: "us-west1-a", **USELESS}, None, None),
    ("beta-region-label-matched", "PVC_2", {BETA_REGION: "us-west1", **USELESS}, None, None),
    ("beta-region-label-doesnt-match", "PVC_2", {BETA_REGION: "no_us-west1", **USELESS}, None, CONFLICT),
    ("beta-zone-label-doesnt-match", "PVC_1", {BETA_ZONE: "no_us-west1-a", **USELESS}, None, CONFLICT),
    ("zone-label-matched", "PVC_Stable_1", {ZONE: "us-west1-a", **USELESS}, None, None),
    ("region-label-matched", "PVC_Stable_2", {REGION: "us-west1", **USELESS}, None, None),
    ("region-label-doesnt-match", "PVC_Stable_2", {REGION: "no_us-west1", **USELESS}, None, CONFLICT),
    ("zone-label-doesnt-match", "PVC_Stable_1", {ZONE: "no_us-west1-a", **USELESS}, None, CONFLICT),
    ("pv-with-zone-and-region-node-with-only-zone", "PVC_Stable_3", {ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv-with-zone-node-with-beta-zone", "PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, None, CONFLICT),
    ("pv-with-beta-label-node-with-ga-label-matched", "PVC_1", {ZONE: "us-west1-a"}, None, None),
    ("pv-with-beta-label-node-with-ga-label-doesnt-match", "PVC_1", {ZONE: "us-west1-b"}, None, CONFLICT),
    # beyond upstream's table
    (
        "claim-bound-to-a-missing-volume",
        "PVC_4",
        {ZONE: "us-west1-a"},
        unresolvable('persistentvolume "Vol_not_exist" not found'),
        unresolvable('persistentvolume "Vol_not_exist" not found'),
    ),
    (
        "missing-claim",
        "PVC_nope",
        {ZONE: "us-west1-a"},
        unresolvable('persistentvolumeclaim "PVC_nope" not found'),
        unresolvable('persistentvolumeclaim "PVC_nope" not found'),
    ),
]


@pytest.mark.parametrize(
    ("claim", "labels", "pre", "want"),
    [c[1:] for c in SINGLE_ZONE_CASES],
    ids=[c[0] for c in SINGLE_ZONE_CASES],
)
def test_single_zone(
    claim: str | None, labels: dict[str, str], pre: Status | None, want: Status | None
) -> None:
    raw = pod_with_claims(claim, name="pod_1") if claim else pod(name="pod_1")
    assert _run(SINGLE_ZONE, raw, labels) == (pre, want)


MULTI_ZONE = objects(
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_blank_zone", {ZONE: "us-west1-a__", REGION: "us-west1"}),
    _claim_of("PVC_1", "Vol_1"),
    _claim_of("PVC_2", "Vol_2"),
    _claim_of("PVC_3", "Vol_3"),
    _claim_of("PVC_Stable_1", "Vol_Stable_1"),
    _claim_of("PVC_Stable_2", "Vol_Stable_2"),
    _claim_of("PVC_blank_zone", "Vol_blank_zone"),
)

MULTI_ZONE_CASES = [
    ("node-without-labels", "PVC_3", {}, None),
    ("beta-zone-label-matched", "PVC_3", {BETA_ZONE: "us-west1-a", **USELESS}, None),
    ("beta-zone-label-doesnt-match", "PVC_1", {BETA_ZONE: "us-west1-b", **USELESS}, CONFLICT),
    ("zone-label-matched", "PVC_Stable_2", {ZONE: "us-west1-a", **USELESS}, None),
    ("zone-label-doesnt-match", "PVC_Stable_1", {ZONE: "us-west1-b", **USELESS}, CONFLICT),
    # a label with an empty zone is ignored (LabelZonesToSet fails); the region still counts
    ("blank-zone-entry-ignored", "PVC_blank_zone", {ZONE: "anywhere", REGION: "us-west1"}, None),
    ("blank-zone-entry-region-still-checked", "PVC_blank_zone", {ZONE: "us-west1-a", REGION: "x"}, CONFLICT),
]


@pytest.mark.parametrize(
    ("claim", "labels", "want"), [c[1:] for c in MULTI_ZONE_CASES], ids=[c[0] for c in MULTI_ZONE_CASES]
)
def test_multi_zone(claim: str, labels: dict[str, str], want: Status | None) -> None:
    assert _run(MULTI_ZONE, pod_with_claims(claim, name="pod_1"), labels) == (None, want)


WITH_BINDING = objects(
    storage_class("Class_Immediate"),
    storage_class("Class_Wait", mode="WaitForFirstConsumer"),
    pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    _claim_of("PVC_1", "Vol_1"),
    pvc("PVC_NoSC", storage_class="Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
    pvc(
        "PVC_BetaAnnotation",
        storage_class="Class_Immediate",
        annotations={"volume.beta.kubernetes.io/storage-class": "Class_Wait"},
    ),
    pvc("PVC_EmptyName"),
)
TEST_NODE = {BETA_ZONE: "us-west1-a", **USELESS}


def _both(status: Status) -> tuple[Status, Status]:
    return status, status


WITH_BINDING_CASES = [
    ("label-zone-failure-domain-matched", "PVC_1", (None, None)),
    (
        "unbound-volume-empty-storage-class",
        "PVC_EmptySC",
        _both(unresolvable("PersistentVolumeClaim had no pv name and storageClass name")),
    ),
    (
        "unbound-volume-no-storage-class",
        "PVC_NoSC",
        _both(unresolvable('storageclass.storage.k8s.io "Class_0" not found')),
    ),
    (
        "unbound-volume-immediate-binding-mode",
        "PVC_ImmediateSC",
        _both(unresolvable("PersistentVolume had no name")),
    ),
    ("unbound-volume-wait-binding-mode", "PVC_WaitSC", (SKIP, None)),
    ("the-beta-class-annotation-wins", "PVC_BetaAnnotation", (SKIP, None)),
    ("a-claim-volume-without-a-name", "", _both(unresolvable("PersistentVolumeClaim had no name"))),
]


@pytest.mark.parametrize(
    ("claim", "want"), [c[1:] for c in WITH_BINDING_CASES], ids=[c[0] for c in WITH_BINDING_CASES]
)
def test_with_binding(claim: str, want: tuple[Status | None, Status | None]) -> None:
    raw = pod({"name": "data", "persistentVolumeClaim": {"claimName": claim}}, name="pod_1")
    assert _run(WITH_BINDING, raw, TEST_NODE) == want


def test_ephemeral_volumes_are_not_looked_at() -> None:
    raw = pod({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    assert _run(objects(), raw, TEST_NODE) == (SKIP, None)


# -- queueing hints -------------------------------------------------------------------------------------
def _claim(name: str, namespace: str = "default", volume: str = "") -> Any:
    return parse_persistent_volume_claim(pvc(name, namespace, volume=volume))


POD_1 = pod_with_claims("PVC_1", name="pod_1")
CLAIM_CASES = [
    ("queue-on-an-unexpected-object", POD_1, None, "not-a-pvc", QueueingHint.QUEUE),
    (
        "pvc-added-but-pod-refers-no-pvc",
        pod(name="pod_1"),
        None,
        _claim("PVC_1", volume="Vol_1"),
        QueueingHint.SKIP,
    ),
    ("pvc-added-pod-bound-to-other-pvc", pod_with_claims("PVC_2"), None, _claim("PVC_1"), QueueingHint.SKIP),
    ("pvc-added-pod-refers-to-it-other-ns", POD_1, None, _claim("PVC_1", "ns1"), QueueingHint.SKIP),
    ("pvc-added-pod-refers-to-it", POD_1, None, _claim("PVC_1", volume="Vol_1"), QueueingHint.QUEUE),
    (
        "pvc-updated-pod-refers-to-it",
        POD_1,
        _claim("PVC_1"),
        _claim("PVC_1", volume="Vol_1"),
        QueueingHint.QUEUE,
    ),
    (
        "pvc-updated-pod-refers-no-pvc",
        pod(),
        _claim("PVC_1"),
        _claim("PVC_1", volume="Vol_1"),
        QueueingHint.SKIP,
    ),
]


@pytest.mark.parametrize(
    ("raw_pod", "old", "new_obj", "want"), [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES]
)
def test_hint_claim_changed(raw_pod: dict[str, Any], old: Any, new_obj: Any, want: QueueingHint) -> None:
    assert claim_changed(PodInfo(raw_pod), old, new_obj) is want


CLASS_CASES = [
    ("queue-on-an-unexpected-object", "not-a-storageclass", QueueingHint.QUEUE),
    ("class-binding-immediately", parse_storage_class(storage_class("SC_1")), QueueingHint.SKIP),
    (
        "class-waiting-for-first-consumer",
        parse_storage_class(storage_class("SC_1", mode="WaitForFirstConsumer")),
        QueueingHint.QUEUE,
    ),
]


@pytest.mark.parametrize(("added", "want"), [c[1:] for c in CLASS_CASES], ids=[c[0] for c in CLASS_CASES])
def test_hint_storage_class_added(added: Any, want: QueueingHint) -> None:
    assert storage_class_added(PodInfo(POD_1), None, added) is want


def _pv(labels: dict[str, str]) -> Any:
    return parse_persistent_volume(pv("Vol_1", labels))


VOLUME_CASES = [
    ("queue-on-an-unexpected-new-object", None, "not-a-pv", QueueingHint.QUEUE),
    ("queue-on-an-unexpected-old-object", "not-a-pv", _pv({}), QueueingHint.QUEUE),
    ("new-pv-was-added", None, _pv({BETA_ZONE: "us-west1-b"}), QueueingHint.QUEUE),
    (
        "pv-topology-changed",
        _pv({BETA_ZONE: "us-west1-a"}),
        _pv({BETA_ZONE: "us-west1-b"}),
        QueueingHint.QUEUE,
    ),
    (
        "pv-topology-label-added",
        _pv({BETA_ZONE: "us-west1-a"}),
        _pv({BETA_ZONE: "us-west1-a", ZONE: "zone"}),
        QueueingHint.QUEUE,
    ),
    (
        "pv-topology-unchanged",
        _pv({BETA_ZONE: "us-west1-a", ZONE: "zone"}),
        _pv({BETA_ZONE: "us-west1-a", ZONE: "zone"}),
        QueueingHint.SKIP,
    ),
    ("pv-other-label-changed", _pv({ZONE: "z", "a": "1"}), _pv({ZONE: "z", "a": "2"}), QueueingHint.SKIP),
]


@pytest.mark.parametrize(
    ("old", "new_obj", "want"), [c[1:] for c in VOLUME_CASES], ids=[c[0] for c in VOLUME_CASES]
)
def test_hint_volume_changed(old: Any, new_obj: Any, want: QueueingHint) -> None:
    assert volume_changed(PodInfo(POD_1), old, new_obj) is want


def test_registered_events() -> None:
    plugin = new(None, VolumeHandle(objects()))
    events = {(e.event.resource, e.event.action): e.hint for e in plugin.events_to_register()}
    assert events == {
        (Resource.STORAGE_CLASS, Action.ADD): storage_class_added,
        (Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL): None,
        (Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE): claim_changed,
        (Resource.PERSISTENT_VOLUME, Action.ADD | Action.UPDATE): volume_changed,
    }
