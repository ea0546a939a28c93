"""VolumeBinding at pre-filter, filter, pre-score, reserve and unreserve (upstream's ``TestVolumeBinding``
cases that the default feature gates reach), its queueing hints (``TestIsSchedulableAfter*``), its
events and its arguments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _volume_binding_kit import (
    IMMEDIATE,
    NS,
    WAIT,
    FakeHandle,
    claim,
    node,
    objects,
    pod_with_claims,
    storage_class,
    volume,
)

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.args import ArgsError, ShapePoint, decode_args
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, QueueingHint, Resource
from kopf_scheduler.framework.interface import NodeSet
from kopf_scheduler.framework.objects.storage import (
    parse_csi_driver,
    parse_csi_node,
    parse_csi_storage_capacity,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.status import SKIP, Status, unresolvable
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry
from kopf_scheduler.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    Args,
    VolumeBinding,
    new,
    requeue,
)
from kopf_scheduler.testing import make_pod

QUEUE, QUEUE_SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
SCORING_OFF = FeatureGates((1, 37), {"StorageCapacityScoring": False})


def _plugin(
    *items: dict[str, Any], gates: FeatureGates = DEFAULT_GATES, **args: Any
) -> tuple[VolumeBinding, FakeHandle]:
    handle = FakeHandle(objects(*items), [node("node-a")], gates)
    return new(Args(**args), handle), handle


def _ephemeral_pod(uid: str = "pod-uid") -> PodInfo:
    volumes = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    return PodInfo(make_pod().name("pod-a").namespace(NS).uid(uid).set("spec.volumes", volumes).obj())


bound_a = claim("pvc-a", volume="pv-a", bound=True)

# (pod's claims, objects, pre-filter status, filter status on node-a ("-": not run))
CASES: dict[str, tuple[Any, ...]] = {
    "pod has not pvcs": ([], [], SKIP, "-"),
    "all bound": (["pvc-a"], [bound_a, volume("pv-a")], None, None),
    "PVC does not exist": (["pvc-a"], [], unresolvable('persistentvolumeclaim "pvc-a" not found'), "-"),
    "Part of PVCs do not exist": (
        ["pvc-a", "pvc-b"], [bound_a], unresolvable('persistentvolumeclaim "pvc-b" not found'), "-",
    ),
    "immediate claims not bound": (
        ["pvc-a"], [claim("pvc-a", storage_class=IMMEDIATE)],
        unresolvable("pod has unbound immediate PersistentVolumeClaims"), "-",
    ),
    "unbound claims no matches": (["pvc-a"], [claim("pvc-a")], None, unresolvable(ERR_REASON_BIND_CONFLICT)),
    "bound and unbound unsatisfied": (
        ["pvc-a", "pvc-b"],
        [bound_a, claim("pvc-b"), volume("pv-a", "foo-bar", bound_to=bound_a)],
        None,
        unresolvable(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT),
    ),
    "pv not found": (
        ["pvc-a"],
        [bound_a],
        None,
        unresolvable("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"),
    ),
    "pv not found claim lost": (
        ["pvc-a"],
        [{**bound_a, "status": {"phase": "Lost"}}],
        unresolvable('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'),
        "-",
    ),
    "claim being deleted": (
        ["pvc-a"],
        [{**bound_a, "metadata": {**bound_a["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}],
        unresolvable('persistentvolumeclaim "pvc-a" is being deleted'),
        "-",
    ),
    "claim of a class that does not exist binds immediately": (
        ["pvc-a"], [claim("pvc-a", storage_class="no-such-class")],
        unresolvable("pod has unbound immediate PersistentVolumeClaims"), "-",
    ),
    "pre-bound claim": (
        ["pvc-a"], [claim("pvc-a", volume="pv-a")],
        unresolvable("pod has unbound immediate PersistentVolumeClaims"), "-",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("claims", "items", "pre_filter", "filtered"), CASES.values(), ids=CASES.keys())
def test_pre_filter_and_filter(claims: list[str], items: list[Any], pre_filter: Any, filtered: Any) -> None:
    plugin, _ = _plugin(*items, gates=SCORING_OFF)  # upstream's cases run with the gate off
    state, pod = CycleState(), pod_with_claims(*claims, name="pod-a")
    result, status = plugin.pre_filter(state, pod, [])
    assert (result, status) == (None, pre_filter)
    if filtered != "-":
        node_a = node("node-a")
        node_a.labels["foo"] = "barbar"
        assert plugin.filter(state, pod, node_a) == filtered
        assert plugin.pre_score(state, pod, NodeSet(plugin.handle.snapshot(), np.arange(1))) == SKIP


@pytest.mark.parametrize(
    ("stored", "status"),
    [
        (
            [],
            unresolvable(
                'waiting for ephemeral volume controller to create the persistentvolumeclaim "pod-a-scratch"'
            ),
        ),
        (
            [claim("pod-a-scratch", volume="pv-a", bound=True)],
            unresolvable("PVC testns/pod-a-scratch was not created for pod testns/pod-a (pod is not owner)"),
        ),
    ],
    ids=["not created yet", "not owned by the pod"],
)
def test_a_generic_ephemeral_volume_waits_for_its_claim(stored: list[Any], status: Status) -> None:
    plugin, _ = _plugin(*stored)
    assert plugin.pre_filter(CycleState(), _ephemeral_pod(), []) == (None, status)


def test_an_owned_ephemeral_claim_is_used() -> None:
    owned = claim("pod-a-scratch", volume="pv-a", bound=True)
    owned["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": "pod-a", "uid": "pod-uid", "controller": True}
    ]
    plugin, _ = _plugin(owned, volume("pv-a", "node-a"))
    state = CycleState()
    assert plugin.pre_filter(state, _ephemeral_pod(), []) == (None, None)
    assert plugin.filter(state, _ephemeral_pod(), node("node-a")) is None


def test_reserve_assumes_the_chosen_nodes_bindings_and_unreserve_reverts_them() -> None:
    plugin, _ = _plugin(claim("pvc-a"), volume("pv-1", "node-a", "2G"), volume("pv-2", "node-b", "1G"))
    state, pod = CycleState(), pod_with_claims("pvc-a")
    plugin.pre_filter(state, pod, [])
    assert plugin.filter(state, pod, node("node-a")) is None
    assert plugin.filter(state, pod, node("node-b")) is None
    assert plugin.reserve(state, pod, "node-b") is None
    assert plugin.binder.volumes.assumed() == (("", "pv-2"),)
    # another pod's claim no longer sees pv-2 as available
    plugin.unreserve(state, pod, "node-b")
    plugin.unreserve(state, pod, "node-b")  # idempotent
    assert plugin.binder.volumes.assumed() == ()


def test_reserve_of_a_pod_without_claims_or_all_bound_assumes_nothing() -> None:
    plugin, _ = _plugin(bound_a, volume("pv-a"))
    state, pod = CycleState(), pod_with_claims()
    assert plugin.pre_filter(state, pod, []) == (None, SKIP)
    assert plugin.reserve(state, pod, "node-a") is None
    state, pod = CycleState(), pod_with_claims("pvc-a")
    assert plugin.pre_filter(state, pod, []) == (None, None)
    assert plugin.filter(state, pod, node("node-a")) is None
    assert plugin.reserve(state, pod, "node-a") is None
    assert plugin.binder.volumes.assumed() == () and plugin.binder.claims.assumed() == ()


# -- queueing hints ------------------------------------------------------------------------------------
POD = pod_with_claims("pvc-a", name="pod-a")


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, claim("pvc-a"), QUEUE),
        (claim("pvc-a"), claim("pvc-a", version="2"), QUEUE),
        (None, claim("pvc-b"), QUEUE_SKIP),
        (None, claim("pvc-a", namespace="other"), QUEUE_SKIP),
    ],
    ids=[
        "the pod's claim added",
        "the pod's claim updated",
        "another claim",
        "same name in another namespace",
    ],
)
def test_claim_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    parse = parse_persistent_volume_claim
    assert requeue.claim_changed(POD, old and parse(old), parse(new)) == hint


def test_claim_hint_knows_ephemeral_claims() -> None:
    assert (
        requeue.claim_changed(_ephemeral_pod(), None, parse_persistent_volume_claim(claim("pod-a-scratch")))
        == QUEUE
    )


TOPOLOGY = [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}]


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, storage_class("sc"), QUEUE),
        (storage_class("sc"), storage_class("sc", allowedTopologies=TOPOLOGY), QUEUE),
        (
            storage_class("sc", allowedTopologies=TOPOLOGY),
            storage_class("sc", allowedTopologies=TOPOLOGY),
            QUEUE_SKIP,
        ),
        (storage_class("sc", allowedTopologies=[]), storage_class("sc"), QUEUE_SKIP),
    ],
    ids=["created", "allowedTopologies changed", "no change", "empty and absent are equal"],
)
def test_storage_class_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    assert (
        requeue.storage_class_changed(POD, old and parse_storage_class(old), parse_storage_class(new)) == hint
    )


def _csi_node(migrated: str | None) -> Any:
    meta: dict[str, Any] = {"name": "node-a"}
    if migrated is not None:
        meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
    return parse_csi_node({"metadata": meta, "spec": {"drivers": []}})


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, _csi_node(None), QUEUE),
        (_csi_node(None), _csi_node("kubernetes.io/gce-pd"), QUEUE),
        (_csi_node("kubernetes.io/gce-pd"), _csi_node("kubernetes.io/gce-pd,kubernetes.io/aws-ebs"), QUEUE),
        (_csi_node("kubernetes.io/gce-pd"), _csi_node("kubernetes.io/gce-pd"), QUEUE_SKIP),
    ],
    ids=["created", "annotation added", "annotation updated", "annotation unchanged"],
)
def test_csi_node_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    assert requeue.csi_node_changed(POD, old, new) == hint


def _capacity(size: str | None = None, maximum: str | None = None) -> Any:
    raw: dict[str, Any] = {"metadata": {"name": "c", "namespace": NS}, "storageClassName": "sc"}
    if size:
        raw["capacity"] = size
    if maximum:
        raw["maximumVolumeSize"] = maximum
    return parse_csi_storage_capacity(raw)


@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, _capacity(), QUEUE),
        (_capacity(), _capacity("100Gi"), QUEUE),
        (_capacity(), _capacity(maximum="100Gi"), QUEUE),
        (_capacity("50Gi"), _capacity("100Gi"), QUEUE),
        (_capacity("100Gi", "50Gi"), _capacity("100Gi"), QUEUE),
        (_capacity(maximum="50Gi"), _capacity(maximum="100Gi"), QUEUE),
        (_capacity("100Gi"), _capacity("100Gi"), QUEUE_SKIP),
        (_capacity("100Gi", "50Gi"), _capacity("50Gi"), QUEUE_SKIP),
        (_capacity("100Gi"), _capacity("50Gi"), QUEUE_SKIP),
        (_capacity(maximum="100Gi"), _capacity(maximum="50Gi"), QUEUE_SKIP),
    ],
    ids=[
        "created", "capacity set", "maximum set", "capacity increased", "maximum unset",
        "maximum increased", "no change", "equal (maximum unset)", "capacity decreased", "maximum decreased",
    ],
)  # fmt: skip
def test_capacity_hint(old: Any, new: Any, hint: QueueingHint) -> None:
    assert requeue.capacity_changed(POD, old, new) == hint


def _driver(capacity: bool | None) -> Any:
    spec = {} if capacity is None else {"storageCapacity": capacity}
    return parse_csi_driver({"metadata": {"name": "test-driver"}, "spec": spec})


CSI_POD = PodInfo(
    make_pod().name("p").set("spec.volumes", [{"name": "v", "csi": {"driver": "test-driver"}}]).obj()
)


@pytest.mark.parametrize(
    ("pod", "old", "new", "hint"),
    [
        (POD, _driver(True), _driver(False), QUEUE_SKIP),
        (CSI_POD, _driver(None), _driver(True), QUEUE_SKIP),
        (CSI_POD, _driver(False), _driver(True), QUEUE_SKIP),
        (CSI_POD, _driver(True), _driver(None), QUEUE),
        (CSI_POD, _driver(True), _driver(True), QUEUE_SKIP),
        (CSI_POD, _driver(True), _driver(False), QUEUE),
    ],
    ids=[
        "pod has no CSI volume", "original StorageCapacity is nil", "original StorageCapacity is false",
        "modified StorageCapacity is nil", "modified StorageCapacity is true",
        "modified StorageCapacity is false",
    ],
)  # fmt: skip
def test_csi_driver_hint(pod: PodInfo, old: Any, new: Any, hint: QueueingHint) -> None:
    assert requeue.csi_driver_changed(pod, old, new) == hint


def test_events_to_register_are_upstreams() -> None:
    plugin, _ = _plugin()
    registered = {(e.event.resource, e.event.action): e.hint is not None for e in plugin.events_to_register()}
    add_update = Action.ADD | Action.UPDATE
    assert registered == {
        (Resource.STORAGE_CLASS, add_update): True,
        (Resource.PERSISTENT_VOLUME_CLAIM, add_update): True,
        (Resource.PERSISTENT_VOLUME, add_update): False,
        (Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL): False,
        (Resource.CSI_NODE, add_update): True,
        (Resource.CSI_DRIVER, Action.UPDATE): True,
        (Resource.CSI_STORAGE_CAPACITY, add_update): True,
    }


# -- arguments -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "shape"),
    [((1, 35), None), ((1, 36), None), ((1, 37), (ShapePoint(0, 10), ShapePoint(100, 0)))],
)
def test_default_args(version: tuple[int, int], shape: Any) -> None:
    """``SetDefaults_VolumeBindingArgs`` (upstream's ``TestPluginArgsDefaults``): 600 s, and with
    StorageCapacityScoring on (1.37) the shape ``[{utilization: 0, score: 10}, {utilization: 100,
    score: 0}]``, also in place of an empty one."""
    args = decode_args(Args, {}, FeatureGates(version))
    args.validate()
    assert (args.bind_timeout_seconds, args.shape) == (600, shape)
    if shape is not None:
        assert decode_args(Args, {"shape": []}, FeatureGates(version)).shape == shape
    assert decode_args(Args, {"bindTimeoutSeconds": 0}).bind_timeout_seconds == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"bindTimeoutSeconds": "10"}, "bindTimeoutSeconds: must be an integer, not '10'"),
        ({"bindTimeout": 10}, "bindTimeout: unknown field; known: bindTimeoutSeconds, shape"),
        ({"shape": {"utilization": 0}}, "shape: must be a list"),
        ({"shape": [{"utilization": 0, "score": "10"}]}, "shape[0].score: must be an integer, not '10'"),
    ],
    ids=["not an integer", "unknown field", "shape not a list", "score not an integer"],
)
def test_undecodable_args_name_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as caught:
        decode_args(Args, raw)
    assert str(caught.value) == message


# ``TestValidateVolumeBindingArgs`` (v1.37.2): (gate, bindTimeoutSeconds, shape, the first error)
SHAPE = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
NEGATIVE = (
    "bindTimeoutSeconds: Invalid value: -10: invalid BindTimeoutSeconds, should not be a negative value"
)
VALIDATION: dict[str, tuple[Any, ...]] = {
    "[StorageCapacityScoring=off] zero is a valid config": (False, 0, None, None),
    "[StorageCapacityScoring=on] zero is a valid config": (True, 0, SHAPE, None),
    "[StorageCapacityScoring=off] positive value is valid config": (False, 10, None, None),
    "[StorageCapacityScoring=on] positive value is valid config": (True, 10, SHAPE, None),
    "[StorageCapacityScoring=off] negative value is invalid config": (False, -10, None, NEGATIVE),
    "[StorageCapacityScoring=on] negative value is invalid config": (True, -10, SHAPE, NEGATIVE),
    "[StorageCapacityScoring=off] shape should be nil when the feature is off": (False, 10, None, None),
    "[StorageCapacityScoring=off] error if the shape is not nil when the feature is off": (
        False, 10, [{"utilization": 1, "score": 1}, {"utilization": 3, "score": 3}],
        'shape: Invalid value: [{"Utilization":1,"Score":1},{"Utilization":3,"Score":3}]: unexpected field '
        "`shape`, remove it or turn on the feature gate StorageCapacityScoring",
    ),
    "[StorageCapacityScoring=off] an empty shape is not nil": (
        False, 10, [],
        "shape: Invalid value: []: unexpected field `shape`, remove it or turn on the feature gate "
        "StorageCapacityScoring",
    ),
    # upstream's "shape should not be empty" (Required) is for the internal type: a configuration's empty
    # shape is defaulted first (SetDefaults_VolumeBindingArgs), as here
    "[StorageCapacityScoring=on] an empty shape is the default": (True, 10, [], None),
    "[StorageCapacityScoring=on] shape points must be sorted in increasing order": (
        True, 10, [{"utilization": 3, "score": 3}, {"utilization": 1, "score": 1}],
        "shape[1].utilization: Invalid value: 1: values must be sorted in increasing order",
    ),
    "[StorageCapacityScoring=on] shape point: invalid utilization and score": (
        True, 10,
        [
            {"utilization": -1, "score": 1},
            {"utilization": 10, "score": -1},
            {"utilization": 20, "score": 11},
            {"utilization": 101, "score": 1},
        ],
        "shape[0].utilization: Invalid value: -1: not in valid range [0, 100]",
    ),
    "[StorageCapacityScoring=on] shape point: invalid score": (
        True, 10, [{"utilization": 10, "score": -1}, {"utilization": 20, "score": 11}],
        "shape[0].score: Invalid value: -1: not in valid range [0, 10]",
    ),
    "[StorageCapacityScoring=on] shape point: score above 10": (
        True, 10, [{"utilization": 20, "score": 11}],
        "shape[0].score: Invalid value: 11: not in valid range [0, 10]",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("gate", "timeout", "shape", "error"), VALIDATION.values(), ids=VALIDATION.keys())
def test_validate_volume_binding_args(gate: bool, timeout: int, shape: Any, error: str | None) -> None:
    raw: dict[str, Any] = {"bindTimeoutSeconds": timeout}
    if shape is not None:
        raw["shape"] = shape
    gates = FeatureGates((1, 37), {"StorageCapacityScoring": gate})
    args = decode_args(Args, raw, gates)
    if error is None:
        args.validate()
        new(args, FakeHandle(objects(), [], gates))
        return
    with pytest.raises(ArgsError) as caught:
        args.validate()
    assert str(caught.value) == error
    with pytest.raises(ArgsError):  # upstream's New validates too
        new(args, FakeHandle(objects(), [], gates))


def test_a_shape_the_gate_refuses_fails_the_profile() -> None:
    profile = parse_profile(
        {"schedulerName": "s", "pluginConfig": [{"name": "VolumeBinding", "args": {"shape": SHAPE}}]}
    )

    def build(version: tuple[int, int]) -> Framework:
        gates = FeatureGates(version)
        return build_framework(
            profile, new_registry(autoload=False), default_plugins(), None, feature_gates=gates
        )  # type: ignore[arg-type]

    with pytest.raises(ProfileError) as caught:
        build((1, 36))
    assert str(caught.value) == (
        'spec.pluginConfig[0].args.shape: Invalid value: [{"Utilization":0,"Score":0},{"Utilization":100,'
        '"Score":10}]: unexpected field `shape`, remove it or turn on the feature gate StorageCapacityScoring'
    )
    plugin = build((1, 37)).plugins["VolumeBinding"]
    assert isinstance(plugin, VolumeBinding) and plugin.scorer is not None
    assert plugin.scorer.shape == [(0, 0), (100, 100)]


def test_the_class_of_a_claim_may_come_from_the_beta_annotation() -> None:
    beta = claim("pvc-a", storage_class=None)
    beta["metadata"]["annotations"] = {"volume.beta.kubernetes.io/storage-class": WAIT}
    plugin, _ = _plugin(beta, volume("pv-a", "node-a"))
    state, pod = CycleState(), pod_with_claims("pvc-a")
    assert plugin.pre_filter(state, pod, []) == (None, None)
    assert plugin.filter(state, pod, node("node-a")) is None
