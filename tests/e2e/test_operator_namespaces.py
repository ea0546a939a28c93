"""The operator reads namespace labels for ``namespaceSelector`` in pod (anti-)affinity terms, as a user
sees it on a real API server: an incoming pod's required affinity to pods in namespaces picked by label,
an existing pod's required anti-affinity that picks the incoming pod's namespace by label, and a pod
waiting for a namespace label that is placed as soon as the label is set (the Namespace update requeues
it; kube-scheduler would leave it to its five-minute flush of unschedulable pods)."""

from __future__ import annotations

from typing import Any

import pytest
from operator_harness import Operators, Scope, condition

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

HOSTNAME = "kubernetes.io/hostname"
AFFINITY_NOT_MATCHED = "node(s) didn't match pod affinity rules"


def _label_namespace(cp: ClusterHarness, namespace: str, labels: dict[str, str]) -> None:
    resp = cp.api.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": labels}},
        content_type="application/merge-patch+json",
    )
    assert resp.status == 200, resp.text()


def _bound_pod(namespace: str, name: str, node: str, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
    pod = pod_manifest(name, namespace, requests={"cpu": "100m", "memory": "100Mi"}, nodeName=node, **spec)
    pod["metadata"]["labels"] = labels
    return pod


def _term(labels: dict[str, str], namespace_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": labels},
        "topologyKey": HOSTNAME,
        "namespaceSelector": {"matchLabels": namespace_labels},
    }


def test_a_pod_waiting_for_a_namespace_label_is_placed_once_the_label_is_set(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(3)
    team = {"team": scope.run}
    other = scope.create_namespace("db")
    control_plane.post(f"/api/v1/namespaces/{other}/pods", _bound_pod(other, "db", nodes[1], {"app": "db"}))
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()

    affinity = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "db"}, team)]}
    }
    scope.create_pod("client", affinity=affinity)
    event = scope.wait_event("FailedScheduling", "client")
    assert AFFINITY_NOT_MATCHED in event["message"], dumps(event)
    assert not scope.get_pod("client")["spec"].get("nodeName")

    _label_namespace(control_plane, other, team)
    # a requeue by the Namespace event; the unschedulable pool's own flush would take five minutes
    pod = scope.wait_bound("client", timeout=30)
    assert pod["spec"]["nodeName"] == nodes[1], dumps(pod)
    assert condition(pod, "PodScheduled")["status"] == "True"
    assert not operator.problems(), operator.problems()


def test_existing_pods_anti_affinity_selects_the_incoming_pods_namespace_by_label(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    # n0 is the emptier node, so without the anti-affinity every web pod would go there
    nodes = scope.nodes(2)
    _label_namespace(control_plane, scope.namespace, {"team": scope.run})
    guard_ns = scope.create_namespace("guard")
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "web"}, {"team": scope.run})]
        }
    }
    control_plane.post(
        f"/api/v1/namespaces/{guard_ns}/pods",
        _bound_pod(guard_ns, "guard", nodes[0], {"app": "guard"}, affinity=anti),
    )
    filler = _bound_pod(scope.namespace, "filler", nodes[1], {"app": "filler"})
    filler["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2", "memory": "8Gi"}
    control_plane.post(f"/api/v1/namespaces/{scope.namespace}/pods", filler)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()

    # a pod the guard's term does not select (other labels) takes the emptier node...
    scope.create_pod("other")
    assert scope.wait_bound("other")["spec"]["nodeName"] == nodes[0]
    # ...one it selects, in a namespace its namespaceSelector picks by label, must keep away from it
    for name in ("web-0", "web-1"):
        body = scope.pod(name)
        body["metadata"]["labels"] = {"app": "web"}
        control_plane.post(f"/api/v1/namespaces/{scope.namespace}/pods", body)
    for name in ("web-0", "web-1"):
        pod = scope.wait_bound(name)
        assert pod["spec"]["nodeName"] == nodes[1], dumps(pod)
    assert not operator.problems(), operator.problems()


def test_an_incoming_pods_anti_affinity_picks_namespaces_by_label(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    nodes = scope.nodes(2)
    picked, ignored = scope.create_namespace("picked"), scope.create_namespace("ignored")
    _label_namespace(control_plane, picked, {"team": scope.run})
    # both nodes hold a cache pod, in a picked and an ignored namespace; the ignored one is heavy, so
    # without namespace labels the pod would take the emptier node
    control_plane.post(
        f"/api/v1/namespaces/{picked}/pods", _bound_pod(picked, "cache", nodes[0], {"app": "cache"})
    )
    heavy = _bound_pod(ignored, "cache", nodes[1], {"app": "cache"})
    heavy["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "2", "memory": "8Gi"}
    control_plane.post(f"/api/v1/namespaces/{ignored}/pods", heavy)
    operator = operators.start("op", lease_namespace=scope.namespace)
    operator.wait_leading()
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term({"app": "cache"}, {"team": scope.run})]
        }
    }
    scope.create_pod("app", affinity=anti)
    pod = scope.wait_bound("app")
    assert pod["spec"]["nodeName"] == nodes[1], dumps(pod)
    assert not operator.problems(), operator.problems()
