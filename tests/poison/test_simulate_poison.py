"""No object stops ``simulate``: a small cluster (three nodes, a canary pod) plus one poison object of each
kind the scheduler reads goes through the loader and the real scheduling loop, in process. The outcome is a
result in which the canary is bound, or a ``UsageError`` of one line that names the poison object; never
another exception, never a stall (the profile's deadline). Profiles go through ``parse_profile`` the same
way, served beside the default profile the canary uses."""

from __future__ import annotations

import asyncio
import copy
import re
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from poison_strategies import CANARY, KINDS, POISON_SETTINGS, PROFILE, poison, wrong_typed

from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.api.quantity import QuantityError, int64_milli_value_of, int64_value_of, is_negative
from kopf_scheduler.simulate.loader import load_objects
from kopf_scheduler.simulate.run import simulate
from kopf_scheduler.testing import make_node, make_pod

POISON_WHERE = "poison.yaml"


def _cluster() -> list[tuple[str, dict[str, Any]]]:
    nodes = [make_node().name(n).capacity(cpu="4", memory="8Gi", pods="20").obj() for n in ("n1", "n2", "n3")]
    canary = make_pod().name(CANARY).label("canary", "yes").req(cpu="100m", memory="64Mi").obj()
    return [("cluster.yaml", obj) for obj in (*nodes, canary)]


def _canary_bound(objects: list[tuple[str, dict[str, Any]]], profiles: list[tuple[str, Any]]) -> None:
    """Loads and simulates ``objects``; a ``UsageError`` must be one line naming the poison."""
    try:
        cluster = load_objects(objects)
        result = asyncio.run(simulate(cluster, profiles, seed=1))
    except UsageError as e:
        message = str(e)
        assert "\n" not in message, message
        assert POISON_WHERE in message, message
        return
    canary = next(p for p in result.pods if p["metadata"]["name"] == CANARY)
    outcome = result.outcomes[canary["metadata"]["uid"]]
    score = re.search(r"returns an invalid score (-?\d+),", str(outcome.message))
    if outcome.node is None and score is not None and int(score[1]) > 100 and _wraps_as_upstream(objects):
        # kube-scheduler reads such a quantity as a negative int64 (MilliValue of 10Ei is -1000), so a
        # node's requested CPU goes below zero and NodeResourcesFit's score above 100: it fails every pod
        # with this error too. Matching it is the requirement; the loop still answers with one line.
        assert outcome.reason == "SchedulerError", (outcome.reason, outcome.message)
        return
    assert outcome.node is not None, (outcome.reason, outcome.message)


def _wraps_as_upstream(objects: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether a poison object has a resource quantity that is not negative as written but that
    upstream's ``Value``/``MilliValue`` wrap to a negative int64."""
    found: list[Any] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("requests", "limits", "allocatable", "capacity") and isinstance(v, dict):
                    found.extend(v.values())
                walk(v, k)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for where, obj in objects:
        if where == POISON_WHERE:
            walk(obj)
    for value in found:
        try:
            if not is_negative(value) and min(int64_value_of(value), int64_milli_value_of(value)) < 0:
                return True
        except (QuantityError, TypeError, ValueError):
            continue
    return False


CLUSTER_KINDS = [k for k in KINDS if k != "SchedulingProfile"]
#: kinds whose wrong-typed objects still end in a traceback under the ci profile (see REGRESSIONS): none
WRONG_TYPES_FAIL: set[str] = set()
CI = PROFILE == "ci"


def _wrong_types_mark(kind: str) -> Any:
    """Strict under ci (derandomized: the same objects each run, so a fix shows as XPASS); under fuzz any
    kind may find one, so none is strict."""
    if kind in WRONG_TYPES_FAIL or not CI:
        return pytest.mark.xfail(strict=CI, reason="wrong-typed fields end in a traceback (see REGRESSIONS)")
    return ()


#: under ci a kind known to fail is not shrunk (its minimal cases are pinned in REGRESSIONS): shrinking
#: huge objects takes minutes
WRONG_TYPES_SETTINGS = (
    settings(POISON_SETTINGS, phases=[Phase.explicit, Phase.generate]) if CI else POISON_SETTINGS
)


def _check_object(obj: dict[str, Any]) -> None:
    _canary_bound([*_cluster(), (POISON_WHERE, copy.deepcopy(obj))], [])


def _check_profile(obj: dict[str, Any]) -> None:
    try:
        spec = parse_profile(copy.deepcopy(obj))
    except ProfileError as e:
        assert "\n" not in str(e), str(e)
        return
    default = ("default.yaml", parse_profile({"schedulerName": "default-scheduler"}))
    _canary_bound(_cluster(), [default, (POISON_WHERE, spec)])


def _check(kind: str, obj: dict[str, Any]) -> None:
    (_check_profile if kind == "SchedulingProfile" else _check_object)(obj)


@pytest.mark.parametrize("kind", KINDS)
def test_object_at_the_extremes_of_its_schema_leaves_the_canary_bound(kind: str) -> None:
    """Values the API server stores (quantities past int64, unicode, huge maps and lists, unknown fields)."""

    @POISON_SETTINGS
    @given(obj=poison(kind))
    def check(obj: dict[str, Any]) -> None:
        _check(kind, obj)

    check()


@pytest.mark.parametrize("kind", [pytest.param(k, marks=_wrong_types_mark(k)) for k in KINDS])
def test_wrong_typed_object_is_refused_in_one_line_or_leaves_the_canary_bound(kind: str) -> None:
    """What only a file can hold: a field of the wrong type, deep nesting, a required field missing."""

    @WRONG_TYPES_SETTINGS
    @given(obj=wrong_typed(kind))
    def check(obj: dict[str, Any]) -> None:
        _check(kind, obj)

    check()


def _node(**status: Any) -> dict[str, Any]:
    node = make_node().name("poison").obj()
    node["status"].update(status)
    return node


def _pod(**spec: Any) -> dict[str, Any]:
    pod = make_pod().name("poison").obj()
    pod["spec"].update(spec)
    return pod


def _pv(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "poison"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **spec},
    }


