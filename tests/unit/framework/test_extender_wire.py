"""The extender protocol's JSON, as kube-scheduler writes and reads it (``extender/v1/types.go``: Go field
names as keys, read back ignoring case, ``null`` as empty), within Go's bounds: integers as ``int64``, and
nesting refused with an error rather than a crash."""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

import pytest

from kopf_scheduler.framework.extenders import wire

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}, "spec": {"containers": []}}
NODES = [{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}]


def test_args_with_full_nodes() -> None:
    args = wire.extender_args(POD, NODES, ["n1", "n2"], node_cache_capable=False)
    assert json.loads(wire.encode(args)) == {
        "Pod": POD,
        "Nodes": {"metadata": {}, "items": NODES},
        "NodeNames": None,
    }
    assert list(args) == ["Pod", "Nodes", "NodeNames"]  # the Go struct's field order


def test_args_with_node_names_when_node_cache_capable() -> None:
    args = wire.extender_args(POD, NODES, ["n1", "n2"], node_cache_capable=True)
    assert json.loads(wire.encode(args)) == {"Pod": POD, "Nodes": None, "NodeNames": ["n1", "n2"]}


def test_encode_yaml_timestamps_as_the_api_server_writes_them() -> None:
    pod = {"metadata": {"creationTimestamp": datetime.datetime(2024, 5, 1, 12, 0, 0, tzinfo=datetime.UTC)}}
    assert json.loads(wire.encode(pod)) == {"metadata": {"creationTimestamp": "2024-05-01T12:00:00Z"}}


def test_filter_result_fields() -> None:
    result = wire.decode_filter_result(
        {
            "Nodes": {"items": [{"metadata": {"name": "n1"}}]},
            "NodeNames": ["n1"],
            "FailedNodes": {"n2": "no"},
            "FailedAndUnresolvableNodes": {"n3": "never"},
            "Error": "",
        }
    )
    assert result == wire.FilterResult(["n1"], ["n1"], {"n2": "no"}, {"n3": "never"}, "")


def test_filter_result_keys_match_ignoring_case() -> None:
    """Go's encoding/json matches ``nodenames`` or ``failedNodes`` to the untagged fields."""
    result = wire.decode_filter_result({"nodenames": ["a"], "failednodes": {"b": "x"}, "error": "boom"})
    assert (result.node_names, result.nodes, result.failed, result.error) == (["a"], None, {"b": "x"}, "boom")


def test_filter_result_nulls_are_absent() -> None:
    result = wire.decode_filter_result({"Nodes": None, "NodeNames": None, "FailedNodes": None})
    assert result == wire.FilterResult()
    assert wire.decode_filter_result(None) == wire.FilterResult()
    assert wire.decode_filter_result({"NodeNames": []}).node_names == []  # empty is not absent


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "json: cannot unmarshal array into Go value of type extenderv1.ExtenderFilterResult"),
        ({"NodeNames": "n1"}, "json: cannot unmarshal string into Go value of type []string"),
        (
            {"FailedNodes": {"n": 1}},
            "json: cannot unmarshal number 1 into Go struct field ExtenderFilterResult.FailedNodes "
            "of type string",
        ),
    ],
)
def test_filter_result_type_errors(document: Any, message: str) -> None:
    with pytest.raises(wire.WireError) as e:
        wire.decode_filter_result(document)
    assert str(e.value) == message


def test_host_priorities() -> None:
    assert wire.decode_host_priorities([{"Host": "n1", "Score": 7}, {"host": "n2", "score": 0}]) == [
        ("n1", 7),
        ("n2", 0),
    ]
    assert wire.decode_host_priorities(None) == []
    # scores are not checked against 0..10, as upstream
    assert wire.decode_host_priorities([{"Host": "n1", "Score": 42}]) == [("n1", 42)]


