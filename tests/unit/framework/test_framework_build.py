"""Building a profile into a framework: multiPoint expansion, score weights, invariants, error paths."""

from types import SimpleNamespace
from typing import Any

import pytest

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import PluginRef, PluginSet, parse_profile
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.interface import EXTENSION_POINTS as POINT_TYPES
from kopf_scheduler.framework.interface import BindPlugin, FilterPlugin, Plugin, QueueSortPlugin, ScorePlugin
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.runtime.registry import Registry
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry


class FilterScore(FilterPlugin, ScorePlugin):
    def filter(self, state: Any, pod: Any, node: Any) -> None:
        return None

    def score(self, state: Any, pod: Any, node: Any) -> int:
        return 0


class FilterOnly(FilterPlugin):
    def filter(self, state: Any, pod: Any, node: Any) -> None:
        return None


class ScoreOnly(ScorePlugin):
    def score(self, state: Any, pod: Any, node: Any) -> int:
        return 0


class Sort(QueueSortPlugin):
    def less(self, a: Any, b: Any) -> bool:
        return False


class Bind(BindPlugin):
    async def bind(self, state: Any, pod: Any, node_name: str) -> None:
        return None


def _source(name: str, cls: type[Plugin]) -> SimpleNamespace:
    def new(args: Any, handle: Any) -> Plugin:
        plugin = cls()
        plugin.name = name
        return plugin

    return SimpleNamespace(NAME=name, Args=NoArgs, new=new)


PLUGINS = {
    "A": FilterScore,
    "B": FilterScore,
    "C": FilterOnly,
    "D": ScoreOnly,
    "Sort": Sort,
    "Sort2": Sort,
    "Bind": Bind,
}
KNOWN = "A, B, Bind, C, D, Sort, Sort2"
DEFAULTS = {"multiPoint": PluginSet(enabled=[PluginRef("Sort"), PluginRef("A"), PluginRef("Bind")])}


def _build(plugins: dict[str, Any], **spec: Any) -> Framework:
    registry = Registry({name: _source(name, cls) for name, cls in PLUGINS.items()}, autoload=False)
    profile = parse_profile({"schedulerName": "s", "plugins": plugins, **spec})
    return build_framework(profile, registry, DEFAULTS, client=None)  # type: ignore[arg-type]


def _enabled(*names: str | tuple[str, int]) -> list[dict[str, Any]]:
    return [{"name": n} if isinstance(n, str) else {"name": n[0], "weight": n[1]} for n in names]


def _names(plugins: list[Any]) -> list[str]:
    return [p.name for p in plugins]


@pytest.mark.parametrize(
    ("plugins", "filters", "scores"),
    [
        ({}, ["A"], ["A"]),
        ({"multiPoint": {"enabled": _enabled("A", "B", "C", "D")}}, ["A", "B", "C"], ["A", "B", "D"]),
        (
            {"multiPoint": {"enabled": _enabled("B", "C")}, "filter": {"enabled": _enabled("C", "B")}},
            ["C", "B", "A"],
            ["A", "B"],
        ),
        (
            {"multiPoint": {"enabled": _enabled("B")}, "filter": {"enabled": _enabled("C", "A")}},
            ["A", "B", "C"],
            ["A", "B"],
        ),
        (
            {"multiPoint": {"enabled": _enabled("B", "C")}, "filter": {"disabled": _enabled("B")}},
            ["A", "C"],
            ["A", "B"],
        ),
        (
            {
                "multiPoint": {"enabled": _enabled("B")},
                "filter": {"disabled": _enabled("A"), "enabled": _enabled("A")},
            },
            ["B", "A"],
            ["A", "B"],
        ),
        (
            {
                "multiPoint": {"enabled": _enabled("B", "C")},
                "filter": {"disabled": _enabled("*"), "enabled": _enabled("C")},
            },
            ["C"],
            ["A", "B"],
        ),
        ({"multiPoint": {"enabled": _enabled("B")}, "filter": {"disabled": _enabled("*")}}, [], ["A", "B"]),
        ({"multiPoint": {"disabled": _enabled("A"), "enabled": _enabled("C")}}, ["C"], []),
        ({"multiPoint": {"disabled": _enabled("*"), "enabled": _enabled("Sort", "Bind", "D")}}, [], ["D"]),
    ],
    ids=[
        "defaults",
        "multi-point-only",
        "overrides-first-in-point-order",
        "point-only-plugin-last",
        "disabled-at-point-enabled-via-multi-point",
        "disabled-and-re-enabled-at-point",
        "star-disables-expansion-at-point",
        "star-without-enabled",
        "disabled-in-multi-point",
        "multi-point-star",
    ],
)
def test_multi_point_expansion(plugins: dict[str, Any], filters: list[str], scores: list[str]) -> None:
    framework = _build(plugins)
    assert _names(framework.filter) == filters
    assert _names(framework.score) == scores
    assert framework.queue_sort.name == "Sort"
    assert _names(framework.bind) == ["Bind"]


