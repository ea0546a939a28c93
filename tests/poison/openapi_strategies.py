"""Hypothesis strategies drawn from the API server's own OpenAPI v3 schemas (``openapi/kube-apiserver.json``,
see ``openapi_schema``): every object a strategy draws is valid per the schema (the types, formats, enums,
required fields, maps and arrays it gives; quantities from the poison tier's quantity strategy, valid and
extreme), and bounded (nesting depth, optional fields per object, list and map sizes) so one example stays
in milliseconds. What the schema cannot say (that a name is a DNS label, a port in range) is left to
chance: the API server's validation refuses some of these, the scheduler must survive the rest."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from hypothesis import strategies as st
from openapi_schema import REF_PREFIX, load

#: nesting of schema objects below the kind; deeper, only required fields are drawn
MAX_DEPTH = 5
#: past this depth nothing more is drawn, required or not (no schema cycle can run away)
HARD_DEPTH = 12
#: optional fields drawn per object, items per list, entries per map
MAX_OPTIONAL = 4
MAX_ITEMS = 3

SCHEMAS = load()
DEFINITIONS: dict[str, Any] = SCHEMAS["definitions"]
KIND_DEFINITIONS: dict[str, str] = SCHEMAS["kinds"]
VERSION: str = SCHEMAS["kubernetesVersion"]

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}

_quantities: st.SearchStrategy[str] = st.nothing()
_strings: st.SearchStrategy[str] = st.nothing()


def configure(quantities: st.SearchStrategy[str], strings: st.SearchStrategy[str]) -> None:
    """The strategies for a Quantity and for a plain string (the poison tier's own, valid and extreme)."""
    global _quantities, _strings
    _quantities, _strings = quantities, strings
    _named.cache_clear()


#: RFC 3339 as Go parses it: a four-digit year, zero-padded (``strftime``'s ``%Y`` is not, before 1000)
date_times = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=0).isoformat().replace("+00:00", "Z"))
#: what a schema without properties (FieldsV1, RawExtension) holds: any small JSON object
free_objects = st.dictionaries(
    st.text(max_size=8),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=2), st.dictionaries(st.text(max_size=4), inner, max_size=2)
        ),
        max_leaves=6,
    ),
    max_size=3,
)


def _ref(schema: dict[str, Any]) -> str | None:
    """The definition ``schema`` names: directly, or wrapped in an ``allOf`` of one (a ref with a default)."""
    ref = schema.get("$ref")
    if ref is None and len(schema.get("allOf", [])) == 1:
        ref = schema["allOf"][0].get("$ref")
    return ref[len(REF_PREFIX) :] if isinstance(ref, str) else None


def _int_or_string() -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from(["50%", "0%", "100%", "1"]), _strings)


@cache
def _named(name: str, depth: int) -> st.SearchStrategy[Any]:
    if name == QUANTITY:
        return _quantities
    if name == INT_OR_STRING:
        return _int_or_string()
    return st.deferred(lambda: schema_values(DEFINITIONS[name], depth))


def schema_values(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values valid per ``schema`` (an OpenAPI v3 schema of the committed file)."""
    name = _ref(schema)
    if name is not None:
        return _named(name, depth)
    if schema.get("x-kubernetes-int-or-string"):
        return _int_or_string()
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "oneOf" in schema:
        return st.one_of(*(schema_values(option, depth) for option in schema["oneOf"]))
    kind = schema.get("type")
    if kind == "string":
        return date_times if schema.get("format") == "date-time" else _strings
    if kind == "integer":
        low, high = INT_RANGES.get(schema.get("format", "int64"), INT_RANGES["int64"])
        return st.one_of(st.integers(low, high), st.sampled_from([low, high, 0, -1, 1]))
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = schema_values(schema.get("items", {}), depth + 1)
        return st.lists(items, max_size=MAX_ITEMS if depth < HARD_DEPTH else 0)
    if "properties" in schema:
        return _objects(schema, depth)
    if isinstance(schema.get("additionalProperties"), dict):
        values = schema_values(schema["additionalProperties"], depth + 1)
        return st.dictionaries(_strings, values, max_size=MAX_ITEMS if depth < HARD_DEPTH else 0)
    return free_objects


def _objects(schema: dict[str, Any], depth: int) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = schema["properties"]
    required = [p for p in schema.get("required", []) if p in properties] if depth < HARD_DEPTH else []
    optional = sorted(set(properties) - set(required)) if depth < MAX_DEPTH else []
    fields = {p: schema_values(properties[p], depth + 1) for p in (*required, *optional)}

    @st.composite
    def draw_object(draw: st.DrawFn) -> dict[str, Any]:
        chosen = (
            draw(st.lists(st.sampled_from(optional), max_size=MAX_OPTIONAL, unique=True)) if optional else []
        )
        return {p: draw(fields[p]) for p in (*required, *chosen)}

    return draw_object()


def kind_objects(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """Objects of ``kind`` valid per the API server's schema, with their own ``apiVersion`` and ``kind``."""
    definition = DEFINITIONS[KIND_DEFINITIONS[kind]]
    gvk = definition["x-kubernetes-group-version-kind"][0]
    api_version = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]

    def fixed(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "apiVersion": api_version, "kind": kind}

    return _objects(definition, 0).map(fixed)


def overlay(core: Any, extra: Any) -> Any:
    """``extra`` laid over ``core``: maps merged, lists item by item; where both hold a value that is not a
    map, ``core``'s stays (the valid core the scheduler acts on)."""
    if isinstance(core, dict) and isinstance(extra, dict):
        merged = dict(extra)
        for key, value in core.items():
            merged[key] = overlay(value, extra[key]) if key in extra else value
        return merged
    if isinstance(core, list) and isinstance(extra, list):
        return [overlay(c, e) for c, e in zip(core, extra, strict=False)] + core[len(extra) :]
    return core
