"""SchedulingProfile parsing, validation errors naming the field path, and upstream's ``mergePluginSet``."""

from collections.abc import Sequence
from typing import Any

import pytest

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import (
    PluginRef,
    PluginSet,
    ProfileSpec,
    merge_plugin_set,
    merge_plugins,
    parse_profile,
)
from kopf_scheduler.api.schema import PLUGIN_SET_FIELDS


def _obj(spec: dict[str, Any] | None, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": "bin-packing", **meta},
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


# -- parsing --------------------------------------------------------------------------------------------
def test_parse_bare_spec_with_defaults() -> None:
    assert parse_profile({"schedulerName": "s"}) == ProfileSpec(scheduler_name="s")


def test_parse_full_object() -> None:
    spec = {
        "schedulerName": "packer",
        "percentageOfNodesToScore": 30,
        "plugins": {
            "multiPoint": {"disabled": [{"name": "*"}]},
            "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "Other"}]},
        },
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}},
            {"name": "NodeName"},
        ],
    }
    assert parse_profile(_obj(spec, generation=7)) == ProfileSpec(
        scheduler_name="packer",
        percentage_of_nodes_to_score=30,
        plugins={
            "multiPoint": PluginSet(disabled=[PluginRef("*", 0, "spec.plugins.multiPoint.disabled[0]")]),
            "score": PluginSet(
                enabled=[
                    PluginRef("NodeResourcesFit", 5, "spec.plugins.score.enabled[0]"),
                    PluginRef("Other", 0, "spec.plugins.score.enabled[1]"),
                ]
            ),
        },
        plugin_config={
            "NodeResourcesFit": ({"scoringStrategy": {"type": "MostAllocated"}}, "spec.pluginConfig[0].args"),
            "NodeName": ({}, "spec.pluginConfig[1].args"),
        },
        name="bin-packing",
        generation=7,
    )


