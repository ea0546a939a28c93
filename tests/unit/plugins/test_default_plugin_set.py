"""The default plugin set follows kube-scheduler's ``getDefaultPlugins``: same order, same weights."""

from kopf_scheduler.plugins.defaults import DEFAULT_MULTI_POINT, default_plugins
from kopf_scheduler.plugins.registry import IN_TREE

#: upstream v1.34 ``pkg/scheduler/apis/config/v1/default_plugins.go``, multiPoint (name, weight; 0 = unset)
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


def test_defaults_are_upstreams_in_upstream_order_with_upstream_weights() -> None:
    upstream = dict(UPSTREAM_MULTI_POINT)
    order = [name for name, _ in UPSTREAM_MULTI_POINT]
    assert all(upstream.get(name) == weight for name, weight in DEFAULT_MULTI_POINT), DEFAULT_MULTI_POINT
    positions = [order.index(name) for name, _ in DEFAULT_MULTI_POINT]
    assert positions == sorted(positions)


def test_every_default_plugin_is_registered_in_tree() -> None:
    assert {name for name, _ in DEFAULT_MULTI_POINT} <= set(IN_TREE)


def test_default_plugins_use_multi_point_only() -> None:
    plugins = default_plugins()
    assert list(plugins) == ["multiPoint"]
    assert [(p.name, p.weight) for p in plugins["multiPoint"].enabled] == DEFAULT_MULTI_POINT
    assert plugins["multiPoint"].disabled == []
