"""PodTopologySpread's system default constraints through the operator, compared with kube-scheduler on a
real API server with kube-controller-manager: pods without constraints of their own spread by hostname
(maxSkew 3) and zone (maxSkew 5, both ScheduleAnyway) over the pods selected by the Services selecting
them and by their controlling ReplicaSet or StatefulSet.

The same workloads run twice, each time on a fresh cluster with identical nodes (one after the other, so
the two never share the machine's cores): once scheduled by the upstream kube-scheduler, once by
``kopf-scheduler run --default-scheduler-name default-scheduler``; the manifests name no scheduler. In
that order, each workload in a namespace of its own (spreading counts the pods of the pod's namespace
only, but every pod before it takes resources):

- a Deployment of 6 replicas, created by the ReplicaSet controller in a burst;
- 6 bare pods selected by a Service, each created once the one before is bound;
- a StatefulSet of 4 replicas (``Parallel``: ``OrderedReady`` would wait for a Ready pod, which no
  kubelet ever reports) behind a headless Service, so its selector merges with the Service's.

The nodes: zone a one large node, zone b two medium ones, zone c one small. Without the default
constraints the resource scores put nearly every pod on the large node; with them each workload reaches
every zone. The sizes are picked so that no two nodes tie for the best score for any pod (checked with
``kopf-scheduler simulate --explain``): kube-scheduler breaks ties at random, so a tie would make even
two kube-scheduler runs disagree. Both schedulers place one pod at a time and count the pods already
assumed, so a burst of identical replicas gets the same sequence of nodes whatever order they are
taken in: per-node counts are compared for the controllers' pods (which of them lands where depends on
the order in which the controllers created them), the exact node per pod for the Service's pods.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from operator_harness import fresh_cluster, sized_nodes, wait_until
from side_by_side import SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

#: name -> (zone, cpu, memory); the large node is so large that the resource scores alone favour it for
#: nearly every pod, the two medium ones differ so that they never tie
NODES = {
    "a-large-0": ("zone-a", "128", "512Gi"),
    "b-medium-1": ("zone-b", "8", "32Gi"),
    "b-medium-2": ("zone-b", "6", "24Gi"),
    "c-small-3": ("zone-c", "4", "16Gi"),
}
LARGE, MEDIUM_1, MEDIUM_2, SMALL = NODES
ZONES = {name: zone for name, (zone, _, _) in NODES.items()}

DEPLOYMENT_NS, SERVICE_NS, STATEFUL_SET_NS = "deploy", "service", "stateful"
REPLICAS, SERVICE_PODS, STATEFUL_REPLICAS = 6, 6, 4
WEB, API, DB = {"app": "web"}, {"app": "api"}, {"app": "db"}

#: what kube-scheduler v1.37 does with the same objects, in the same order; without the default selector
#: all 6 Deployment replicas, 5 of the 6 Service pods and all 4 StatefulSet replicas go to the large node.
#: (With v1.34's BalancedAllocation the StatefulSet put two replicas on the large node and none on
#: medium-2; v1.37's score of the balance a pod improves sends one to each node.)
EXPECTED_DEPLOYMENT = {LARGE: 2, MEDIUM_1: 1, MEDIUM_2: 1, SMALL: 2}
EXPECTED_SERVICE_PODS = [LARGE, MEDIUM_1, SMALL, MEDIUM_2, LARGE, SMALL]
EXPECTED_STATEFUL_SET = {LARGE: 1, MEDIUM_1: 1, MEDIUM_2: 1, SMALL: 1}

TIMEOUT = 60.0


@dataclass(frozen=True)
class Placements:
    """Pod name -> node, per workload, as the API server records them."""

    deployment: dict[str, str]
    #: in creation order
    service_pods: list[tuple[str, str]]
    stateful_set: dict[str, str]


# -- one fresh cluster, one scheduler, the three workloads -------------------------------------------------


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    """A fresh cluster with kube-controller-manager, the nodes of ``NODES`` and the workloads' namespaces;
    stopped on exit."""
    return fresh_cluster(
        state_dir, sized_nodes(NODES), namespaces=(DEPLOYMENT_NS, SERVICE_NS, STATEFUL_SET_NS)
    )


def service(name: str, namespace: str, selector: dict[str, str], *, headless: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": selector, "ports": [{"port": 80}]}
    if headless:
        spec["clusterIP"] = "None"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod_template(labels: dict[str, str], cpu: str, memory: str) -> dict[str, Any]:
    """No schedulerName: the cluster's scheduler serves ``default-scheduler``."""
    return {
        "metadata": {"labels": labels},
        "spec": pod_manifest("", "", requests={"cpu": cpu, "memory": memory})["spec"],
    }


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": DEPLOYMENT_NS},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": WEB},
            "template": pod_template(WEB, "500m", "512Mi"),
        },
    }


def stateful_set() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": STATEFUL_SET_NS},
        "spec": {
            "replicas": STATEFUL_REPLICAS,
            "serviceName": "db",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": DB},
            "template": pod_template(DB, "1", "2Gi"),
        },
    }


def controller_of(pod: dict[str, Any]) -> str:
    """``Kind`` of the pod's controlling owner ('' for none)."""
    refs = pod["metadata"].get("ownerReferences") or []
    return next((str(ref["kind"]) for ref in refs if ref.get("controller")), "")


def wait_placed(cp: ClusterHarness, namespace: str, labels: dict[str, str], count: int) -> dict[str, Any]:
    """Until ``count`` pods with ``labels`` exist in ``namespace``, every one bound; returns them by name."""
    selector = ",".join(f"{k}%3D{v}" for k, v in labels.items())

    def placed() -> dict[str, Any] | None:
        pods = cp.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector={selector}")["items"]
        by_name = {p["metadata"]["name"]: p for p in pods}
        bound = len(by_name) == count and all(p["spec"].get("nodeName") for p in pods)
        return by_name if bound else None

    return wait_until(placed, TIMEOUT, f"{count} pods {labels} in {namespace} bound", interval=0.2)