_SCORE_0 = {"enabled": [{"name": "A"}, {"name": "B", "weight": 2}, {"name": "C", "weight": 0}]}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"schedulerName": "s", "plugins": {"score": _SCORE_0}},
            "spec.plugins.score.enabled[2].weight: must be > 0, not 0",
        ),
        (
            {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "A", "weight": 101}]}}},
            "spec.plugins.score.enabled[0].weight: must be <= 100, not 101",
        ),
        (
            {"schedulerName": "s", "plugins": {"score": {"enabled": [{"name": "A", "weight": "2"}]}}},
            "spec.plugins.score.enabled[0].weight: must be of type integer, not '2'",
        ),
        ({"schedulerName": "s", "foo": 1}, "spec: unknown field(s) ('foo' was unexpected)"),
        (
            {"schedulerName": "s", "plugins": {"foo": {}}},
            "spec.plugins: unknown field(s) ('foo' was unexpected)",
        ),
        (
            {"schedulerName": "s", "plugins": {"filter": {"enabled": [{"name": "A", "wieght": 1}]}}},
            "spec.plugins.filter.enabled[0]: unknown field(s) ('wieght' was unexpected)",
        ),
        ({}, "spec: 'schedulerName' is required"),
        ({"schedulerName": ""}, "spec.schedulerName: must not be empty"),
        ({"schedulerName": 5}, "spec.schedulerName: must be of type string, not 5"),
        (
            {"schedulerName": "s", "percentageOfNodesToScore": 101},
            "spec.percentageOfNodesToScore: must be <= 100, not 101",
        ),
        (
            {"schedulerName": "s", "percentageOfNodesToScore": -1},
            "spec.percentageOfNodesToScore: must be >= 0, not -1",
        ),
        (
            {"schedulerName": "s", "pluginConfig": [{"name": "NodeName", "args": {}}, {"name": "NodeName"}]},
            "spec.pluginConfig[1].name: duplicate entry for plugin 'NodeName'",
        ),
        ({"schedulerName": "s", "pluginConfig": [{"args": {}}]}, "spec.pluginConfig[0]: 'name' is required"),
        (
            {"schedulerName": "s", "plugins": {"filter": {"disabled": [{"name": ""}]}}},
            "spec.plugins.filter.disabled[0].name: must not be empty",
        ),
        (
            {"apiVersion": "v1", "kind": "ConfigMap", "spec": {}},
            "kind: expected SchedulingProfile in kopf-scheduler.io, got 'ConfigMap' in 'v1'",
        ),
        (_obj(None), "spec: is required"),
        ([], "a SchedulingProfile must be an object"),
        ({**_obj({"schedulerName": "s"}), "metadata": "x"}, "metadata: must be an object, not a string"),
    ],
    ids=[
        "weight-zero",
        "weight-over-100",
        "weight-not-integer",
        "unknown-spec-field",
        "unknown-extension-point",
        "unknown-plugin-field",
        "missing-schedulerName",
        "empty-schedulerName",
        "schedulerName-not-string",
        "percentage-over-100",
        "percentage-negative",
        "duplicate-pluginConfig",
        "pluginConfig-without-name",
        "empty-disabled-name",
        "wrong-kind",
        "missing-spec",
        "not-an-object",
        "metadata-not-an-object",
    ],
)
def test_validation_error_names_the_field(obj: Any, message: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(obj)
    assert str(info.value) == message
    assert info.value.path == (message.split(": ", 1)[0] if ": " in message else "")


# -- mergePluginSet -------------------------------------------------------------------------------------
def _set(enabled: Sequence[str | tuple[str, int]] = (), disabled: Sequence[str] = ()) -> PluginSet:
    refs = [PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in enabled]
    return PluginSet(enabled=refs, disabled=[PluginRef(d) for d in disabled])


def _names(plugin_set: PluginSet) -> list[tuple[str, int]]:
    return [(p.name, p.weight) for p in plugin_set.enabled]


DEFAULT = _set(["A", ("B", 1), "C"])


@pytest.mark.parametrize(
    ("custom", "expected"),
    [
        (_set(), [("A", 0), ("B", 1), ("C", 0)]),
        (_set(disabled=["B"]), [("A", 0), ("C", 0)]),
        (_set(["X"], disabled=["*"]), [("X", 0)]),
        (_set(disabled=["*"]), []),
        (_set([("B", 5)]), [("A", 0), ("B", 5), ("C", 0)]),
        (_set(["X", ("Y", 2)]), [("A", 0), ("B", 1), ("C", 0), ("X", 0), ("Y", 2)]),
        (_set(["X", ("C", 3)], disabled=["A"]), [("B", 1), ("C", 3), ("X", 0)]),
        (_set([("B", 4)], disabled=["B"]), [("A", 0), ("C", 0), ("B", 4)]),
        (_set(["X", "X"]), [("A", 0), ("B", 1), ("C", 0), ("X", 0), ("X", 0)]),
        # the last duplicate replaces the default in place; the earlier one is appended
        (_set([("B", 2), ("B", 3)]), [("A", 0), ("B", 3), ("C", 0), ("B", 2)]),
    ],
    ids=[
        "no-custom",
        "disable-one-default",
        "disable-all-then-enable",
        "disable-all",
        "re-enable-default-with-weight-in-place",
        "custom-appended-in-order",
        "disable-replace-append",
        "disabled-default-re-enabled-goes-last",
        "custom-duplicates-kept",
        "duplicate-of-a-default",
    ],
)
def test_merge_plugin_set(custom: PluginSet, expected: list[tuple[str, int]]) -> None:
    assert _names(merge_plugin_set(DEFAULT, custom)) == expected


def test_merge_plugin_set_keeps_disabled_custom_first_then_default() -> None:
    merged = merge_plugin_set(_set(["A"], disabled=["D"]), _set(disabled=["*", "B"]))
    assert [p.name for p in merged.disabled] == ["*", "B", "D"]


def test_merge_plugin_set_keeps_the_custom_entry_path() -> None:
    custom = PluginSet(enabled=[PluginRef("B", 5, "spec.plugins.score.enabled[0]")])
    assert merge_plugin_set(DEFAULT, custom).enabled[1] == PluginRef("B", 5, "spec.plugins.score.enabled[0]")


def test_merge_plugins_fills_every_point() -> None:
    merged = merge_plugins({"multiPoint": DEFAULT}, {"filter": _set(["X"])})
    assert list(merged) == list(PLUGIN_SET_FIELDS)
    assert _names(merged["multiPoint"]) == [("A", 0), ("B", 1), ("C", 0)]
    assert _names(merged["filter"]) == [("X", 0)]
    assert _names(merged["score"]) == []


# -- kube-scheduler v1.37's pod group extension points ------------------------------------------------
@pytest.mark.parametrize("point", ["placementGenerate", "placementScore", "podGroupPostFilter"])
def test_pod_group_points_are_carried_and_may_only_disable(point: str) -> None:
    spec = parse_profile({"schedulerName": "s", "plugins": {point: {"disabled": [{"name": "*"}]}}})
    assert spec.plugin_set(point).disabled_names == {"*"}
    assert point in merge_plugins({}, spec.plugins)
    with pytest.raises(ProfileError) as e:
        parse_profile({"schedulerName": "s", "plugins": {point: {"enabled": [{"name": "GangScheduling"}]}}})
    assert str(e.value) == (
        f"spec.plugins.{point}.enabled[0].name: plugin 'GangScheduling' does not extend {point}: "
        "kopf-scheduler has no plugin at kube-scheduler v1.37's pod group extension points (GenericWorkload)"
    )
