"""The default plugin set is kube-scheduler's ``getDefaultPlugins``: the same plugins, order and weights.

The expectation is written out from upstream v1.37.2, not derived from our own list:
``pkg/scheduler/apis/config/v1/default_plugins.go`` (``applyFeatureGates``: NodeDeclaredFeatures appended
with its gate on, DynamicResources with weight 2 before DefaultPreemption) and the list its tests compare
against, ``pkg/scheduler/apis/config/testing/defaults/defaults.go`` ``PluginsV1``, which has v1.37's
default gates (NodeDeclaredFeatures GA). At 1.35 the NodeDeclaredFeatures gate is off, and the set is
the same less that plugin.
"""

import pytest

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.plugins.defaults import default_multi_point, default_plugins
from kopf_scheduler.plugins.registry import IN_TREE

#: upstream v1.37.2 ``PluginsV1.MultiPoint.Enabled`` (name, weight; 0 = unset)
UPSTREAM_MULTI_POINT = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeName", 0),
    ("NodeUnschedulable", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
    ("NodeDeclaredFeatures", 0),
]
#: the same at 1.35's default gates (NodeDeclaredFeatures alpha, off)
UPSTREAM_MULTI_POINT_1_35 = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeName", 0),
    ("NodeUnschedulable", 0),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", 0),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", 0),
    ("NodeVolumeLimits", 0),
    ("VolumeBinding", 0),
    ("VolumeZone", 0),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
]


def test_defaults_are_upstreams_plugins_in_upstream_order_with_upstream_weights() -> None:
    assert default_multi_point() == UPSTREAM_MULTI_POINT


@pytest.mark.parametrize(
    ("version", "explicit", "expected"),
    [
        ((1, 35), {}, UPSTREAM_MULTI_POINT_1_35),
        ((1, 35), {"NodeDeclaredFeatures": True}, UPSTREAM_MULTI_POINT),
        ((1, 36), {}, UPSTREAM_MULTI_POINT),
        (
            (1, 36),
            {"NodeDeclaredFeatures": False, "InPlacePodLevelResourcesVerticalScaling": False},
            UPSTREAM_MULTI_POINT_1_35,
        ),
        ((1, 37), {}, UPSTREAM_MULTI_POINT),
    ],
    ids=["1.35", "1.35-gate-on", "1.36", "1.36-gate-off", "1.37"],
)
def test_node_declared_features_joins_with_its_gate(
    version: tuple[int, int], explicit: dict[str, bool], expected: list[tuple[str, int]]
) -> None:
    assert default_multi_point(FeatureGates.resolve(version, explicit)) == expected


def test_every_default_plugin_is_registered_in_tree() -> None:
    assert {name for name, _ in UPSTREAM_MULTI_POINT} <= set(IN_TREE)


def test_default_plugins_use_multi_point_only() -> None:
    plugins = default_plugins()
    assert list(plugins) == ["multiPoint"]
    assert [(p.name, p.weight) for p in plugins["multiPoint"].enabled] == UPSTREAM_MULTI_POINT
    assert plugins["multiPoint"].disabled == []
    at_1_35 = default_plugins(FeatureGates.resolve((1, 35)))
    assert [(p.name, p.weight) for p in at_1_35["multiPoint"].enabled] == UPSTREAM_MULTI_POINT_1_35
