"""NodeDeclaredFeatures, ported from upstream v1.37.2: ``nodedeclaredfeatures_test.go`` (the plugin, with
mock features as there) and ``k8s.io/component-helpers`` v0.37.2 ``nodedeclaredfeatures`` (the feature
registry, ``TryMap``, ``MatchNode``, and the ``InferForScheduling`` of each feature that infers anything).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.events import Action, ClusterEvent, QueueingHint, Resource
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import SKIP, Code, Status
from kopf_scheduler.plugins import node_declared_features
from kopf_scheduler.plugins.node_declared_features.features import (
    ALL_FEATURES,
    DEFAULT_REGISTRY,
    Feature,
    FeatureRegistry,
    bind_mount_options,
    restarts_all_containers,
    user_namespace_on_host_network,
)
from kopf_scheduler.plugins.node_declared_features.plugin import _PRE_FILTER_KEY, NodeDeclaredFeatures
from kopf_scheduler.testing import make_node, make_pod

UAU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
UNSATISFIED = Status(UAU, ("node(s) didn't match Pod's required features",))


def _mock(name: str, infer: bool | Callable[[Mapping[str, Any]], bool], max_version: str = "") -> Feature:
    """``createMockFeature``: a feature that infers ``infer`` for every pod."""
    version = tuple(int(p) for p in max_version.split(".")) if max_version else None
    infers = infer if callable(infer) else (lambda spec: infer)
    return Feature(name, infers, version)  # type: ignore[arg-type]


def _node(*features: str) -> NodeInfo:
    node = make_node().name("node-1").obj()
    if features:
        node["status"]["declaredFeatures"] = list(features)
    return NodeInfo(node)


POD = PodInfo(make_pod().name("test-pod").uid("123").obj())


# -- PreFilter (TestPreFilter) -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("enabled", "features", "version", "status", "required"),
    [
        (False, [_mock("TestFeature1", True), _mock("TestFeature2", False)], (1, 35, 0), SKIP, None),
        (
            True,
            [_mock("TestFeature1", True), _mock("TestFeature2", False)],
            (1, 35, 0),
            None,
            {"TestFeature1"},
        ),
        (
            True,
            [_mock("TestFeature1", True, "1.38.0"), _mock("TestFeature2", True, "1.38.0")],
            (1, 35, 0),
            None,
            {"TestFeature1", "TestFeature2"},
        ),
        (True, [_mock("TestFeature1", False), _mock("TestFeature2", False)], (1, 35, 0), SKIP, None),
        (True, [_mock("TestFeature1", True, "1.33.0"), _mock("TestFeature2", False)], (1, 34, 0), SKIP, None),
    ],
    ids=[
        "plugin disabled",
        "Pod with feature requirements",
        "Pod with multiple feature requirements",
        "Pod with no requirements",
        "Feature not required, version > MaxVersion",
    ],
)
def test_pre_filter(
    enabled: bool,
    features: list[Feature],
    version: tuple[int, int, int],
    status: Status | None,
    required: set[str] | None,
) -> None:
    plugin = NodeDeclaredFeatures(enabled, FeatureRegistry(features), version)
    state = CycleState()
    assert plugin.pre_filter(state, POD, []) == (None, status)
    found = state.get(_PRE_FILTER_KEY)
    assert (None if found is None else set(found.required)) == required


# -- Filter (TestFilter) -------------------------------------------------------------------------------
MOCK_FRAMEWORK = FeatureRegistry(
    [_mock("FeatureA", False), _mock("FeatureB", False), _mock("FeatureC", False)]
)


@pytest.mark.parametrize(
    ("enabled", "node", "required", "expected"),
    [
        (False, ["FeatureA", "FeatureB"], None, None),
        (True, ["FeatureA", "FeatureB"], ["FeatureA"], None),
        (True, ["FeatureB"], ["FeatureA"], UNSATISFIED),
        (True, ["FeatureA", "FeatureB", "FeatureC"], ["FeatureA", "FeatureC"], None),
        (True, [], ["FeatureA"], UNSATISFIED),
        (True, ["FeatureA"], ["FeatureA", "FeatureB"], UNSATISFIED),
        (
            True,
            [],
            None,
            Status(
                Code.ERROR, ('error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found',)
            ),
        ),
    ],
    ids=[
        "plugin disabled",
        "Node matches requirements",
        "Node does not match requirements",
        "Node with multiple features, pod requires subset",
        "Node has no declared features",
        "Node with some but not all required features",
        "Error getting pre-filter state",
    ],
)
def test_filter(enabled: bool, node: list[str], required: list[str] | None, expected: Status | None) -> None:
    plugin = NodeDeclaredFeatures(enabled, MOCK_FRAMEWORK)
    state = CycleState()
    if required is not None:
        registry = FeatureRegistry(
            [_mock(name, name in required) for name in ("FeatureA", "FeatureB", "FeatureC")]
        )
        assert NodeDeclaredFeatures(True, registry).pre_filter(state, POD, []) == (None, None)
    assert plugin.filter(state, POD, _node(*node)) == expected


# -- requeueing (TestEnqueueExtensionsNodeUpdate, TestIsSchedulableAfterTargetPodUpdate, ...) ----------
@pytest.mark.parametrize(
    ("old", "new", "hint"),
    [
        (None, ["FeatureA"], QueueingHint.QUEUE),
        ([], ["FeatureA"], QueueingHint.QUEUE),
        (["FeatureA"], ["FeatureA"], QueueingHint.SKIP),
    ],
    ids=["Node Add with feature", "Node Update (Features Added)", "Node Update (Features Unchanged)"],
)
def test_hint_after_node_change(old: list[str] | None, new: list[str], hint: QueueingHint) -> None:
    plugin = NodeDeclaredFeatures(True, FeatureRegistry([]))
    [node_event, _] = plugin.events_to_register()
    assert node_event.hint is not None
    assert node_event.hint(POD, None if old is None else _node(*old), _node(*new)) is hint


def _pod_with(hostname: str) -> PodInfo:
    return PodInfo(make_pod().name("test-pod").uid("123").set("spec.hostname", hostname).obj())


@pytest.mark.parametrize(
    ("old", "new", "infers", "hint"),
    [
        ("before", "after", {"after"}, QueueingHint.QUEUE),
        ("before", "after", {"before"}, QueueingHint.QUEUE),
        ("before", "after", set(), QueueingHint.SKIP),
    ],
    ids=[
        "Pod Update adds requirement",
        "Pod Update removes requirement",
        "Pod Update with no change in requirements",
    ],
)
def test_hint_after_target_pod_update(old: str, new: str, infers: set[str], hint: QueueingHint) -> None:
    # Upstream's mock feature answers false, then true (or the reverse) across its two calls; here the
    # mock answers by a field of the spec that differs between the two versions of the pod.
    feature = Feature("TestFeature", lambda spec: spec.get("hostname") in infers)
    plugin = NodeDeclaredFeatures(True, FeatureRegistry([feature]))
    [_, pod_event] = plugin.events_to_register()
    assert pod_event.hint is not None
    assert pod_event.hint(POD, _pod_with(old), _pod_with(new)) is hint


@pytest.mark.parametrize(
    ("enabled", "length"), [(False, 0), (True, 2)], ids=["plugin disabled", "plugin enabled"]
)
def test_events_to_register(enabled: bool, length: int) -> None:
    events = NodeDeclaredFeatures(enabled).events_to_register()
    assert len(events) == length
    if enabled:
        assert [e.event for e in events] == [
            ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_DECLARED_FEATURE),
            ClusterEvent(Resource.TARGET_POD, Action.update()),
        ]


@pytest.mark.parametrize(("version", "enabled"), [((1, 35), False), ((1, 36), True), ((1, 37), True)])
def test_the_gate_turns_the_plugin_on(version: tuple[int, int], enabled: bool) -> None:
    class Handle:
        feature_gates = FeatureGates.resolve(version)

    plugin = node_declared_features.new(node_declared_features.Args(), Handle())  # type: ignore[arg-type]
    assert plugin.enabled is enabled
    pod = PodInfo(make_pod().name("p").set("spec.hostNetwork", True).set("spec.hostUsers", False).obj())
    state = CycleState()
    assert plugin.pre_filter(state, pod, []) == (None, None if enabled else SKIP)
    assert plugin.filter(state, pod, _node()) == (UNSATISFIED if enabled else None)
    assert plugin.filter(state, pod, _node("UserNamespacesHostNetworkSupport")) is None


# -- the feature registry (component-helpers nodedeclaredfeatures) -------------------------------------
def test_registry_is_upstreams_all_features_sorted_by_name() -> None:
    assert [f.name for f in ALL_FEATURES] == [
        "RestartAllContainersOnContainerExits",
        "InPlacePodLevelResourcesVerticalScaling",
        "ExtendWebSocketsToKubelet",
        "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        "UserNamespacesHostNetworkSupport",
        "DRANodeAllocatableResources",
        "VolumeBindMountOptions",
        "DRAOptionalNodeOperations",
    ]
    assert DEFAULT_REGISTRY.names == (
        "DRANodeAllocatableResources",
        "DRAOptionalNodeOperations",
        "ExtendWebSocketsToKubelet",
        "InPlacePodLevelResourcesVerticalScaling",
        "InPlacePodVerticalScalingInitContainers",
        "InPlacePodVerticalScalingMemoryBackedVolumes",
        "RestartAllContainersOnContainerExits",
        "UserNamespacesHostNetworkSupport",
        "VolumeBindMountOptions",
    )


@pytest.mark.parametrize(
    ("declared", "mapped"),
    [
        ([], set()),
        (["a"], {"a"}),
        (["a", "c"], {"a", "c"}),
        (["a", "b", "c", "d"], {"a", "b", "c", "d"}),
        (["0", "a"], {"a"}),
        (["a", "ab", "b"], {"a", "b"}),
        (["d", "e"], {"d"}),
    ],
    ids=[
        "Empty input",
        "Single valid feature",
        "Multiple valid features",
        "All features",
        "Unknown feature (start)",
        "Unknown feature (middle)",
        "Unknown feature (end)",
    ],
)
def test_try_map(declared: list[str], mapped: set[str]) -> None:
    registry = FeatureRegistry([_mock(name, False) for name in ("a", "b", "c", "d")])
    assert registry.try_map(declared) == mapped


@pytest.mark.parametrize(
    ("required", "node", "match"),
    [
        (["feature-a", "feature-b"], ["feature-a", "feature-b", "feature-c"], True),
        (["feature-a", "feature-b"], ["feature-a", "feature-c"], False),
        (["feature-a", "feature-b"], ["feature-c"], False),
        (["feature-a", "feature-b"], [], False),
        ([], ["feature-a", "feature-b", "feature-c"], True),
    ],
    ids=["all features match", "some features missing", "all features missing", "no node features", "none"],
)
def test_match_node(required: list[str], node: list[str], match: bool) -> None:
    registry = FeatureRegistry([_mock(name, False) for name in ("feature-a", "feature-b", "feature-c")])
    assert (frozenset(required) <= registry.try_map(node)) is match


def _restart_all() -> dict[str, Any]:
    return {
        "name": "container",
        "image": "image",
        "restartPolicy": "Never",
        "restartPolicyRules": [
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}
        ],
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"initContainers": [_restart_all()], "containers": [{"name": "name", "image": "image"}]},
            True,
        ),
        (
            {"initContainers": [{"name": "name", "image": "image"}], "containers": [_restart_all()]},
            True,
        ),
        (
            {
                "initContainers": [{"name": "name", "image": "image"}],
                "containers": [{"name": "name2", "image": "image"}],
            },
            False,
        ),
    ],
    ids=["init container with rules", "regular container with rules", "no rules"],
)
def test_restart_all_containers_infer_for_scheduling(spec: dict[str, Any], expected: bool) -> None:
    assert restarts_all_containers(spec) is expected


@pytest.mark.parametrize(
    ("host_network", "host_users", "expected"),
    [(True, False, True), (True, None, False), (True, True, False), (False, False, False)],
    ids=[
        "HostNetwork true, HostUsers false",
        "HostNetwork true, HostUsers nil",
        "HostNetwork true, HostUsers true",
        "HostNetwork false, HostUsers false",
    ],
)
def test_user_namespaces_host_network_infer_for_scheduling(
    host_network: bool, host_users: bool | None, expected: bool
) -> None:
    spec: dict[str, Any] = {"hostNetwork": host_network}
    if host_users is not None:
        spec["hostUsers"] = host_users
    assert user_namespace_on_host_network(spec) is expected


@pytest.mark.parametrize(
    ("field", "mounts", "expected"),
    [
        ("containers", [{"name": "v", "mountPath": "/v", "bindMountOptions": ["nosuid"]}], True),
        ("initContainers", [{"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}], True),
        ("ephemeralContainers", [{"name": "v", "mountPath": "/v", "bindMountOptions": ["nodev"]}], True),
        ("containers", [{"name": "v", "mountPath": "/v", "bindMountOptions": []}], False),
        ("containers", [{"name": "v", "mountPath": "/v"}], False),
    ],
    ids=["container", "init container", "ephemeral container", "empty options", "no options"],
)
def test_volume_bind_mount_options_infer_for_scheduling(
    field: str, mounts: list[dict[str, Any]], expected: bool
) -> None:
    assert bind_mount_options({field: [{"name": "c", "image": "i", "volumeMounts": mounts}]}) is expected
