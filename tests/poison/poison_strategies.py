"""Hypothesis strategies for the poison tier: objects of every kind the scheduler reads, valid and then
pushed just past what the API server accepts: extreme quantities, deep nesting, huge label maps and lists,
unknown fields, wrong types, missing required fields, unicode.

Valid objects come two ways: built with the shipped builders (a core the scheduler acts on: requests,
affinity, taints, claims), and drawn from the API server's own OpenAPI schema (``openapi_strategies``,
from the committed ``openapi/kube-apiserver.json``) laid over such a core, so every field the API server
stores for the kind can show up. ``poison(kind)`` draws one object of ``kind``: a valid one, or a valid one
with one to three mutations at random places. Sizes are bounded so that one example stays in
milliseconds."""

from __future__ import annotations

import copy
import json
import os
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from openapi_strategies import KIND_DEFINITIONS, configure, kind_objects, overlay

from kopf_scheduler.testing import make_node, make_pod

_COMMON: dict[str, Any] = {
    # huge label maps and deep nesting make big examples on purpose
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    # one example is milliseconds; five seconds is a stall
    "deadline": timedelta(seconds=5),
    "print_blob": True,
}
settings.register_profile("ci", max_examples=200, derandomize=True, database=None, **_COMMON)
settings.register_profile("fuzz", max_examples=3000, **_COMMON)

#: the settings every poison property runs under
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
POISON_SETTINGS = settings.get_profile(PROFILE)

#: the canary's name and labels: no strategy draws them, so no poison object selects the canary by intent
CANARY = "canary-pod"

VALID_QUANTITIES = ["0", "1", "100m", "250m", "2", "512Mi", "1Gi", "8Gi", "110", "1k", "1.5"]
EXTREME_QUANTITIES = [
    "1e30",
    "10Ei",
    "-1",
    "9223372036854775808m",
    "9223372036854775807",
    "0.000001",
    "1e-30",
    "1n",
    "999999999999999999999999999999Ki",
    "-0",
    "+1",
    ".5",
    "1e",
    "Gi",
    "",
    " 1",
    "1 Gi",
    "NaN",
    "Infinity",
    "0x10",
    "\uff11",  # a full-width digit one
    "1E3",
    "1e308",
]

quantities = st.one_of(st.sampled_from(VALID_QUANTITIES), st.sampled_from(EXTREME_QUANTITIES))

dns_names = st.from_regex(r"\A[a-z0-9]([a-z0-9-]{0,12}[a-z0-9])?\Z").filter(lambda s: s != CANARY)
label_values = st.from_regex(r"\A([A-Za-z0-9]([A-Za-z0-9_.-]{0,10}[A-Za-z0-9])?)?\Z")
unicode_text = st.text(min_size=0, max_size=40)

#: wrong types and odd scalars, for any field
odd_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    unicode_text,
    st.sampled_from(EXTREME_QUANTITIES),
)


def deep(depth: int, leaf: Any = "x") -> Any:
    """``depth`` levels of alternating maps and lists around ``leaf`` (built iteratively)."""
    value = leaf
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def huge_map(size: int) -> dict[str, str]:
    return {f"poison.example.com/k{i}": f"v{i}" for i in range(size)}


def huge_list(size: int, item: Any = "x") -> list[Any]:
    return [copy.deepcopy(item) if isinstance(item, (dict, list)) else item for _ in range(size)]