def _terms(*terms: Any) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": list(terms)}}


def _xfail(reason: str) -> Any:
    return pytest.mark.xfail(strict=True, reason=reason)


NOT_FIXED = "not fixed yet: a wrong type ends in a traceback, not a one-line error"

#: the poison found so far, minimal; a case whose mark turns XPASS is fixed: drop its mark, keep the case
REGRESSIONS = [
    pytest.param("Node", _node(allocatable="1n"), id="node-allocatable-string"),
    pytest.param("Node", _node(allocatable={"memory": ["x"]}), id="node-quantity-list"),
    pytest.param("Node", _node(images=["x"]), id="node-images-strings"),
    pytest.param("Node", _node(images=[{"names": [["x"]]}]), id="node-image-name-list"),
    pytest.param("Node", {**_node(), "spec": {"taints": 3}}, id="node-taints-int"),
    pytest.param("Node", {**_node(), "status": ["x"]}, id="node-status-list"),
    pytest.param(
        "Node",
        make_node()
        .name("poison")
        .capacity(cpu="100m", memory="999999999999999999999999999999Ki", pods="100m")
        .obj(),
        id="node-memory-past-int64",
    ),
    pytest.param(
        "Pod",
        make_pod().name("poison").node("n1").req(cpu="9223372036854775807").obj(),
        id="bound-pod-cpu-int64-max",  # MilliValue wraps negative upstream too: the same error
    ),
    pytest.param("Pod", _pod(containers=[None]), id="pod-container-null"),
    pytest.param(
        "Pod",
        _pod(containers=[{"name": "c", "resources": {"requests": {"memory": ["x"]}}}]),
        id="pod-quantity-list",
    ),
    pytest.param("Pod", _pod(initContainers="x"), id="pod-init-containers-string"),
    pytest.param(
        "Pod",
        _pod(containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80, "protocol": ["x"]}]}]),
        id="pod-host-port-protocol-list",
    ),
    pytest.param(
        "Pod",
        _pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "1", "\n": ":"}}}]),
        id="pod-resource-name-newline",  # named in one line: requests['\n']
    ),
    pytest.param(
        "Pod",
        _pod(nodeName="n1", affinity={"podAntiAffinity": 1.5}),
        id="bound-pod-affinity-float",
    ),
    pytest.param(
        "Pod",
        {**make_pod().name("poison").obj(), "metadata": {"name": "poison", "labels": 1}},
        id="pod-labels-int",
    ),
    pytest.param(
        "Pod",
        {**make_pod().name("poison").obj(), "metadata": {"name": "poison", "uid": {"a": "b"}}},
        id="pod-uid-object",
    ),
    pytest.param(
        "Pod",
        _pod(
            nodeName="n2",
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": 19284}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
        ),
        id="bound-pod-anti-affinity-match-labels-int",
    ),
    pytest.param(
        "Pod",
        {**make_pod().name("poison").node("n1").obj(), "status": ["x"]},
        id="bound-pod-status-list",
    ),
    pytest.param("PersistentVolume", _pv(capacity={"storage": []}), id="pv-storage-list"),
    pytest.param("PersistentVolume", _pv(nodeAffinity=_terms("x")), id="pv-term-string"),
    pytest.param(
        "PersistentVolume",
        _pv(nodeAffinity=_terms({"matchExpressions": [None]})),
        id="pv-expression-null",
    ),
    pytest.param(
        "PersistentVolumeClaim",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "poison"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": []}}},
        },
        id="pvc-storage-list",
    ),
    pytest.param(
        "ResourceClaim",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "poison"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"nodeSelector": {"nodeSelectorTerms": [[]]}}},
        },
        id="claim-allocation-term-list",
    ),
    pytest.param(
        "ResourceSlice",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "poison"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 0, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0", "capacity": {"\n": 1}}],
            },
        },
        id="slice-capacity-name-newline",  # named in one line: capacity['\n']
    ),
    pytest.param(
        "PodDisruptionBudget",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "poison", "namespace": "default"},
            "spec": {"maxUnavailable": ""},
        },
        id="pdb-max-unavailable-empty",  # refused in one line that names the file
    ),
    pytest.param(
        "SchedulingProfile",
        {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": "x",
            "spec": {},
        },
        id="profile-metadata-string",
    ),
]


@pytest.mark.parametrize(("kind", "obj"), REGRESSIONS)
def test_regression(kind: str, obj: dict[str, Any]) -> None:
    _check(kind, obj)
