"""The CRD's CEL rules, evaluated with cel-python the way the API server applies them (each rule at every node
of the object its schema describes, the error written as the API server writes it): a profile they refuse,
the operator refuses too, at the same field and in the same words; every shipped profile passes them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import celpy
import pytest
import yaml

from kopf_scheduler.api import crd
from kopf_scheduler.api.crd_rules import DEFAULT_QUEUE_SORT
from kopf_scheduler.api.duration import parse_duration
from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.interface import QueueSortPlugin
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry

ROOT = Path(__file__).resolve().parents[3]
SPEC = crd.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
_ENV = celpy.Environment()


def _duration(text: celpy.celtypes.StringType) -> celpy.celtypes.IntType:
    """cel-go's ``duration()`` (Go's ``time.ParseDuration``, nanoseconds), where cel-python's stops at
    microseconds and refuses "0" and "µs"; as nanoseconds, which compare the same way."""
    return celpy.celtypes.IntType(round(parse_duration(str(text)) * 1e9))


def _eval(expression: str, value: Any) -> Any:
    program = _ENV.program(_ENV.compile(expression), functions={"duration": _duration})
    return program.evaluate({"self": celpy.json_to_cel(value)})


def _invalid(value: Any) -> str:
    """How the API server shows the value a rule refused (``field.Invalid``): a scalar as Go prints it, an
    object or a list not at all."""
    return "Invalid value" if isinstance(value, (dict, list)) else f"Invalid value: {json.dumps(value)}"


def cel_errors(schema: dict[str, Any], value: Any, path: str = "spec") -> list[str]:
    """Every rule ``value`` breaks, as the API server lists them (``path: Invalid value: 0: message``)."""
    errors = []
    for rule in schema.get("x-kubernetes-validations", ()):
        assert "messageExpression" not in rule  # the API server's own text carries the value
        if not _eval(rule["rule"], value):
            errors.append(f"{path}{rule.get('fieldPath', '')}: {_invalid(value)}: {rule['message']}")
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if key in value:
                errors += cel_errors(child, value[key], f"{path}.{key}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            errors += cel_errors(schema["items"], item, f"{path}[{i}]")
    return errors


class OtherSort(QueueSortPlugin):
    def less(self, a: Any, b: Any) -> bool:
        return False


def _other_sort_source() -> SimpleNamespace:
    def new(args: Any, handle: Any) -> QueueSortPlugin:
        plugin = OtherSort()
        plugin.name = "OtherSort"
        return plugin

    return SimpleNamespace(NAME="OtherSort", Args=NoArgs, new=new)


def model_error(spec: dict[str, Any]) -> str | None:
    """``path: message`` of the operator's refusal of ``spec`` (parsing, then building), None if it serves."""
    registry = new_registry(autoload=False)
    registry.register("OtherSort", _other_sort_source())
    try:
        build_framework(parse_profile(spec), registry, default_plugins(), client=None)  # type: ignore[arg-type]
    except ProfileError as e:
        return str(e)
    return None


def _spec(**fields: Any) -> dict[str, Any]:
    return {"schedulerName": "s", **fields}


def _named(names: list[str]) -> list[dict[str, str]]:
    return [{"name": n} for n in names]


def _extender(**fields: Any) -> dict[str, Any]:
    return {"urlPrefix": "http://x.example", **fields}


WEIGHT = "spec.plugins.score.enabled[0].weight"
MULTI_POINT_WEIGHT = "spec.plugins.multiPoint.enabled[0].weight"
POSITIVE = "must be > 0 when prioritizeVerb is set (must have a positive weight applied to it)"
TIME_LIMIT = "must not be negative (every extender call has a time limit)"
POD_GROUP = (
    "kopf-scheduler has no plugin at kube-scheduler v1.37's pod group extension points (GenericWorkload)"
)


