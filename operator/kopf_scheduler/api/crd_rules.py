"""The CEL rules (``x-kubernetes-validations``) of the SchedulingProfile CRD: what the API server can refuse
at admission, in the words the operator's validation uses for the same field.

``attach(spec)`` adds them to the structural ``spec`` schema ``crd.py`` derives from ``schema.SPEC_SCHEMA``:

- every numeric bound of the schema (plugin weights, ``percentageOfNodesToScore``, extender weights)
  becomes one rule per bound whose message is the model's (``must be > 0``: the API server shows the
  value itself, ``spec.plugins.score.enabled[0].weight: Invalid value: 0: must be > 0``); the bound is
  then left out of the CRD's OpenAPI schema, so a bad number gets one error, not two;
- the queue sort: at most one plugin in ``queueSort.enabled``, and, knowing that the defaults sort with
  PrioritySort from ``multiPoint``, neither two queue sorts (another one enabled while PrioritySort is not
  disabled) nor none (PrioritySort disabled, nothing enabled that could replace it);
- the pod group extension points may only disable;
- extenders: a weight > 0 with a prioritize verb and never negative, at most one binder, an
  ``httpTimeout`` that is a Go duration between 0 and ``MAX_HTTP_TIMEOUT``.

What CEL cannot know (which plugins exist and what they implement, plugin arguments, URLs, TLS files,
the operator's bounds) is still checked by the operator, which refuses the profile in its status. Every
list and string the rules read is bounded (``maxItems``, ``maxLength``), which keeps the API server's
estimate of their cost within its budget.
"""

from __future__ import annotations

import copy
from typing import Any

from kopf_scheduler.api.extenders import MAX_HTTP_TIMEOUT
from kopf_scheduler.api.schema import POD_GROUP_POINTS

#: the queue sort plugin of kube-scheduler's defaults (``plugins/defaults.py``, in ``multiPoint``)
DEFAULT_QUEUE_SORT = "PrioritySort"
#: what Go's ``time.ParseDuration`` reads (``api/duration.py``): a sign, then ``<decimal><unit>`` parts
#: (``[.]``, not an escaped dot: a CEL string literal knows no ``\.`` escape)
GO_DURATION = "^[-+]?(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"


def _rule(rule: str, message: str, field_path: str = "") -> dict[str, str]:
    out = {"rule": rule, "message": message}
    if field_path:
        out["fieldPath"] = field_path
    return out


def _add(node: dict[str, Any], *rules: dict[str, str]) -> None:
    node.setdefault("x-kubernetes-validations", []).extend(copy.deepcopy(list(rules)))


def _numeric_bounds(node: Any) -> None:
    """Every integer's ``minimum``/``exclusiveMinimum``/``maximum`` as CEL rules with the model's words."""
    if isinstance(node, list):
        for item in node:
            _numeric_bounds(item)
        return
    if not isinstance(node, dict):
        return
    if node.get("type") == "integer":
        rules: list[tuple[str, Any]] = []
        if node.pop("exclusiveMinimum", False) is True:
            rules.append((">", node.pop("minimum")))
        elif "minimum" in node:
            rules.append((">=", node.pop("minimum")))
        if "maximum" in node:
            rules.append(("<=", node.pop("maximum")))
        for op, bound in rules:
            _add(node, _rule(f"self {op} {bound}", f"must be {op} {bound}"))
    for value in node.values():
        _numeric_bounds(value)


def _named(point: str, field: str, names: tuple[str, ...]) -> str:
    """CEL: ``spec.plugins.<point>.<field>`` lists a plugin named one of ``names``."""
    if len(names) == 1:
        test = f"p.name == '{names[0]}'"
    else:
        test = "p.name in [" + ", ".join(f"'{n}'" for n in names) + "]"
    return f"(has(self.{point}) && has(self.{point}.{field}) && self.{point}.{field}.exists(p, {test}))"


