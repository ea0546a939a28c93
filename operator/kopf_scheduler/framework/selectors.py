"""Label selectors and node selectors, matched as upstream matches them.

- ``LabelSelector`` (``metav1.LabelSelector``): matchLabels AND matchExpressions (In, NotIn, Exists,
  DoesNotExist). An empty selector matches everything; ``None`` (no selector) matches nothing.
- ``NodeSelector`` (``component-helpers/scheduling/corev1/nodeaffinity``): terms are ORed, the
  requirements of a term ANDed; operators In, NotIn, Exists, DoesNotExist, Gt, Lt; ``matchFields`` on
  ``metadata.name``. An empty term matches nothing; a term that cannot be parsed (``In`` with no values,
  ``Gt`` with a non-integer) never matches.
- ``RequiredNodeAffinity``: a pod's ``nodeSelector`` AND its required node affinity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.errors import json_type

_LABEL_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_OPS = _LABEL_OPS | {"Gt", "Lt"}


class SelectorError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str]
    #: Gt/Lt bound
    bound: int = 0

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op == "In":
            return labels.get(self.key) in self.values if self.key in labels else False
        if op == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        value = labels.get(self.key)
        if value is None:
            return False
        try:
            number = int(value)
        except ValueError:
            return False
        return number > self.bound if op == "Gt" else number < self.bound


def _requirement(raw: Mapping[str, Any], allowed: frozenset[str]) -> Requirement:
    key = str(raw.get("key") or "")
    op = str(raw.get("operator") or "")
    values = [str(v) for v in raw.get("values") or ()]
    if op not in allowed:
        raise SelectorError(f"{op!r} is not a valid operator")
    if op in ("In", "NotIn") and not values:
        raise SelectorError(f"values set can't be empty for operator {op!r}")
    if op in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"values set must be empty for operator {op!r}")
    bound = 0
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(f"operator {op!r} takes exactly one value")
        try:
            bound = int(values[0])
        except ValueError:
            raise SelectorError(f"operator {op!r} needs an integer value, not {values[0]!r}") from None
    return Requirement(key, op, frozenset(values), bound)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    requirements: tuple[Requirement, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> LabelSelector | None:
        """``None`` for a missing selector (matches nothing); raises ``SelectorError`` when invalid."""
        if raw is None:
            return None
        reqs = [
            Requirement(str(k), "In", frozenset({str(v)})) for k, v in (raw.get("matchLabels") or {}).items()
        ]
        reqs += [_requirement(e, _LABEL_OPS) for e in raw.get("matchExpressions") or ()]
        return cls(tuple(reqs))

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    expressions: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]
    #: the term could not be parsed: it never matches
    invalid: bool = False

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NodeSelectorTerm:
        try:
            expressions = tuple(_requirement(e, _NODE_OPS) for e in raw.get("matchExpressions") or ())
            fields = []
            for f in raw.get("matchFields") or ():
                req = _requirement(f, frozenset({"In", "NotIn"}))
                if req.key != "metadata.name":
                    raise SelectorError(f"field {req.key!r} is not supported")
                fields.append(req)
        except SelectorError:
            return cls((), (), invalid=True)
        return cls(expressions, tuple(fields))

    @property
    def empty(self) -> bool:
        return not self.expressions and not self.fields and not self.invalid

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.invalid or self.empty:
            return False
        if not all(r.matches(labels) for r in self.expressions):
            return False
        return all(r.matches({"metadata.name": node_name}) for r in self.fields)


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[NodeSelectorTerm, ...]

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NodeSelector:
        return cls(tuple(NodeSelectorTerm.parse(t) for t in raw.get("nodeSelectorTerms") or ()))

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        return any(t.matches(labels, node_name) for t in self.terms)


def node_selector_type_error(raw: Mapping[str, Any]) -> str | None:
    """The first field of ``raw`` (a ``NodeSelector`` of an API object other than a pod) of the wrong JSON
    type, as ``path: must be ...``; None when every field has its type. ``NodeSelector.parse`` reads only
    such a selector: a term of the right types with values upstream refuses still parses (it never
    matches). The API server stores no other; a file given to ``simulate`` may hold one."""
    terms = raw.get("nodeSelectorTerms")
    if terms is None:
        return None
    if not isinstance(terms, list | tuple):
        return f"nodeSelectorTerms: must be a list, not {json_type(terms)}"
    for i, term in enumerate(terms):
        if not isinstance(term, Mapping):
            return f"nodeSelectorTerms[{i}]: must be an object, not {json_type(term)}"
        for kind in ("matchExpressions", "matchFields"):
            requirements = term.get(kind)
            path = f"nodeSelectorTerms[{i}].{kind}"
            if requirements is None:
                continue
            if not isinstance(requirements, list | tuple):
                return f"{path}: must be a list, not {json_type(requirements)}"
            for j, requirement in enumerate(requirements):
                if not isinstance(requirement, Mapping):
                    return f"{path}[{j}]: must be an object, not {json_type(requirement)}"
                values = requirement.get("values")
                if values is not None and not isinstance(values, list | tuple):
                    return f"{path}[{j}].values: must be a list, not {json_type(values)}"
    return None


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's ``spec.nodeSelector`` AND its ``requiredDuringSchedulingIgnoredDuringExecution``."""

    node_selector: tuple[tuple[str, str], ...]
    required: NodeSelector | None

    @classmethod
    def of_pod_spec(cls, spec: Mapping[str, Any]) -> RequiredNodeAffinity:
        selector = tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items()))
        node_affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required_raw = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        required = NodeSelector.parse(required_raw) if required_raw is not None else None
        return cls(selector, required)

    @property
    def trivial(self) -> bool:
        return not self.node_selector and self.required is None

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        for key, value in self.node_selector:
            if labels.get(key) != value:
                return False
        return self.required is None or self.required.matches(labels, node_name)