@pytest.mark.parametrize("score", [5.5, 5.0, "5", True])
def test_host_priority_score_must_be_an_integer(score: Any) -> None:
    with pytest.raises(wire.WireError):
        wire.decode_host_priorities([{"Host": "n1", "Score": score}])


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("1e20", "1e20"),
        ("100000000000000000000", "100000000000000000000"),
        ("9223372036854775808", "9223372036854775808"),
        ("-9223372036854775809", "-9223372036854775809"),
        ("5.0", "5.0"),
    ],
    ids=["exponent", "10**20", "int64-max+1", "int64-min-1", "fraction"],
)
def test_host_priority_score_is_a_go_int64(literal: str, shown: str) -> None:
    """Go's ``encoding/json`` refuses, in its words, what does not fit the ``int64`` field."""
    with pytest.raises(wire.WireError) as e:
        wire.decode_host_priorities(wire.decode(f'[{{"Host": "n1", "Score": {literal}}}]'.encode()))
    assert str(e.value) == (
        f"json: cannot unmarshal number {shown} into Go struct field HostPriority.Score of type int64"
    )


def test_host_priority_score_int64_limits_are_accepted() -> None:
    body = b'[{"Host": "a", "Score": 9223372036854775807}, {"Host": "b", "Score": -9223372036854775808}]'
    assert wire.decode_host_priorities(wire.decode(body)) == [("a", 2**63 - 1), ("b", -(2**63))]


def test_pdb_violations_are_a_go_int64() -> None:
    body = b'{"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 1e3}}}'
    with pytest.raises(wire.WireError) as e:
        wire.decode_preemption_result(wire.decode(body))
    assert str(e.value) == (
        "json: cannot unmarshal number 1e3 into Go struct field MetaVictims.NumPDBViolations of type int64"
    )


@pytest.mark.parametrize("shape", ["open", "objects", "balanced"])
def test_nesting_too_deep_is_an_invalid_answer_not_a_crash(shape: str) -> None:
    """Python's parser recurses (Go's decoder iterates and stops at 10000 levels): nesting it cannot
    parse, deeper than the interpreter's recursion limit (which a test runner may have raised), is an
    invalid answer like any other, never a ``RecursionError`` out of the cycle."""
    depth = 2 * sys.getrecursionlimit()
    body = {
        "open": b"[" * 200_000,
        "objects": b'{"a":' * 50_000,
        "balanced": b"[" * depth + b"]" * depth,
    }[shape]
    with pytest.raises(wire.WireError) as e:
        wire.decode(body)
    assert str(e.value) == "invalid JSON: exceeded max depth"


def test_binding() -> None:
    assert json.loads(wire.encode(wire.binding_args("p", "ns", "u1", "n1"))) == {
        "PodName": "p",
        "PodNamespace": "ns",
        "PodUID": "u1",
        "Node": "n1",
    }
    assert wire.decode_error_result({"Error": ""}, "ExtenderBindingResult") == ""
    assert wire.decode_error_result({"error": "no"}, "ExtenderBindingResult") == "no"
    assert wire.decode_error_result(None, "ExtenderBindingResult") == ""


VICTIM = {"metadata": {"name": "v", "namespace": "ns", "uid": "v1"}}


def test_preemption_args_with_full_victims() -> None:
    args = wire.preemption_args(POD, {"n2": ([VICTIM], 1), "n1": ([], 0)}, node_cache_capable=False)
    assert json.loads(wire.encode(args)) == {
        "Pod": POD,
        "NodeNameToVictims": {
            "n1": {"Pods": [], "NumPDBViolations": 0},
            "n2": {"Pods": [VICTIM], "NumPDBViolations": 1},
        },
        "NodeNameToMetaVictims": None,
    }


def test_preemption_args_with_meta_victims_when_node_cache_capable() -> None:
    args = wire.preemption_args(POD, {"n2": ([VICTIM], 1)}, node_cache_capable=True)
    assert json.loads(wire.encode(args)) == {
        "Pod": POD,
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}},
    }


def test_preemption_result() -> None:
    result = wire.decode_preemption_result(
        {
            "NodeNameToMetaVictims": {
                "n1": {"Pods": [{"UID": "a"}, {"uid": "b"}], "NumPDBViolations": 2},
                "n2": None,
            }
        }
    )
    assert result == {"n1": wire.MetaVictims(["a", "b"], 2), "n2": None}
    assert wire.decode_preemption_result({}) == {}