def _queue_sort_rules() -> list[dict[str, str]]:
    """Rules on ``spec.plugins`` that count the queue sort plugins the merge with the defaults yields,
    where the count is certain whatever the plugins named are."""
    sort = DEFAULT_QUEUE_SORT
    all_disabled = _named("queueSort", "disabled", ("*",))
    sort_disabled = _named("queueSort", "disabled", (sort,))
    # the merged multiPoint set keeps PrioritySort (the defaults' only queue sort) unless disabled there
    sort_in_multi_point = (
        f"(!{_named('multiPoint', 'disabled', (sort, '*'))} || {_named('multiPoint', 'enabled', (sort,))})"
    )
    multi_point_adds_no_other = (
        "(!(has(self.multiPoint) && has(self.multiPoint.enabled)) || "
        f"self.multiPoint.enabled.all(p, p.name == '{sort}'))"
    )
    enabled = "has(self.queueSort) && has(self.queueSort.enabled) && self.queueSort.enabled"
    # two or more enabled are the rule on queueSort's (one error for one mistake)
    enables_other = f"({enabled}.size() == 1 && {enabled}[0].name != '{sort}')"
    enables_any = f"({enabled}.size() > 0)"
    no_sort_left = f"({multi_point_adds_no_other} && ({sort_disabled} || !{sort_in_multi_point}))"
    return [
        _rule(
            f"!({enables_other} && !{all_disabled} && !{sort_disabled} && {sort_in_multi_point})",
            f"exactly one queue sort plugin is required, got 2: {sort} still sorts from the defaults "
            f"(disable it in queueSort.disabled or multiPoint.disabled)",
            field_path=".queueSort",
        ),
        _rule(
            f"!(!{enables_any} && ({all_disabled} || {no_sort_left}))",
            f"exactly one queue sort plugin is required, got 0: {sort} is disabled and no other is enabled",
            field_path=".queueSort",
        ),
    ]


def _extender_rules(extenders: dict[str, Any]) -> None:
    item = extenders["items"]
    props = item["properties"]
    _add(
        extenders,
        _rule(
            "self.filter(e, has(e.bindVerb) && e.bindVerb != '').size() <= 1",
            "only one extender can implement bind",
        ),
    )
    # a negative weight is the weight's own rule's to report (one error per field)
    _add(
        item,
        _rule(
            "!has(self.prioritizeVerb) || self.prioritizeVerb == '' "
            "|| (has(self.weight) && self.weight != 0)",
            "must be > 0 when prioritizeVerb is set (must have a positive weight applied to it)",
            field_path=".weight",
        ),
    )
    _add(
        props["weight"],
        _rule("self >= 0", "must not be negative"),
    )
    limit = f"{MAX_HTTP_TIMEOUT:g}s"
    well_formed = f"self.matches('{GO_DURATION}')"
    _add(
        props["httpTimeout"],
        _rule(f"self == '' || {well_formed}", 'must be a Go duration ("5s", "1m30s")'),
        _rule(
            f"self == '' || !{well_formed} || duration(self) >= duration('0s')",
            "must not be negative (every extender call has a time limit)",
        ),
        _rule(
            f"self == '' || !{well_formed} || duration(self) <= duration('{limit}')",
            f"must be at most {limit}",
        ),
    )


def attach(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` (a structural schema from ``schema.SPEC_SCHEMA``, changed in place) with the CEL rules."""
    _numeric_bounds(spec)
    plugins = spec["properties"]["plugins"]
    _add(plugins, *_queue_sort_rules())
    _add(
        plugins["properties"]["queueSort"],
        _rule(
            "!has(self.enabled) || self.enabled.size() <= 1",
            "exactly one queue sort plugin is required: enable at most one",
        ),
    )
    for point in POD_GROUP_POINTS:
        _add(
            plugins["properties"][point],
            _rule(
                "!has(self.enabled) || self.enabled.size() == 0",
                f"no plugin extends {point}: kopf-scheduler has no plugin at kube-scheduler v1.37's pod "
                "group extension points (GenericWorkload); this set may only disable",
                field_path=".enabled",
            ),
        )
    _extender_rules(spec["properties"]["extenders"])
    return spec