@pytest.mark.parametrize(
    ("spec", "operator", "api_server"),
    [
        (
            _spec(plugins={"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 0}]}}),
            f"{WEIGHT}: must be > 0, not 0",
            f"{WEIGHT}: Invalid value: 0: must be > 0",
        ),
        (
            _spec(plugins={"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 101}]}}),
            f"{MULTI_POINT_WEIGHT}: must be <= 100, not 101",
            f"{MULTI_POINT_WEIGHT}: Invalid value: 101: must be <= 100",
        ),
        (
            _spec(percentageOfNodesToScore=-1),
            "spec.percentageOfNodesToScore: must be >= 0, not -1",
            "spec.percentageOfNodesToScore: Invalid value: -1: must be >= 0",
        ),
        (
            _spec(percentageOfNodesToScore=101),
            "spec.percentageOfNodesToScore: must be <= 100, not 101",
            "spec.percentageOfNodesToScore: Invalid value: 101: must be <= 100",
        ),
        (
            _spec(extenders=[_extender(prioritizeVerb="p")]),
            f"spec.extenders[0].weight: {POSITIVE}, not 0",
            f"spec.extenders[0].weight: Invalid value: {POSITIVE}",
        ),
        (
            _spec(extenders=[_extender(weight=-2)]),
            "spec.extenders[0].weight: must not be negative, not -2",
            "spec.extenders[0].weight: Invalid value: -2: must not be negative",
        ),
        (
            _spec(extenders=[_extender(weight=1_000_001)]),
            "spec.extenders[0].weight: must be <= 1000000, not 1000001",
            "spec.extenders[0].weight: Invalid value: 1000001: must be <= 1000000",
        ),
        (
            _spec(extenders=[_extender(httpTimeout="-1s")]),
            f"spec.extenders[0].httpTimeout: {TIME_LIMIT}, not '-1s'",
            f'spec.extenders[0].httpTimeout: Invalid value: "-1s": {TIME_LIMIT}',
        ),
        (
            _spec(extenders=[_extender(httpTimeout="5m0.5s")]),
            "spec.extenders[0].httpTimeout: must be at most 300s, not '5m0.5s'",
            'spec.extenders[0].httpTimeout: Invalid value: "5m0.5s": must be at most 300s',
        ),
        (
            _spec(extenders=[_extender(httpTimeout="5 s")]),
            'spec.extenders[0].httpTimeout: time: unknown unit " s" in duration "5 s"',
            'spec.extenders[0].httpTimeout: Invalid value: "5 s": must be a Go duration ("5s", "1m30s")',
        ),
        (
            _spec(extenders=[_extender(bindVerb="bind"), _extender(bindVerb="bind")]),
            "spec.extenders: found 2 extenders implementing bind (entries [0, 1]): only one extender can "
            "implement bind",
            "spec.extenders: Invalid value: only one extender can implement bind",
        ),
        (
            _spec(plugins={"placementScore": {"enabled": [{"name": "NodeResourcesFit"}]}}),
            f"spec.plugins.placementScore.enabled[0].name: plugin 'NodeResourcesFit' does not extend "
            f"placementScore: {POD_GROUP}",
            "spec.plugins.placementScore.enabled: Invalid value: no plugin extends placementScore: "
            f"{POD_GROUP}; this set may only disable",
        ),
        (
            _spec(plugins={"queueSort": {"enabled": _named(["PrioritySort", "OtherSort"])}}),
            "spec.plugins.queueSort: exactly one queue sort plugin is required for profile 's', got 2",
            "spec.plugins.queueSort: Invalid value: "
            "exactly one queue sort plugin is required: enable at most one",
        ),
    ],
)
def test_what_the_rules_refuse_the_operator_refuses_at_the_same_field(
    spec: dict[str, Any], operator: str, api_server: str
) -> None:
    assert model_error(spec) == operator
    assert cel_errors(SPEC, spec) == [api_server]


def test_bounds_checked_by_rules_are_not_also_openapi_bounds() -> None:
    """One error for a bad number: the bound is the rule's, not also the OpenAPI schema's."""
    weight = SPEC["properties"]["plugins"]["properties"]["score"]["properties"]["enabled"]["items"]
    weight = weight["properties"]["weight"]
    assert {"minimum", "maximum", "exclusiveMinimum"}.isdisjoint(weight)
    assert [r["rule"] for r in weight["x-kubernetes-validations"]] == ["self > 0", "self <= 100"]


def test_every_rule_has_a_message() -> None:
    def walk(node: Any) -> list[dict[str, str]]:
        if isinstance(node, dict):
            return list(node.get("x-kubernetes-validations", ())) + [
                r for v in node.values() for r in walk(v)
            ]
        return [r for v in node for r in walk(v)] if isinstance(node, list) else []

    rules = walk(SPEC)
    assert len(rules) > 40
    assert all(r["message"] for r in rules)


GOOD_TIMEOUTS = [
    "",
    "0",
    "-0",
    "+5s",
    "5s",
    "1m30s",
    "1.5m",
    ".5s",
    "300s",
    "5m",
    "250ms",
    "10us",
    "10µs",
    "3ns",
]
BAD_TIMEOUTS = ["5", "s", "1.s.", "5m1ns", "-1ns", "1h", "5S", "1 s", "1e3s", "--1s"]


@pytest.mark.parametrize("timeout", GOOD_TIMEOUTS + BAD_TIMEOUTS)
def test_http_timeout_rules_agree_with_the_operator(timeout: str) -> None:
    spec = _spec(extenders=[{"urlPrefix": "http://x.example", "httpTimeout": timeout}])
    model = model_error(spec)
    refused = cel_errors(SPEC, spec)
    assert (model is None) == (timeout in GOOD_TIMEOUTS)
    assert (refused == []) == (model is None), (model, refused)


QUEUE_SORT_SETS = [[], [DEFAULT_QUEUE_SORT], ["OtherSort"], ["*"], [DEFAULT_QUEUE_SORT, "OtherSort"]]


def test_queue_sort_rules_refuse_only_what_the_operator_refuses_and_the_certain_cases() -> None:
    """Every combination of queueSort and multiPoint enabling and disabling PrioritySort, another queue
    sort and "*": the rules refuse a profile only when the operator refuses it for its queue sort count,
    and refuse every such profile unless multiPoint enables a plugin they cannot know (OtherSort)."""
    checked = caught = 0
    for qs_on, qs_off, mp_on, mp_off in itertools.product(QUEUE_SORT_SETS, repeat=4):
        if "*" in qs_on or "*" in mp_on:
            continue
        plugins = {
            "queueSort": {"enabled": _named(qs_on), "disabled": _named(qs_off)},
            # a binder whatever multiPoint disables, so only the queue sort count is at stake
            "bind": {"enabled": _named(["DefaultBinder"])},
            "multiPoint": {"enabled": _named(mp_on), "disabled": _named(mp_off)},
        }
        spec = _spec(plugins=plugins)
        model = model_error(spec)
        refused = cel_errors(SPEC, spec)
        counted = model is not None and model.startswith("spec.plugins.queueSort:")
        checked += 1
        if refused:
            assert counted, (plugins, refused, model)
            assert all(
                r.startswith("spec.plugins.queueSort: Invalid value: exactly one queue sort") for r in refused
            )
            caught += 1
        elif "OtherSort" not in mp_on:
            assert not counted, (plugins, model)
    assert checked == 5 * 5 * 4 * 4 and caught > 100


def test_the_default_queue_sort_is_the_one_the_rules_know() -> None:
    framework = build_framework(
        parse_profile(_spec()),
        new_registry(autoload=False),
        default_plugins(),
        client=None,  # type: ignore[arg-type]
    )
    assert framework.queue_sort.name == DEFAULT_QUEUE_SORT
    assert DEFAULT_QUEUE_SORT in [ref.name for ref in default_plugins()["multiPoint"].enabled]


@pytest.mark.parametrize("path", sorted((ROOT / "profiles").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_profiles_pass_the_rules(path: Path) -> None:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc:
            assert cel_errors(SPEC, doc["spec"]) == []
