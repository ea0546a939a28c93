"""The extender protocol on the wire: kube-scheduler's ``k8s.io/kube-scheduler/extender/v1`` types as JSON.

Those Go structs have no JSON tags, so kube-scheduler sends their Go field names as keys (``Pod``,
``Nodes``, ``NodeNames``, ``FailedNodes``, ``Host``, ``Score``, ``PodUID``, ...) and reads answers the way
``encoding/json`` does: an exact key first, else one that matches ignoring case (so ``nodenames`` or
``failedNodes`` work too), ``null`` as empty. Encoders here write exactly what kube-scheduler writes;
decoders accept exactly what it accepts and raise ``WireError`` where it would fail to decode: every
number is an ``int64`` (``1e20``, ``5.0`` and ``10**20`` are refused in Go's words), and nesting deeper
than Python's parser can follow (about 1000 levels; Go stops at 10000) is an invalid answer, not a
``RecursionError``. An answer's size is bounded before it is decoded (``transport.response_limit``).

Shapes (``types.go``):

- ``ExtenderArgs``: ``{"Pod": pod, "Nodes": NodeList | null, "NodeNames": [name] | null}``: the nodes
  as full objects, or only their names when the extender is ``nodeCacheCapable``.
- ``ExtenderFilterResult``: ``{"Nodes", "NodeNames", "FailedNodes": {name: reason},
  "FailedAndUnresolvableNodes": {name: reason}, "Error"}``.
- ``HostPriorityList``: ``[{"Host": name, "Score": 0..10}]``.
- ``ExtenderBindingArgs``: ``{"PodName", "PodNamespace", "PodUID", "Node"}``; result ``{"Error"}``.
- ``ExtenderPreemptionArgs``: ``{"Pod", "NodeNameToVictims": {node: {"Pods": [pod],
  "NumPDBViolations": n}} | null, "NodeNameToMetaVictims": {node: {"Pods": [{"UID": uid}],
  "NumPDBViolations": n}} | null}``; result ``{"NodeNameToMetaVictims": ...}``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: ``extenderv1.MaxExtenderPriority``: an extender scores nodes from 0 (``MinExtenderPriority``) to this
MAX_EXTENDER_PRIORITY = 10
#: the range of Go's ``int64``, the type of every number in the protocol
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class WireError(ValueError):
    """An answer kube-scheduler could not decode either."""


def _json_default(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, datetime.datetime):  # YAML timestamps, as the API server writes them
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value.isoformat(timespec="seconds") + "Z"
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def encode(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), default=_json_default).encode()


@dataclass(frozen=True, slots=True)
class Fraction:
    """A JSON number with a fraction or an exponent, as written: no field of the protocol takes one (Go
    refuses ``5.0`` and ``1e20`` for an ``int64``), and errors quote it as Go does."""

    text: str


def decode(body: bytes) -> Any:
    """The JSON document ``body``; ``WireError`` for anything that is not one. Numbers with a fraction or
    an exponent come back as ``Fraction``. Nesting is bounded by the interpreter's recursion limit (about
    1000 levels; Go's decoder allows 10000): deeper is an invalid answer, never a ``RecursionError``."""
    try:
        return json.loads(body, parse_float=Fraction)
    except RecursionError:
        raise WireError("invalid JSON: exceeded max depth") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise WireError(f"invalid JSON: {e}") from None


