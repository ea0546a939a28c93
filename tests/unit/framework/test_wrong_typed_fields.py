"""A field of the wrong JSON type is refused where the raw object is read (``NodeInfo``, ``PodInfo``, the
object stores' parsers) with the parse error of that reader and a one-line message naming the field path,
never a ``TypeError`` or ``AttributeError`` from deeper in. The API server stores no such object; a file
given to ``simulate`` may hold one (the poison tier draws them at random; these are its pinned finds)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from kopf_scheduler.framework.node_info import NodeInfo, NodeParseError
from kopf_scheduler.framework.objects import ObjectParseError
from kopf_scheduler.framework.objects.dra import parse_resource_claim
from kopf_scheduler.framework.objects.resource_slices import parse_resource_slice
from kopf_scheduler.framework.objects.storage import parse_persistent_volume, parse_persistent_volume_claim
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.testing import make_node, make_pod


def _node(status: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    node = make_node().name("n").capacity(cpu="4", memory="8Gi", pods="110").obj()
    node["status"].update(status or {})
    node.update(top)
    return node


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({**_node(), "status": ["x"]}, "status: must be an object, not a list"),
        (_node(spec=1), "spec: must be an object, not a number"),
        (_node({"allocatable": "1n"}), "status.allocatable: must be an object, not a string"),
        (_node({"allocatable": {}, "capacity": ["4"]}), "status.capacity: must be an object, not a list"),
        (
            _node({"allocatable": {"memory": ["x"]}}),
            "status.allocatable.memory: must be a quantity (a string or a number), not a list",
        ),
        (
            _node({"allocatable": {"cpu": {"a": 1}}}),
            "status.allocatable.cpu: must be a quantity (a string or a number), not an object",
        ),
        (_node({"images": ["x"]}), "status.images: must be a list of objects"),
        (_node({"images": {"names": ["x"]}}), "status.images: must be a list of objects"),
        (_node({"images": [{"names": [["x"]]}]}), "status.images[0].names: must be a list of strings"),
        (_node({"images": [{"names": "x"}]}), "status.images[0].names: must be a list of strings"),
        (
            _node({"images": [{"names": ["x"], "sizeBytes": "big"}]}),
            "status.images[0].sizeBytes: must be an integer, not a string",
        ),
        (
            _node({"images": [{"names": ["x"], "sizeBytes": float("inf")}]}),
            "status.images[0].sizeBytes: must be an integer, not a number",
        ),
        (_node(spec={"taints": 3}), "spec.taints: must be a list of objects"),
        (_node(spec={"taints": ["x"]}), "spec.taints: must be a list of objects"),
        (_node(metadata={"name": "n", "labels": 1}), "metadata.labels: must be a map of strings"),
        (_node(metadata={"name": "n", "labels": {"a": 1}}), "metadata.labels: must be a map of strings"),
    ],
    ids=[
        "status-list",
        "spec-number",
        "allocatable-string",
        "capacity-list",
        "quantity-list",
        "quantity-object",
        "images-strings",
        "images-object",
        "image-name-list",
        "image-names-string",
        "image-size-string",
        "image-size-infinite",
        "taints-number",
        "taints-strings",
        "labels-number",
        "label-value-number",
    ],
)
def test_node_of_the_wrong_types_is_refused_naming_the_field(node: dict[str, Any], message: str) -> None:
    with pytest.raises(NodeParseError, match=rf"^{re.escape(message)}$"):
        NodeInfo(node)


def test_node_refused_on_update_keeps_what_it_read_before() -> None:
    info = NodeInfo(_node())
    before = (info.node, info.labels, info.taints, info.allocatable, info.generation)
    with pytest.raises(NodeParseError):
        info.set_node(_node(spec={"taints": 3}, metadata={"name": "n", "labels": {"a": "b"}}))
    assert (info.node, info.labels, info.taints, info.allocatable, info.generation) == before


def test_node_of_the_right_types_reads_as_before() -> None:
    node = _node({"images": [{"names": ["busybox", "r/x:1"], "sizeBytes": 5}]})
    node["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    info = NodeInfo(node)
    assert info.image_sizes == {"busybox:latest": 5, "r/x:1": 5}
    assert [str(t) for t in info.taints] == ["k=:NoSchedule"]
    assert info.allocatable == {"cpu": 4000, "memory": 8 * 1024**3} and info.allowed_pod_number == 110


def _pod(**spec: Any) -> dict[str, Any]:
    pod = make_pod().name("p").req(cpu="100m").obj()
    pod["spec"].update(spec)
    return pod


def _with(pod: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**copy.deepcopy(pod), **top}


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (_pod(containers=[None]), "spec.containers[0]: must be an object, not null"),
        (_pod(containers="x"), "spec.containers: must be a list, not a string"),
        (_pod(initContainers="x"), "spec.initContainers: must be a list, not a string"),
        (
            _pod(containers=[{"name": "c", "resources": {"requests": {"memory": ["x"]}}}]),
            "spec.containers[0].resources.requests.memory: "
            "must be a quantity (a string or a number), not a list",
        ),
        (
            _pod(containers=[{"name": "c", "ports": [{"hostPort": 80, "protocol": ["x"]}]}]),
            "spec.containers[0].ports[0].protocol: must be a string, not a list",
        ),
        (
            _pod(containers=[{"name": "c", "ports": [{"hostPort": [80]}]}]),
            "spec.containers[0].ports[0].hostPort: must be an integer, not a list",
        ),
        (
            _pod(containers=[{"name": "c", "ports": 1}]),
            "spec.containers[0].ports: must be a list, not a number",
        ),
        (
            _pod(containers=[{"name": "c", "resources": {"requests": {"\n": ":"}}}]),
            "spec.containers[0].resources.requests['\\n']: invalid quantity ':'",
        ),
        (
            _pod(affinity={"podAntiAffinity": 1.5}),
            "spec.affinity.podAntiAffinity: must be an object, not a number",
        ),
        (_pod(affinity=[]), "spec.affinity: must be an object, not a list"),
        (_pod(tolerations=3), "spec.tolerations: must be a list, not a number"),
        (_pod(tolerations=["x"]), "spec.tolerations[0]: must be an object, not a string"),
        (_pod(schedulingGates={"name": "g"}), "spec.schedulingGates: must be a list, not an object"),
        (
            _pod(topologySpreadConstraints=[1]),
            "spec.topologySpreadConstraints[0]: must be an object, not a number",
        ),
        (_pod(nodeName=["n1"]), "spec.nodeName: must be a string, not a list"),
        (_pod(schedulerName=1), "spec.schedulerName: must be a string, not a number"),
        (
            _with(_pod(), metadata={"name": "p", "labels": 1}),
            "metadata.labels: must be a map of strings, not a number",
        ),
        (
            _with(_pod(), metadata={"name": "p", "labels": {"a": None}}),
            "metadata.labels.a: must be a string, not null",
        ),
        (
            _with(_pod(), metadata={"name": "p", "annotations": ["a"]}),
            "metadata.annotations: must be a map of strings, not a list",
        ),
        (
            _with(_pod(), metadata={"name": "p", "uid": {"a": "b"}}),
            "metadata.uid: must be a string, not an object",
        ),
        (_with(_pod(nodeName="n1"), status=["x"]), "status: must be an object, not a list"),
        (_with(_pod(), spec="x"), "spec: must be an object, not a string"),
    ],
    ids=[
        "container-null",
        "containers-string",
        "init-containers-string",
        "quantity-list",
        "host-port-protocol-list",
        "host-port-list",
        "ports-number",
        "resource-name-newline",
        "anti-affinity-number",
        "affinity-list",
        "tolerations-number",
        "toleration-string",
        "scheduling-gates-object",
        "spread-constraint-number",
        "node-name-list",
        "scheduler-name-number",
        "labels-number",
        "label-null",
        "annotations-list",
        "uid-object",
        "status-list",
        "spec-string",
    ],
)
def test_pod_of_the_wrong_types_is_refused_naming_the_field(pod: dict[str, Any], message: str) -> None:
    with pytest.raises(PodParseError, match=rf"^{re.escape(message)}$"):
        PodInfo(pod)


def _pv(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "v"}, "spec": {"capacity": {"storage": "1Gi"}, **spec}}


def _terms(*terms: Any) -> dict[str, Any]:
    return {"required": {"nodeSelectorTerms": list(terms)}}


def _claim(node_selector: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"nodeSelector": node_selector}},
    }


@pytest.mark.parametrize(
    ("parse", "raw", "message"),
    [
        (
            parse_persistent_volume,
            _pv(capacity={"storage": []}),
            "spec.capacity.storage: must be a quantity (a string or a number), not a list",
        ),
        (
            parse_persistent_volume,
            _pv(nodeAffinity=_terms("x")),
            "spec.nodeAffinity.required.nodeSelectorTerms[0]: must be an object, not a string",
        ),
        (
            parse_persistent_volume,
            _pv(nodeAffinity=_terms({"matchExpressions": [None]})),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]: "
            "must be an object, not null",
        ),
        (
            parse_persistent_volume,
            _pv(nodeAffinity=_terms({"matchFields": "x"})),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields: must be a list, not a string",
        ),
        (
            parse_persistent_volume,
            _pv(nodeAffinity=_terms({"matchExpressions": [{"key": "k", "operator": "In", "values": "a"}]})),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values: "
            "must be a list, not a string",
        ),
        (
            parse_persistent_volume,
            _pv(nodeAffinity={"required": {"nodeSelectorTerms": {}}}),
            "spec.nodeAffinity.required.nodeSelectorTerms: must be a list, not an object",
        ),
        (
            parse_persistent_volume_claim,
            {"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": {"a": 1}}}}},
            "spec.resources.requests.storage: must be a quantity (a string or a number), not an object",
        ),
        (
            parse_resource_claim,
            _claim({"nodeSelectorTerms": [[]]}),
            "status.allocation.nodeSelector.nodeSelectorTerms[0]: must be an object, not a list",
        ),
        (
            parse_resource_slice,
            {
                "metadata": {"name": "s"},
                "spec": {"driver": "d", "pool": {"name": "p"}, "nodeSelector": {"nodeSelectorTerms": [1]}},
            },
            "spec.nodeSelector.nodeSelectorTerms[0]: must be an object, not a number",
        ),
        (
            parse_resource_slice,
            {
                "metadata": {"name": "s"},
                "spec": {
                    "driver": "d",
                    "pool": {"name": "p"},
                    "devices": [{"name": "g", "capacity": {"\n": 1}}],
                },
            },
            "spec.devices[0].capacity['\\n']: must be an object",
        ),
    ],
    ids=[
        "pv-storage-list",
        "pv-term-string",
        "pv-expression-null",
        "pv-fields-string",
        "pv-values-string",
        "pv-terms-object",
        "pvc-storage-object",
        "claim-allocation-term-list",
        "slice-term-number",
        "slice-capacity-name-newline",
    ],
)
def test_object_of_the_wrong_types_is_refused_naming_the_field(
    parse: Any, raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ObjectParseError, match=rf"^{re.escape(message)}$"):
        parse(raw)


def test_an_invalid_term_of_the_right_types_still_parses_and_never_matches() -> None:
    """Upstream parses a term with a bad operator and matches nothing with it; only types are refused."""
    volume = parse_persistent_volume(
        _pv(nodeAffinity=_terms({"matchExpressions": [{"key": "k", "operator": "Bad"}]}))
    )
    assert volume.node_affinity is not None and volume.node_affinity.terms[0].invalid
    assert volume.node_affinity_error == "spec.nodeAffinity.required: invalid node selector term"
