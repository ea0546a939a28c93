"""Every number, list and string a SchedulingProfile sets is bounded: by the schema (``api/schema.py``,
the CRD's ``maximum``/``maxItems``/``maxLength``) for the spec and the extenders, and by each plugin's
``Args.validate`` for ``pluginConfig[].args``. A bad value is refused with a one-line ``ProfileError``
naming the field; the bounds are upstream's validation, or tighter with the reason beside the bound."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.extenders import MAX_EXTENDER_WEIGHT
from kopf_scheduler.api.profile import MAX_PLUGIN_ARGS_BYTES, parse_profile
from kopf_scheduler.api.schema import SPEC_SCHEMA
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry

URL = "http://127.0.0.1:8888/ext"


def _build(spec: dict[str, Any]) -> None:
    build_framework(
        parse_profile({"schedulerName": "s", **spec}),
        new_registry(autoload=False),
        default_plugins(),
        FakeAPI(strict=True),
    )


def _error(spec: dict[str, Any]) -> str:
    with pytest.raises(ProfileError) as e:
        _build(spec)
    message = str(e.value)
    assert "\n" not in message
    return message


def _args(plugin: str, args: dict[str, Any], enable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"pluginConfig": [{"name": plugin, "args": args}]}
    if enable:  # as profiles/gang-scheduling.yaml enables Coscheduling, queue sort included
        spec["plugins"] = {
            "multiPoint": {"enabled": [{"name": plugin}]},
            "queueSort": {"enabled": [{"name": plugin}], "disabled": [{"name": "*"}]},
        }
    return spec


# -- extenders ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("weight", "message"),
    [
        (1e20, "must be <= 1000000, not 1e+20"),
        (10**20, "must be <= 1000000, not 100000000000000000000"),
        (MAX_EXTENDER_WEIGHT + 1, "must be <= 1000000, not 1000001"),
        (-1, "must be > 0 when prioritizeVerb is set (must have a positive weight applied to it), not -1"),
    ],
    ids=["1e20", "10**20", "just-above", "negative"],
)
def test_extender_weight_is_bounded(weight: Any, message: str) -> None:
    extender = {"urlPrefix": URL, "prioritizeVerb": "p", "weight": weight}
    assert _error({"extenders": [extender]}) == f"spec.extenders[0].weight: {message}"


def test_a_negative_weight_is_refused_without_a_prioritize_verb_too() -> None:
    assert _error({"extenders": [{"urlPrefix": URL, "weight": -1}]}) == (
        "spec.extenders[0].weight: must not be negative, not -1"
    )


def test_extender_weight_at_the_bound_is_accepted() -> None:
    _build({"extenders": [{"urlPrefix": URL, "prioritizeVerb": "p", "weight": MAX_EXTENDER_WEIGHT}]})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("urlPrefix", URL + "/" + "x" * 2048, "must be at most 2048 characters long, not 2074"),
        ("filterVerb", "v" * 254, "must be at most 253 characters long, not 254"),
        ("httpTimeout", "1" * 65 + "s", "must be at most 64 characters long, not 66"),
        ("tlsConfig", {"serverName": "s" * 254}, "must be at most 253 characters long, not 254"),
        ("tlsConfig", {"caFile": "c" * 4097}, "must be at most 4096 characters long, not 4097"),
    ],
    ids=["urlPrefix", "verb", "httpTimeout", "serverName", "caFile"],
)
def test_extender_strings_are_bounded(field: str, value: Any, message: str) -> None:
    error = _error({"extenders": [{"urlPrefix": URL, field: value}]})
    path = f"spec.extenders[0].{field}" + (f".{next(iter(value))}" if isinstance(value, dict) else "")
    assert error == f"{path}: {message}"


# -- plugin arguments -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("plugin", "args", "enable", "message"),
    [
        (
            "Coscheduling",
            {"permitWaitingTimeSeconds": 901},
            True,
            "permitWaitingTimeSeconds: 901: must be at most 900 (a Permit wait is cut to 15 minutes)",
        ),
        (
            "Coscheduling",
            {"podGroupBackoffSeconds": 10**20},
            True,
            "podGroupBackoffSeconds: 100000000000000000000: must be at most 86400 (a day)",
        ),
        (
            "VolumeBinding",
            {"bindTimeoutSeconds": 86401},
            False,
            "bindTimeoutSeconds: 86401: must be at most 86400 (a day)",
        ),
        (
            "DynamicResources",
            {"filterTimeout": "10000h"},
            False,
            "filterTimeout: must be at most 5m0s (Filter runs in the scheduling cycle), not 10000h0m0s",
        ),
        (
            "DefaultPreemption",
            {"minCandidateNodesAbsolute": 2**31},
            False,
            "minCandidateNodesAbsolute: 2147483648: not in valid range [0, 2147483647]",
        ),
        (
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 2**31, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            False,
            "defaultConstraints[0].maxSkew: Invalid value: 2147483648: not in valid range (0, 2147483647]",
        ),
        (
            "PodTopologySpread",
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "minDomains": 0,
                    }
                ],
            },
            False,
            "defaultConstraints[0].minDomains: Invalid value: 0: must be greater than zero",
        ),
        (
            "NodeAffinity",
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10**20,
                            "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
                        }
                    ]
                }
            },
            False,
            "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in the range "
            "0-100, not 100000000000000000000",
        ),
        (
            "NodeResourcesFit",
            {"ignoredResources": ["bad/name/x"]},
            False,
            'ignoredResources[0]: Invalid value: "bad/name/x": a valid label key must consist of',
        ),
    ],
    ids=[
        "permit-wait",
        "gang-backoff",
        "bind-timeout",
        "dra-filter-timeout",
        "preemption-candidates",
        "max-skew",
        "min-domains",
        "added-affinity-weight",
        "ignored-resource-name",
    ],
)
def test_plugin_arguments_are_bounded(plugin: str, args: dict[str, Any], enable: bool, message: str) -> None:
    error = _error(_args(plugin, args, enable))
    assert error.startswith(f"spec.pluginConfig[0].args.{message}"), error


def test_a_plugins_arguments_are_bounded_in_size() -> None:
    """Lists and strings inside ``args`` (terms, constraints, resource names) are bounded all at once:
    the arguments of one plugin take at most ``MAX_PLUGIN_ARGS_BYTES`` as JSON."""
    resources = [f"example.com/r{i:06d}" for i in range(4000)]
    assert len(json.dumps({"ignoredResources": resources})) > MAX_PLUGIN_ARGS_BYTES
    error = _error(_args("NodeResourcesFit", {"ignoredResources": resources}))
    assert error.startswith(
        f"spec.pluginConfig[0].args: must take at most {MAX_PLUGIN_ARGS_BYTES} bytes as JSON, not "
    ), error


# -- the spec's schema ----------------------------------------------------------------------------------
def _unbounded(node: Any, path: str = "spec") -> list[str]:
    """Every number without a maximum, list without maxItems and string without maxLength (or a format
    or pattern that bounds it) in a schema; ``args`` is the plugins' to bound."""
    if not isinstance(node, dict):
        return []
    found = []
    kind = node.get("type")
    if kind in ("integer", "number") and "maximum" not in node:
        found.append(path)
    if kind == "array" and "maxItems" not in node:
        found.append(path)
    if kind == "string" and "maxLength" not in node:
        found.append(path)
    for key, child in (node.get("properties") or {}).items():
        if key != "args":
            found += _unbounded(child, f"{path}.{key}")
    if "items" in node:
        found += _unbounded(node["items"], f"{path}[]")
    return found


def test_every_number_list_and_string_of_the_spec_is_bounded() -> None:
    assert _unbounded(SPEC_SCHEMA) == []