def field_of(document: Mapping[str, Any], name: str) -> Any:
    """``document[name]`` as Go's ``encoding/json`` finds a struct field: exact key, else any key equal
    ignoring case; None when absent."""
    if name in document:
        return document[name]
    folded = name.casefold()
    for key, value in document.items():
        if isinstance(key, str) and key.casefold() == folded:
            return value
    return None


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise WireError(f"json: cannot unmarshal {_json_type(value)} into Go value of type {what}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireError(f"json: cannot unmarshal {_json_type(value)} into Go value of type {what}")
    return value


def _string(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(
            f"json: cannot unmarshal {_json_type(value)} into Go struct field {what} of type string"
        )
    return value


def _int(value: Any, what: str) -> int:
    """An ``int64`` field: Go refuses a fraction or an exponent (``5.0``, ``1e3``), and out of range."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
        raise WireError(
            f"json: cannot unmarshal {_json_type(value)} into Go struct field {what} of type int64"
        )
    return int(value)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Fraction):
        return f"number {value.text}"
    if isinstance(value, (int, float)):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _reasons(value: Any, what: str) -> dict[str, str]:
    return {str(k): _string(v, what) for k, v in _object(value, "extenderv1.FailedNodesMap").items()}


# -- filter and prioritize -----------------------------------------------------------------------------
def extender_args(
    pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], names: Sequence[str], node_cache_capable: bool
) -> dict[str, Any]:
    """``ExtenderArgs`` for ``pod`` and the candidate nodes (objects and names, aligned)."""
    if node_cache_capable:
        return {"Pod": pod, "Nodes": None, "NodeNames": list(names)}
    return {"Pod": pod, "Nodes": {"metadata": {}, "items": list(nodes)}, "NodeNames": None}


@dataclass(slots=True)
class FilterResult:
    """A decoded ``ExtenderFilterResult``; ``node_names``/``nodes`` are None when the answer left them
    out (or null), which is not the same as an empty list."""

    node_names: list[str] | None = None
    #: the names of the returned Node objects
    nodes: list[str] | None = None
    failed: dict[str, str] = field(default_factory=dict)
    failed_and_unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


def decode_filter_result(document: Any) -> FilterResult:
    doc = _object(document, "extenderv1.ExtenderFilterResult")
    result = FilterResult(
        failed=_reasons(field_of(doc, "FailedNodes"), "ExtenderFilterResult.FailedNodes"),
        failed_and_unresolvable=_reasons(
            field_of(doc, "FailedAndUnresolvableNodes"), "ExtenderFilterResult.FailedAndUnresolvableNodes"
        ),
        error=_string(field_of(doc, "Error"), "ExtenderFilterResult.Error"),
    )
    names = field_of(doc, "NodeNames")
    if names is not None:
        result.node_names = [_string(n, "ExtenderFilterResult.NodeNames") for n in _list(names, "[]string")]
    node_list = field_of(doc, "Nodes")
    if node_list is not None:
        items = _list(field_of(_object(node_list, "v1.NodeList"), "items"), "[]v1.Node")
        result.nodes = []
        for item in items:
            meta = _object(field_of(_object(item, "v1.Node"), "metadata"), "v1.ObjectMeta")
            result.nodes.append(_string(field_of(meta, "name"), "ObjectMeta.name"))
    return result


def decode_host_priorities(document: Any) -> list[tuple[str, int]]:
    """A ``HostPriorityList`` as ``(host, score)`` pairs, in the extender's order (scores unchecked, as
    upstream: they are meant to lie in 0..10)."""
    out = []
    for entry in _list(document, "extenderv1.HostPriorityList"):
        item = _object(entry, "extenderv1.HostPriority")
        out.append(
            (
                _string(field_of(item, "Host"), "HostPriority.Host"),
                _int(field_of(item, "Score"), "HostPriority.Score"),
            )
        )
    return out


# -- bind ----------------------------------------------------------------------------------------------
def binding_args(name: str, namespace: str, uid: str, node: str) -> dict[str, Any]:
    return {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}


def decode_error_result(document: Any, what: str) -> str:
    """The ``Error`` of an ``ExtenderBindingResult`` (or any result with one)."""
    return _string(field_of(_object(document, f"extenderv1.{what}"), "Error"), f"{what}.Error")


# -- preempt -------------------------------------------------------------------------------------------
@dataclass(slots=True)
class MetaVictims:
    """``MetaVictims``: the victims of one node by UID, and how many PodDisruptionBudgets they violate."""

    uids: list[str]
    num_pdb_violations: int = 0


def preemption_args(
    pod: Mapping[str, Any],
    victims: Mapping[str, tuple[Sequence[Mapping[str, Any]], int]],
    node_cache_capable: bool,
) -> dict[str, Any]:
    """``ExtenderPreemptionArgs``; ``victims`` maps a node to (victim pod objects, PDB violations)."""
    if node_cache_capable:
        meta = {
            node: {
                "Pods": [{"UID": str((p.get("metadata") or {}).get("uid") or "")} for p in pods],
                "NumPDBViolations": violations,
            }
            for node, (pods, violations) in sorted(victims.items())
        }
        return {"Pod": pod, "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    full = {
        node: {"Pods": list(pods), "NumPDBViolations": violations}
        for node, (pods, violations) in sorted(victims.items())
    }
    return {"Pod": pod, "NodeNameToVictims": full, "NodeNameToMetaVictims": None}


def decode_preemption_result(document: Any) -> dict[str, MetaVictims | None]:
    """``ExtenderPreemptionResult.NodeNameToMetaVictims`` (a node mapped to null stays None)."""
    doc = _object(document, "extenderv1.ExtenderPreemptionResult")
    out: dict[str, MetaVictims | None] = {}
    for node, raw in _object(field_of(doc, "NodeNameToMetaVictims"), "map[string]*MetaVictims").items():
        if raw is None:
            out[str(node)] = None
            continue
        victims = _object(raw, "extenderv1.MetaVictims")
        uids = []
        for pod in _list(field_of(victims, "Pods"), "[]*extenderv1.MetaPod"):
            uids.append(
                "" if pod is None else _string(field_of(_object(pod, "MetaPod"), "UID"), "MetaPod.UID")
            )
        out[str(node)] = MetaVictims(
            uids, _int(field_of(victims, "NumPDBViolations"), "MetaVictims.NumPDBViolations")
        )
    return out
