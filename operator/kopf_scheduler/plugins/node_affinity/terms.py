"""Node selector terms checked as strictly as upstream parses them, and the pod's node affinity parsed
once per pod.

``framework.selectors`` accepts any label key or value; kube-scheduler's parser
(``component-helpers/scheduling/corev1/nodeaffinity``, through ``labels.NewRequirement``) also rejects
keys that are not qualified names, values that are not label values, and field requirements without
exactly one value. Such a term never matches in a filter, fails pre-score for preferred terms, and makes
``addedAffinity`` invalid. ``check_term`` returns the first problem, with the field path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.selectors import (
    NodeSelector,
    NodeSelectorTerm,
    PreferredTerm,
    RequiredNodeAffinity,
)

OBJECT_NAME_FIELD = "metadata.name"
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INTEGER = re.compile(r"^[+-]?[0-9]+$")
_LABEL_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _key_error(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return f"Invalid value: {key!r}: prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME.match(name):
        return (
            f"Invalid value: {key!r}: name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return None


def _expression_error(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return "must be an object"
    key, op, values = str(raw.get("key") or ""), raw.get("operator"), list(raw.get("values") or ())
    problem = _key_error(key)
    if problem:
        return f"key: {problem}"
    if op not in _LABEL_OPS:
        return f"operator: {op!r} is not a valid node selector operator"
    if op in ("In", "NotIn") and not values:
        return "values: for 'in', 'notin' operators, values set can't be empty"
    if op in ("Exists", "DoesNotExist") and values:
        return "values: values set must be empty for exists and does not exist"
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return "values: for 'Gt', 'Lt' operators, exactly one value is required"
        if not _INTEGER.match(str(values[0])) or not -(2**63) <= int(values[0]) < 2**63:
            return "values[0]: for 'Gt', 'Lt' operators, the value must be an integer"
    for i, value in enumerate(values):
        if not isinstance(value, str) or len(value) > 63 or not _VALUE.match(value):
            return (
                f"values[{i}]: Invalid value: {value!r}: a valid label must be an empty string or consist "
                "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                "character"
            )
    return None


def _field_error(raw: Any) -> str | None:
    if not isinstance(raw, Mapping):
        return "must be an object"
    op, values = raw.get("operator"), list(raw.get("values") or ())
    if op not in ("In", "NotIn"):
        return f"operator: {op!r} is not a valid node field selector operator"
    if len(values) != 1:
        return f"values: unexpected number of value ({len(values)}) for node field selector operator {op!r}"
    if raw.get("key") != OBJECT_NAME_FIELD:
        return f"key: field {raw.get('key')!r} is not supported"
    return None


def check_term(raw: Any) -> str | None:
    """The first reason ``raw`` (a ``NodeSelectorTerm``) cannot be parsed, as ``path: message``."""
    if not isinstance(raw, Mapping):
        return "must be an object"
    for kind, check in (("matchExpressions", _expression_error), ("matchFields", _field_error)):
        items = raw.get(kind) or ()
        if not isinstance(items, Sequence) or isinstance(items, str):
            return f"{kind}: must be a list"
        for i, item in enumerate(items):
            problem = check(item)
            if problem:
                return f"{kind}[{i}].{problem}"
    return None


def parse_term(raw: Any) -> NodeSelectorTerm:
    """A term that never matches when upstream could not parse it."""
    if check_term(raw) is not None:
        return NodeSelectorTerm((), (), invalid=True)
    return NodeSelectorTerm.parse(raw)


def parse_node_selector(raw: Mapping[str, Any]) -> NodeSelector:
    return NodeSelector(tuple(parse_term(t) for t in raw.get("nodeSelectorTerms") or ()))


def parse_preferred_terms(raw: Sequence[Mapping[str, Any]]) -> tuple[tuple[PreferredTerm, ...], str | None]:
    """Terms with a weight and a non-empty preference, and the first parse error (then no terms)."""
    out = []
    for i, item in enumerate(raw):
        preference = item.get("preference") or {}
        weight = int(item.get("weight") or 0)
        if weight == 0 or not (preference.get("matchExpressions") or preference.get("matchFields")):
            continue
        problem = check_term(preference)
        if problem:
            return (), f"[{i}].{problem}"
        out.append(PreferredTerm(weight, NodeSelectorTerm.parse(preference)))
    return tuple(out), None


@dataclass(frozen=True, slots=True)
class PodNodeAffinity:
    """What NodeAffinity reads from a pod, parsed once (kept in ``PodInfo.extra``)."""

    required: RequiredNodeAffinity
    #: whether ``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` is set
    has_required: bool
    #: node names the required terms restrict the pod to (``matchFields`` on ``metadata.name``), None: any
    node_names: frozenset[str] | None
    #: None when the pod sets no preferred terms at all (then pre-score may skip)
    preferred: tuple[PreferredTerm, ...] | None
    preferred_error: str | None


def _names_of_term(term: Mapping[str, Any]) -> frozenset[str] | None:
    names: frozenset[str] | None = None
    for req in term.get("matchFields") or ():
        if req.get("key") == OBJECT_NAME_FIELD and req.get("operator") == "In":
            values = frozenset(str(v) for v in req.get("values") or ())
            names = values if names is None else names & values  # requirements of a term are ANDed
    return names


_NOTHING = PodNodeAffinity(RequiredNodeAffinity((), None), False, None, None, None)


def pod_node_affinity(pod_spec: Mapping[str, Any]) -> PodNodeAffinity:
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    if not node_affinity and not pod_spec.get("nodeSelector"):
        return _NOTHING  # most pods: nothing to parse
    required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    base = RequiredNodeAffinity.of_pod_spec(pod_spec)
    required = RequiredNodeAffinity(base.node_selector, None)
    node_names: frozenset[str] | None = None
    if required_raw is not None:
        required = RequiredNodeAffinity(base.node_selector, parse_node_selector(required_raw))
        terms = required_raw.get("nodeSelectorTerms") or ()
        union: set[str] = set()
        for term in terms:
            names = _names_of_term(term)
            if names is None:  # terms are ORed: one term without a name restriction admits every node
                union.clear()
                break
            union |= names
        else:
            node_names = frozenset(union) if terms else None
    preferred_raw = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    preferred, error = (None, None) if preferred_raw is None else parse_preferred_terms(preferred_raw)
    return PodNodeAffinity(required, required_raw is not None, node_names, preferred, error)
