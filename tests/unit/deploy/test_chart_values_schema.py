"""Every value of the chart's values.yaml is typed in values.schema.json (helm refuses a value of another
type, and an unknown key, before rendering anything), and each default meets its own schema."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[3] / "charts" / "kopf-scheduler"
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _schema() -> dict[str, Any]:
    return dict(json.loads((CHART / "values.schema.json").read_text()))


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref:
        assert ref.startswith("#/definitions/"), ref
        return dict(schema["definitions"][ref.removeprefix("#/definitions/")])
    return node


def _types(node: dict[str, Any]) -> set[str]:
    if "oneOf" in node:
        return {t for option in node["oneOf"] for t in _types(option)}
    declared = node.get("type")
    return {declared} if isinstance(declared, str) else set(declared or ())


def _leaves(values: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every default; an empty map or list is a leaf of its own."""
    yield path, values
    if isinstance(values, dict):
        for key, value in values.items():
            yield from _leaves(value, f"{path}.{key}" if path else key)


def _node_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for key in path.split(".") if path else ():
        node = _resolve(schema, node)
        properties = node.get("properties") or {}
        if key in properties:
            node = properties[key]
        else:
            extra = node.get("additionalProperties")
            assert isinstance(extra, dict), f"{path}: the schema has no property {key!r}"
            node = extra
    return _resolve(schema, node)


def test_every_value_has_a_type_its_default_has() -> None:
    schema = _schema()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for path, value in _leaves(values):
        types = _types(_node_at(schema, path))
        assert types, f"{path or 'values'}: no type in values.schema.json"
        assert JSON_TYPES[type(value)] in types, f"{path}: default {value!r} is not {types}"


def test_objects_the_chart_owns_refuse_unknown_keys() -> None:
    schema = _schema()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    free_form = {"affinity", "profiles", "global"}  # a core/v1 Affinity, profile specs, a parent's values
    for path, value in _leaves(values):
        if isinstance(value, dict) and value and path.split(".")[-1] not in free_form:
            node = _node_at(schema, path)
            assert node.get("additionalProperties") is False or isinstance(
                node.get("additionalProperties"), dict
            ), f"{path}: unknown keys would pass"
    assert schema["additionalProperties"] is False
