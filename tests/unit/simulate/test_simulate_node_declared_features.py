"""``simulate`` with nodes that declare features (``status.declaredFeatures``): the loader keeps the field,
and the default profile (v1.37's gates) has NodeDeclaredFeatures, so a pod that needs a feature goes to
a node that declares it, or fails with kube-scheduler's message when none does."""

from __future__ import annotations

from typing import Any

from kopf_scheduler.simulate.loader import load_objects
from kopf_scheduler.simulate.run import SimulationResult, simulate
from kopf_scheduler.testing import make_node, make_pod


def _node(name: str, *features: str) -> dict[str, Any]:
    node = make_node().name(name).obj()
    if features:
        node["status"]["declaredFeatures"] = list(features)
    return node


def _outcome(result: SimulationResult, name: str) -> Any:
    uid = next(p["metadata"]["uid"] for p in result.pods if p["metadata"]["name"] == name)
    return result.outcomes[uid]


async def test_pods_needing_a_feature_go_where_it_is_declared() -> None:
    user_namespace = make_pod().name("userns").set("spec.hostNetwork", True).set("spec.hostUsers", False)
    restart_all = make_pod().name("restart-all").obj()
    restart_all["spec"]["containers"][0]["restartPolicyRules"] = [
        {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [1]}}
    ]
    objects = [
        _node("n1", "ExtendWebSocketsToKubelet", "UserNamespacesHostNetworkSupport"),
        _node("n2"),
        {"apiVersion": "v1", "kind": "Pod", **user_namespace.obj()},
        {"apiVersion": "v1", "kind": "Pod", **restart_all},
    ]
    cluster = load_objects(("test", obj) for obj in objects)
    assert cluster.nodes[0]["status"]["declaredFeatures"] == [
        "ExtendWebSocketsToKubelet",
        "UserNamespacesHostNetworkSupport",
    ]
    result = await simulate(cluster, [], seed=1)
    assert _outcome(result, "userns").node == "n1"
    failed = _outcome(result, "restart-all")
    assert failed.node is None
    assert failed.message == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's required features. preemption: 0/2 nodes "
        "are available: 2 Preemption is not helpful for scheduling."
    )
