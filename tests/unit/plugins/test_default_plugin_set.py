"""The default plugin set is kube-scheduler's ``getDefaultPlugins``: the same plugins, order and weights.

The expectation is written out from upstream v1.34.10, not derived from our own list:
``pkg/scheduler/apis/config/v1/default_plugins.go`` (with ``applyDynamicResources``, the
DynamicResourceAllocation gate being GA and on in v1.34) and the list its tests compare against,
``pkg/scheduler/apis/config/testing/defaults/defaults.go`` ``PluginsV1``.
"""

from kopf_scheduler.plugins.defaults import DEFAULT_MULTI_POINT, default_plugins
from kopf_scheduler.plugins.registry import IN_TREE

#: upstream v1.34.10 ``PluginsV1.MultiPoint.Enabled`` (name, weight; 0 = unset)
UPSTREAM_MULTI_POINT = [
    ("SchedulingGates", 0),
    ("PrioritySort", 0),
    ("NodeUnschedulable", 0),
    ("NodeName", 0),
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
    ("DynamicResources", 0),
    ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", 0),
]


def test_defaults_are_upstreams_plugins_in_upstream_order_with_upstream_weights() -> None:
    assert DEFAULT_MULTI_POINT == UPSTREAM_MULTI_POINT


def test_every_default_plugin_is_registered_in_tree() -> None:
    assert {name for name, _ in UPSTREAM_MULTI_POINT} <= set(IN_TREE)


def test_default_plugins_use_multi_point_only() -> None:
    plugins = default_plugins()
    assert list(plugins) == ["multiPoint"]
    assert [(p.name, p.weight) for p in plugins["multiPoint"].enabled] == UPSTREAM_MULTI_POINT
    assert plugins["multiPoint"].disabled == []
