"""Label selectors of affinity terms parsed as ``metav1.LabelSelectorAsSelector`` parses them, with its
error messages (``labels.NewRequirement``: label key and value syntax, operator value counts).

The API server validates selectors of stored pods, so these errors mostly reach the scheduler from files
given to ``simulate``; the text is upstream's so that a rejected pod reads the same either way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kopf_scheduler.framework.selectors import LabelSelector, SelectorError

_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME = re.compile(f"^{_QNAME_FMT}$")
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)
_LABEL_VALUE_FMT = f"({_QNAME_FMT})?"
_LABEL_VALUE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
    "must start and end with an alphanumeric character"
)
_DNS1123_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_DNS1123 = re.compile(f"^{_DNS1123_FMT}$")
_DNS1123_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character"
)
_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    listed = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {listed}regex used for validation is '{fmt}')"


def _go_quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _go_strings(values: Sequence[str]) -> str:
    return "[]string{" + ", ".join(_go_quote(v) for v in values) + "}"


def _qualified_name_errors(value: str) -> list[str]:
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 bytes")
            if not _DNS1123.match(prefix):
                errs.append("prefix part " + _regex_error(_DNS1123_MSG, _DNS1123_FMT, "example.com"))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _QNAME.match(name):
        errs.append("name part " + _regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def _label_value_errors(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 bytes")
    if not _LABEL_VALUE.match(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _aggregate(errors: list[str]) -> str:
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _check_requirement(key: str, operator: str, values: Sequence[str]) -> None:
    errors: list[str] = []
    key_errs = _qualified_name_errors(key)
    if key_errs:
        errors.append(f"key: Invalid value: {_go_quote(key)}: {'; '.join(key_errs)}")
    if operator in ("In", "NotIn") and not values:
        detail = "for 'in', 'notin' operators, values set can't be empty"
        errors.append(f"values: Invalid value: {_go_strings(values)}: {detail}")
    if operator in ("Exists", "DoesNotExist") and values:
        detail = "values set must be empty for exists and does not exist"
        errors.append(f"values: Invalid value: {_go_strings(values)}: {detail}")
    for i, value in enumerate(values):
        value_errs = _label_value_errors(value)
        if value_errs:
            errors.append(f"values[{i}][{key}]: Invalid value: {_go_quote(value)}: {'; '.join(value_errs)}")
    if errors:
        raise SelectorError(_aggregate(errors))


def parse_label_selector(raw: Any) -> LabelSelector | None:
    """``None`` (matches nothing) for a missing selector; an empty selector matches everything.

    Raises ``SelectorError`` with upstream's message when a requirement is invalid.
    """
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise SelectorError("label selector must be an object")
    match_labels, expressions = raw.get("matchLabels") or {}, raw.get("matchExpressions") or ()
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels: must be an object")
    if not isinstance(expressions, list | tuple):
        raise SelectorError("matchExpressions: must be a list of objects")
    for key, value in match_labels.items():
        _check_requirement(str(key), "In", [str(value)])
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("matchExpressions: must be a list of objects")
        operator = str(expr.get("operator") or "")
        if operator not in _OPERATORS:
            raise SelectorError(f"{_go_quote(operator)} is not a valid label selector operator")
        _check_requirement(str(expr.get("key") or ""), operator, [str(v) for v in expr.get("values") or ()])
    return LabelSelector.parse(raw)