#: replacements for one field: a wrong type, an extreme value, deep nesting, a huge container
odd_values = st.one_of(
    odd_scalars,
    st.builds(deep, st.integers(min_value=1, max_value=200)),
    st.builds(huge_map, st.integers(min_value=100, max_value=2000)),
    st.builds(huge_list, st.integers(min_value=100, max_value=2000)),
    st.builds(
        lambda n: huge_list(n, {"name": "x", "key": "k", "operator": "Exists"}), st.integers(100, 1000)
    ),
    # fresh containers, never one shared value: a later mutation may add into what an earlier one put in
    st.builds(dict),
    st.builds(list),
    st.dictionaries(unicode_text, odd_scalars, max_size=4),
    st.lists(odd_scalars, max_size=4),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths into ``obj`` (dict keys and list indices), the empty path excluded; not into what an
    earlier mutation made (deeper than 12 levels, or more than 50 entries)."""
    out: list[tuple[Any, ...]] = []
    if len(prefix) >= 12 or (isinstance(obj, (dict, list)) and len(obj) > 50):
        return out
    if isinstance(obj, dict):
        items: Any = obj.items()
    elif isinstance(obj, list):
        items = enumerate(obj)
    else:
        return out
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        obj = obj[key]
    return obj


def _same_type(value: Any) -> st.SearchStrategy[Any]:
    """A replacement of the same JSON type as ``value``, pushed to an extreme: the shape the API server's
    schema still accepts."""
    if isinstance(value, bool) or value is None:
        return st.just(value) if value is None else st.booleans()
    if isinstance(value, int):
        return st.sampled_from([0, -1, 2**31, 2**63 - 1, 2**63, -(2**63), 10**30])
    if isinstance(value, float):
        return st.floats()
    if isinstance(value, str):
        return st.one_of(
            st.sampled_from(EXTREME_QUANTITIES),
            unicode_text,
            st.builds(lambda n: "x" * n, st.integers(min_value=254, max_value=100_000)),
        )
    if isinstance(value, dict):
        return st.one_of(
            st.builds(dict),
            st.builds(lambda n: {**value, **huge_map(n)}, st.integers(min_value=100, max_value=2000)),
            st.builds(lambda k, v: {**value, k: v}, unicode_text, unicode_text),
        )
    if isinstance(value, list):
        return st.one_of(
            st.builds(list),
            st.builds(
                lambda n: [copy.deepcopy(value[0]) for _ in range(n)] if value else [], st.integers(100, 1000)
            ),
        )
    return st.just(value)


@st.composite
def mutated(
    draw: st.DrawFn, base: st.SearchStrategy[dict[str, Any]], keep: tuple[str, ...], wrong_types: bool
) -> dict[str, Any]:
    """``base`` with one to three mutations. Typed (``wrong_types`` false): a field's value pushed to an
    extreme of its own type (huge, negative, unicode, past int64) or an unknown field added, what the API
    server's schema lets through. Wrong types: a field replaced by a value of any type (deep nesting
    included) or removed. Paths starting with ``keep`` (``kind``, ``apiVersion``) stay as they are, so the
    object still reaches the code for its kind."""
    obj = copy.deepcopy(draw(base))  # the drawn value is shown as drawn when an example fails
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = [p for p in _paths(obj) if p[0] not in keep]
        actions = ["replace", "remove", "add"] if wrong_types else ["replace", "add"]
        action = draw(st.sampled_from(actions if paths else ["add"]))
        if action == "add":
            containers = [()] + [p for p in paths if isinstance(_parent(obj, (*p, None)), dict)]
            where = draw(st.sampled_from(containers))
            target = _parent(obj, (*where, None))
            key = draw(st.sampled_from(["x-unknown", "ünknown", ""]))
            target[key] = draw(odd_values if wrong_types else unicode_text)
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(obj, path)
        if action == "remove":
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(odd_values if wrong_types else _same_type(parent[path[-1]]))
    return obj


def _labels(max_size: int = 4) -> st.SearchStrategy[dict[str, str]]:
    keys = st.one_of(
        st.sampled_from(["app", "tier", "topology.kubernetes.io/zone", "example.com/x"]),
        dns_names,
    )
    return st.dictionaries(keys, label_values, max_size=max_size)


def _meta(namespaced: bool) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda name, labels: {
            "name": name,
            **({"namespace": "default"} if namespaced else {}),
            **({"labels": labels} if labels else {}),
        },
        dns_names,
        _labels(),
    )


@st.composite
def valid_pods(draw: st.DrawFn) -> dict[str, Any]:
    builder = make_pod().name(draw(dns_names)).req(cpu=draw(quantities), memory=draw(quantities))
    for key, value in draw(_labels()).items():
        builder.label(key, value)
    if draw(st.booleans()):
        builder.node(draw(st.sampled_from(["n1", "n2", "n3", "gone"])))
    if draw(st.booleans()):
        builder.priority(draw(st.integers(min_value=-(2**31), max_value=2**31 - 1)))
    if draw(st.booleans()):
        builder.toleration(key=draw(dns_names), operator="Exists")
    if draw(st.booleans()):
        builder.limits(cpu=draw(quantities))
    if draw(st.booleans()):
        builder.init_container(cpu=draw(quantities))
    if draw(st.booleans()):
        builder.host_port(draw(st.integers(min_value=-1, max_value=70000)))
    if draw(st.booleans()):
        builder.node_selector(**{draw(dns_names): draw(label_values)})
    if draw(st.booleans()):
        term = {"labelSelector": {"matchLabels": {"poison": "x"}}, "topologyKey": "kubernetes.io/hostname"}
        builder.affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    if draw(st.booleans()):
        builder.spread(
            {
                "maxSkew": draw(st.integers(min_value=-1, max_value=2**31)),
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway", "Sometimes"])),
                "labelSelector": {"matchLabels": {"poison": "x"}},
            }
        )
    return builder.obj()


@st.composite
def valid_nodes(draw: st.DrawFn) -> dict[str, Any]:
    builder = (
        make_node()
        .name(draw(dns_names))
        .capacity(cpu=draw(quantities), memory=draw(quantities), pods=draw(quantities))
    )
    for key, value in draw(_labels()).items():
        builder.label(key, value)
    if draw(st.booleans()):
        builder.allocatable({draw(st.sampled_from(["cpu", "memory", "example.com/gpu"])): draw(quantities)})
    if draw(st.booleans()):
        builder.taint(
            draw(dns_names), effect=draw(st.sampled_from(["NoSchedule", "PreferNoSchedule", "Bogus"]))
        )
    if draw(st.booleans()):
        builder.images({draw(dns_names): draw(st.integers(min_value=-1, max_value=2**64))})
    if draw(st.booleans()):
        builder.unschedulable()
    return builder.obj()


def _access_modes() -> st.SearchStrategy[list[str]]:
    return st.lists(
        st.sampled_from(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod", "Sideways"]),
        min_size=1,
        max_size=3,
    )


valid_pvcs = st.builds(
    lambda meta, modes, q, sc, vol: {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {
            "accessModes": modes,
            "resources": {"requests": {"storage": q}},
            **({"storageClassName": sc} if sc else {}),
            **({"volumeName": vol} if vol else {}),
        },
    },
    _meta(True),
    _access_modes(),
    quantities,
    st.one_of(st.none(), dns_names),
    st.one_of(st.none(), dns_names),
)

valid_pvs = st.builds(
    lambda meta, modes, q, node, phase: {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": meta,
        "spec": {
            "capacity": {"storage": q},
            "accessModes": modes,
            "csi": {"driver": "csi.example.com", "volumeHandle": meta["name"]},
            **(
                {
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                                    ]
                                }
                            ]
                        }
                    }
                }
                if node
                else {}
            ),
        },
        "status": {"phase": phase},
    },
    _meta(False),
    _access_modes(),
    quantities,
    st.one_of(st.none(), st.sampled_from(["n1", "n2", "gone"])),
    st.sampled_from(["Available", "Bound", "Released", "Pending", "Nonsense"]),
)

valid_services = st.builds(
    lambda meta, selector, port: {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"selector": selector, "ports": [{"port": port, "protocol": "TCP"}]},
    },
    _meta(True),
    _labels(),
    st.integers(min_value=-1, max_value=70000),
)


@st.composite
def valid_resource_claims(draw: st.DrawFn) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": draw(dns_names)}
    mode = draw(st.sampled_from([None, "ExactCount", "All", "Some"]))
    if mode:
        request["allocationMode"] = mode
    if draw(st.booleans()):
        request["count"] = draw(st.integers(min_value=-1, max_value=2**40))
    if draw(st.booleans()):
        request["selectors"] = [{"cel": {"expression": draw(st.sampled_from(CEL))}}]
    claim: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": draw(_meta(True)),
        "spec": {"devices": {"requests": [{"name": draw(dns_names), "exactly": request}]}},
    }
    if draw(st.booleans()):
        claim["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "gpu.example.com",
                            "pool": draw(st.sampled_from(["n1", "n2", "gone"])),
                            "device": "gpu-0",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": draw(dns_names), "uid": draw(dns_names)}],
        }
    return claim


CEL = [
    'device.driver == "gpu.example.com"',
    "true",
    "1 / 0 == 1",
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("10Ei")) >= 0',
    "[1, 2, 3].all(x, [1, 2, 3].all(y, [1, 2, 3].all(z, x + y + z > 0)))",
    "(",
    '"a" * 100',
    "device.attributes",
]


@st.composite
def valid_resource_slices(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=0, max_value=64))
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": draw(label_values)}, "index": {"int": i}},
            "capacity": {"memory": {"value": draw(quantities)}},
        }
        for i in range(count)
    ]
    node = draw(st.sampled_from(["n1", "n2", "n3", "gone"]))
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": draw(_meta(False)),
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": node,
            "pool": {
                "name": node,
                "generation": draw(st.integers(min_value=0, max_value=2**63 - 1)),
                "resourceSliceCount": draw(st.integers(min_value=1, max_value=2**31 - 1)),
            },
            "devices": devices,
        },
    }


PLUGINS = [
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
    "TaintToleration",
    "NodeAffinity",
    "PodTopologySpread",
    "InterPodAffinity",
    "DefaultBinder",
    "PrioritySort",
    "NoSuchPlugin",
    "*",
]
POINTS = [
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "bind",
    "queueSort",
    "multiPoint",
]


@st.composite
def valid_profiles(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": "poison-" + draw(dns_names)}
    if draw(st.booleans()):
        spec["plugins"] = {
            draw(st.sampled_from(POINTS)): {
                "enabled": [
                    {"name": draw(st.sampled_from(PLUGINS)), "weight": draw(st.integers(-1, 2**40))}
                    for _ in range(draw(st.integers(0, 3)))
                ],
                "disabled": [
                    {"name": draw(st.sampled_from(PLUGINS))} for _ in range(draw(st.integers(0, 2)))
                ],
            }
        }
    if draw(st.booleans()):
        spec["pluginConfig"] = [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": draw(
                            st.sampled_from(["MostAllocated", "LeastAllocated", "RequestedToCapacityRatio"])
                        ),
                        "resources": [
                            {
                                "name": draw(st.sampled_from(["cpu", "memory", "x"])),
                                "weight": draw(st.integers(-1, 2**40)),
                            }
                        ],
                    }
                },
            }
        ]
    if draw(st.booleans()):
        spec["percentageOfNodesToScore"] = draw(st.integers(-1, 1000))
    return {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": draw(dns_names)},
        "spec": spec,
    }


#: kind -> strategy of valid objects of that kind
VALID: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "Pod": valid_pods(),
    "Node": valid_nodes(),
    "PersistentVolumeClaim": valid_pvcs,
    "PersistentVolume": valid_pvs,
    "Service": valid_services,
    "ResourceClaim": valid_resource_claims(),
    "ResourceSlice": valid_resource_slices(),
    "SchedulingProfile": valid_profiles(),
}
#: kinds drawn from the schema only, over a core of a name (and namespace): kind -> namespaced
SCHEMA_ONLY = {
    "StorageClass": False,
    "CSINode": False,
    "CSIDriver": False,
    "DeviceClass": False,
    "PodDisruptionBudget": True,
}
VALID.update({kind: st.builds(lambda m: {"metadata": m}, _meta(ns)) for kind, ns in SCHEMA_ONLY.items()})
KINDS = sorted(VALID)

#: plain strings of a schema-drawn object: names, label values, unicode, quantities
configure(quantities, st.one_of(dns_names, label_values, unicode_text, st.sampled_from(EXTREME_QUANTITIES)))


def from_schema(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A ``kind`` drawn from the API server's OpenAPI schema, laid over a builder-made core (the core's
    values win where both have one, so the object still asks the scheduler something)."""
    return st.builds(overlay, VALID[kind], kind_objects(kind))