@pytest.mark.parametrize(
    ("plugins", "weights"),
    [
        ({}, {"A": 1}),
        ({"multiPoint": {"enabled": _enabled(("A", 3))}}, {"A": 3}),
        ({"multiPoint": {"enabled": _enabled(("A", 3))}, "score": {"enabled": _enabled(("A", 5))}}, {"A": 5}),
        # a score-point entry without a weight still wins over multiPoint's weight, and counts 1
        ({"multiPoint": {"enabled": _enabled(("A", 3))}, "score": {"enabled": _enabled("A")}}, {"A": 1}),
        (
            {
                "multiPoint": {"enabled": _enabled(("A", 3), ("D", 2))},
                "score": {"enabled": _enabled(("D", 7))},
            },
            {"A": 3, "D": 7},
        ),
        ({"score": {"enabled": _enabled(("B", 4))}}, {"A": 1, "B": 4}),
    ],
    ids=[
        "unset-weight-counts-one",
        "multi-point-weight",
        "score-point-beats-multi-point",
        "score-point-without-weight",
        "mixed",
        "score-point-only",
    ],
)
def test_score_weights(plugins: dict[str, Any], weights: dict[str, int]) -> None:
    assert _build(plugins).score_weights == weights


@pytest.mark.parametrize(
    ("plugins", "config", "message"),
    [
        (
            {"score": {"enabled": _enabled("Nope")}},
            [],
            f"spec.plugins.score.enabled[0].name: unknown plugin 'Nope'; known: {KNOWN}",
        ),
        (
            {"multiPoint": {"enabled": _enabled("B", "Nope")}},
            [],
            f"spec.plugins.multiPoint.enabled[1].name: unknown plugin 'Nope'; known: {KNOWN}",
        ),
        (
            {"filter": {"enabled": _enabled("D")}},
            [],
            "spec.plugins.filter.enabled[0].name: plugin 'D' does not extend filter",
        ),
        (
            {"bind": {"enabled": _enabled("C")}},
            [],
            "spec.plugins.bind.enabled[0].name: plugin 'C' does not extend bind",
        ),
        (
            {"filter": {"enabled": _enabled("C", "C")}},
            [],
            "spec.plugins.filter.enabled[1].name: plugin 'C' already registered as filter",
        ),
        (
            {"multiPoint": {"enabled": _enabled("C", "C")}},
            [],
            "spec.plugins.multiPoint.enabled[1].name: plugin 'C' already registered as filter",
        ),
        (
            {"multiPoint": {"disabled": _enabled("Sort")}},
            [],
            "spec.plugins.queueSort: exactly one queue sort plugin is required for profile 's', got 0",
        ),
        (
            {"queueSort": {"enabled": _enabled("Sort2")}},
            [],
            "spec.plugins.queueSort: exactly one queue sort plugin is required for profile 's', got 2",
        ),
        (
            {"multiPoint": {"disabled": _enabled("Bind")}},
            [],
            "spec.plugins.bind: at least one bind plugin is required for 's'",
        ),
        (
            {},
            [{"name": "A"}, {"name": "Nope", "args": {}}],
            "spec.pluginConfig[1].name: unknown plugin 'Nope'",
        ),
        ({}, [{"name": "A", "args": {"x": 1}}], "spec.pluginConfig[0].args.x: unknown field; known: none"),
    ],
    ids=[
        "unknown-plugin-at-point",
        "unknown-plugin-in-multi-point",
        "plugin-not-implementing-point",
        "plugin-not-a-binder",
        "duplicate-in-point",
        "duplicate-in-multi-point",
        "no-queue-sort",
        "two-queue-sorts",
        "no-binder",
        "unknown-plugin-in-plugin-config",
        "args-for-plugin-without-args",
    ],
)
def test_build_errors_name_the_field(plugins: dict[str, Any], config: list[Any], message: str) -> None:
    with pytest.raises(ProfileError) as info:
        _build(plugins, pluginConfig=config)
    assert str(info.value) == message


# -- with the in-tree plugins and defaults --------------------------------------------------------------
def _build_default(**spec: Any) -> Framework:
    profile = parse_profile({"schedulerName": "s", **spec})
    return build_framework(profile, new_registry(autoload=False), default_plugins(), client=None)  # type: ignore[arg-type]