def wait_bound(cp: ClusterHarness, namespace: str, name: str) -> str:
    """Until the pod is bound; returns its node."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    node: str = wait_until(
        lambda: cp.get(path)["spec"].get("nodeName"), TIMEOUT, f"pod {namespace}/{name} bound"
    )
    return node


def place_workloads(cp: ClusterHarness) -> Placements:
    """Create the three workloads one after the other, each once the previous one is placed."""
    # The Services first, long before their pods: a scheduler that has not seen a pod's Service yet
    # would leave it out of the pod's default selector (upstream reads it from an informer too).
    cp.post(f"/api/v1/namespaces/{SERVICE_NS}/services", service("api", SERVICE_NS, API))
    cp.post(
        f"/api/v1/namespaces/{STATEFUL_SET_NS}/services", service("db", STATEFUL_SET_NS, DB, headless=True)
    )

    cp.post(f"/apis/apps/v1/namespaces/{DEPLOYMENT_NS}/deployments", deployment())
    web = wait_placed(cp, DEPLOYMENT_NS, WEB, REPLICAS)
    assert {controller_of(p) for p in web.values()} == {"ReplicaSet"}, dumps(list(web.values()))

    service_pods: list[tuple[str, str]] = []
    for i in range(SERVICE_PODS):
        body = pod_manifest(f"api-{i}", SERVICE_NS, requests={"cpu": "250m", "memory": "256Mi"})
        body["metadata"]["labels"] = dict(API)
        cp.post(f"/api/v1/namespaces/{SERVICE_NS}/pods", body)
        service_pods.append((f"api-{i}", wait_bound(cp, SERVICE_NS, f"api-{i}")))

    cp.post(f"/apis/apps/v1/namespaces/{STATEFUL_SET_NS}/statefulsets", stateful_set())
    db = wait_placed(cp, STATEFUL_SET_NS, DB, STATEFUL_REPLICAS)
    assert {controller_of(p) for p in db.values()} == {"StatefulSet"}, dumps(list(db.values()))

    return Placements(
        deployment={name: p["spec"]["nodeName"] for name, p in web.items()},
        service_pods=service_pods,
        stateful_set={name: p["spec"]["nodeName"] for name, p in db.items()},
    )


#: the workloads under kube-scheduler, then on an identical fresh cluster under ``kopf-scheduler run
#: --default-scheduler-name default-scheduler`` (the fixtures ``kube_scheduler`` and ``kopf_scheduler``)
SIDE_BY_SIDE = SideBySide("spread", own_cluster, lambda cp, _: place_workloads(cp))


# -- the comparisons ---------------------------------------------------------------------------------------


def per_node(placements: dict[str, str] | list[tuple[str, str]]) -> dict[str, int]:
    nodes = placements.values() if isinstance(placements, dict) else [node for _, node in placements]
    return dict(sorted(Counter(nodes).items()))


def per_zone(counts: dict[str, int]) -> dict[str, int]:
    zones: Counter[str] = Counter()
    for node, count in counts.items():
        zones[ZONES[node]] += count
    return dict(sorted(zones.items()))


def assert_spread(counts: dict[str, int], total: int) -> None:
    """What the default constraints give here and the resource scores alone would not: every zone holds
    a replica and the large node no more than its share."""
    zones = per_zone(counts)
    assert set(zones) == {"zone-a", "zone-b", "zone-c"}, f"a zone without replicas: {zones} ({counts})"
    assert counts.get(LARGE, 0) <= -(-total // 3), f"the large node took more than a third: {counts}"


def show(placements: Placements) -> str:
    return json.dumps(
        {
            "deployment": per_node(placements.deployment),
            "service pods": placements.service_pods,
            "stateful set": dict(sorted(placements.stateful_set.items())),
        },
        indent=1,
    )


def test_deployment_replicas_spread_over_zones_as_kube_scheduler_spreads_them(
    kube_scheduler: Placements, kopf_scheduler: Placements
) -> None:
    kube, ours = per_node(kube_scheduler.deployment), per_node(kopf_scheduler.deployment)
    assert ours == kube, f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    assert per_zone(ours) == per_zone(kube)
    assert kube == EXPECTED_DEPLOYMENT, (
        f"kube-scheduler placed otherwise than designed:\n{show(kube_scheduler)}"
    )
    assert_spread(ours, REPLICAS)


def test_pods_of_a_service_spread_one_by_one_as_kube_scheduler_spreads_them(
    kube_scheduler: Placements, kopf_scheduler: Placements
) -> None:
    assert kopf_scheduler.service_pods == kube_scheduler.service_pods, (
        f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    )
    nodes = [node for _, node in kube_scheduler.service_pods]
    assert nodes == EXPECTED_SERVICE_PODS, (
        f"kube-scheduler placed otherwise than designed:\n{show(kube_scheduler)}"
    )
    assert_spread(per_node(kopf_scheduler.service_pods), SERVICE_PODS)


def test_stateful_set_replicas_spread_as_kube_scheduler_spreads_them(
    kube_scheduler: Placements, kopf_scheduler: Placements
) -> None:
    kube, ours = per_node(kube_scheduler.stateful_set), per_node(kopf_scheduler.stateful_set)
    assert ours == kube, f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    assert kube == EXPECTED_STATEFUL_SET, (
        f"kube-scheduler placed otherwise than designed:\n{show(kube_scheduler)}"
    )
    assert_spread(ours, STATEFUL_REPLICAS)