def valid(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A valid ``kind``: builder-made, or drawn from the schema over a builder-made core."""
    if kind in SCHEMA_ONLY:
        return from_schema(kind)
    if kind in KIND_DEFINITIONS:
        return st.one_of(VALID[kind], from_schema(kind))
    return VALID[kind]


def poison(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A valid ``kind``, or one pushed to extremes within the types its schema gives (what the API server
    would store)."""
    base = valid(kind)
    return st.one_of(base, mutated(base, ("kind", "apiVersion"), wrong_types=False))


def wrong_typed(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """A ``kind`` with fields of the wrong type, deep nesting or required fields missing (what only a file
    given to ``simulate`` can hold)."""
    base = valid(kind)
    return st.one_of(
        mutated(base, ("kind", "apiVersion"), wrong_types=True),
        mutated(base, ("kind", "apiVersion", "metadata"), wrong_types=True),
    )


# -- extender answers -------------------------------------------------------------------------------------
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    unicode_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(unicode_text, inner, max_size=5)),
    max_leaves=30,
)
_answer_keys = [
    "NodeNames",
    "Nodes",
    "FailedNodes",
    "FailedAndUnresolvableNodes",
    "Error",
    "Host",
    "Score",
    "NodeNameToMetaVictims",
    "Pods",
    "UID",
    "NumPDBViolations",
    "items",
    "metadata",
    "name",
    "nodenames",
]
#: objects shaped like extender answers, with fields of any type at any depth
shaped_answers = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(_answer_keys), inner, max_size=6)
    ),
    max_leaves=40,
)


def _bodies(value: Any) -> bytes:
    return json.dumps(value).encode()


#: raw answer bodies: JSON of shaped answers, deep nesting, and bytes that are not JSON
answer_bodies: st.SearchStrategy[bytes] = st.one_of(
    st.builds(_bodies, shaped_answers),
    st.builds(_bodies, json_values),
    st.builds(lambda n: ("[" * n + "]" * n).encode(), st.integers(min_value=1, max_value=20000)),
    st.builds(lambda n: ('{"a":' * n + "1" + "}" * n).encode(), st.integers(min_value=1, max_value=5000)),
    st.sampled_from(
        [b"", b"1e999999", b"-1e999999", b"NaN", b"Infinity", b'"\\ud800"', b"\xff\xfe", b"{", b"nul"]
    ),
    st.builds(lambda d: f'{{"Score": {d}}}'.encode(), st.sampled_from(["1e400", "1.5", "9" * 5000, "-0"])),
    st.binary(max_size=64),
)