#: upstream ``pkg/scheduler/apis/config/testing/defaults/defaults.go`` ``ExpandedPluginsV1``: the default
#: profile after multiPoint expansion, per extension point in run order (score with weights). v1.37.2's
#: for NodeName and NodeUnschedulable (both with PreFilter, NodeName first) and NodeDeclaredFeatures;
#: v1.37.2 also has TaintToleration at preFilter and the PodGroup points (podGroupPostFilter,
#: placementScore), which this table gains as those plugins follow.
#: One deliberate difference, documented on the plugin: DefaultPreemption has no PreEnqueue here, since
#: its evictions finish before the preemptor's attempt ends (upstream's PreEnqueue holds the pod back
#: while ``SchedulerAsyncPreemption`` runs them in a goroutine).
UPSTREAM_EXPANDED: dict[str, list[Any]] = {
    "preEnqueue": ["SchedulingGates", "DynamicResources"],  # upstream: + "DefaultPreemption"
    "queueSort": ["PrioritySort"],
    "preFilter": [
        "NodeName",
        "NodeUnschedulable",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "filter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "NodeDeclaredFeatures",
    ],
    "postFilter": ["DynamicResources", "DefaultPreemption"],
    "preScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        {"name": "TaintToleration", "weight": 3},
        {"name": "NodeAffinity", "weight": 2},
        {"name": "NodeResourcesFit", "weight": 1},
        {"name": "VolumeBinding", "weight": 1},
        {"name": "PodTopologySpread", "weight": 2},
        {"name": "InterPodAffinity", "weight": 2},
        {"name": "DynamicResources", "weight": 2},
        {"name": "NodeResourcesBalancedAllocation", "weight": 1},
        {"name": "ImageLocality", "weight": 1},
    ],
    "reserve": ["VolumeBinding", "DynamicResources"],
    "preBind": ["VolumeBinding", "DynamicResources"],
    "bind": ["DefaultBinder"],
}


def test_default_profile_expands_to_upstreams_plugins_per_extension_point() -> None:
    framework = _build_default(percentageOfNodesToScore=40)
    described = framework.describe()
    assert {point: described.get(point, []) for point in POINT_TYPES} == {
        point: UPSTREAM_EXPANDED.get(point, []) for point in POINT_TYPES
    }
    assert framework.score_weights == {entry["name"]: entry["weight"] for entry in UPSTREAM_EXPANDED["score"]}
    assert framework.percentage_of_nodes_to_score == 40
    assert framework.profile_name == "s"


def test_only_needed_plugins_are_created_and_share_a_handle_to_the_framework() -> None:
    framework = _build_default(plugins={"multiPoint": {"disabled": [{"name": "NodeUnschedulable"}]}})
    assert "NodeUnschedulable" not in framework.plugins
    handle = framework.plugins["NodeName"].handle  # type: ignore[attr-defined]
    assert handle.profile_name == "s"
    assert handle.framework is framework


def test_plugin_args_reach_the_plugin() -> None:
    config = [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}]
    framework = _build_default(pluginConfig=config)
    assert framework.plugins["NodeResourcesFit"].args.strategy == "MostAllocated"  # type: ignore[attr-defined]


_NRF = "NodeResourcesFit"
_MOST = "MostAllocated"


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            [{"name": _NRF, "args": {"scoringStrategy": {"type": "Foo"}}}],
            'spec.pluginConfig[0].args.scoringStrategy.type: Unsupported value: "Foo": supported values: '
            '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        ),
        (
            [
                {"name": "NodeName"},
                {
                    "name": _NRF,
                    "args": {
                        "scoringStrategy": {"type": _MOST, "resources": [{"name": "cpu", "weight": -1}]}
                    },
                },
            ],
            "spec.pluginConfig[1].args.scoringStrategy.resources[0].weight: "
            "Invalid value: -1: resource weight of cpu not in valid range (0, 100]",
        ),
        (
            [{"name": _NRF, "args": {"foo": 1}}],
            "spec.pluginConfig[0].args.foo: unknown field; "
            "known: ignoredResourceGroups, ignoredResources, scoringStrategy",
        ),
        (
            [{"name": _NRF, "args": {"ignoredResourceGroups": ["example.com/gpu"]}}],
            "spec.pluginConfig[0].args.ignoredResourceGroups[0]: "
            "Invalid value: \"example.com/gpu\": resource group name can't contain '/'",
        ),
        ([{"name": "NodeName", "args": {"x": 1}}], "spec.pluginConfig[0].args.x: unknown field; known: none"),
        ([{"name": "ImageLocalityX"}], "spec.pluginConfig[0].name: unknown plugin 'ImageLocalityX'"),
    ],
    ids=[
        "bad-strategy",
        "bad-weight-second-entry",
        "unknown-field",
        "bad-group",
        "no-args-plugin",
        "unknown-plugin",
    ],
)
def test_plugin_args_errors(config: list[Any], message: str) -> None:
    with pytest.raises(ProfileError) as info:
        _build_default(pluginConfig=config)
    assert str(info.value) == message
