"""Extended resources backed by DRA under the gates of Kubernetes 1.35, where ``DRAExtendedResource`` is
off (Alpha): kube-scheduler v1.37.2 run with ``--emulated-version=1.35`` and ``kopf-scheduler run
--emulated-version 1.35``, each on the cluster of ``test_dra_extended_resources_vs_kube_scheduler.py``
(the class ``gpu`` standing for ``example.com/gpu``, four devices on ``dra-0``, ``plugin-1`` advertising
the resource itself). With the gate off no class stands for a resource: a pod asking for
``example.com/gpu`` on ``dra-0`` is refused by NodeResourcesFit (``Insufficient example.com/gpu``) and no
claim is made, while one on ``plugin-1`` is bound as for any extended resource.
"""

from __future__ import annotations

from typing import Any

import pytest
from operator_harness import wait_until
from side_by_side import Scheduler, SideBySide
from test_dra_extended_resources_vs_kube_scheduler import (
    GPU,
    NS,
    RESOURCE,
    TIMEOUT,
    container,
    outcome,
    own_cluster,
)

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

PODS = {"on-dra": "dra-0", "on-plugin": "plugin-1"}


def run_pods(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    run: dict[str, Any] = {}
    for name, node in PODS.items():
        spec = {
            "containers": [container("main", **{GPU: "1"})],
            "nodeSelector": {"kubernetes.io/hostname": node},
        }
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
        run[name] = wait_until(lambda n=name: outcome(cp, n), TIMEOUT, f"pod {name} placed or reported")
    pods = {p["metadata"]["name"]: p for p in cp.get(f"/api/v1/namespaces/{NS}/pods")["items"]}
    run["statuses"] = {n: (p.get("status") or {}).get("extendedResourceClaimStatus") for n, p in pods.items()}
    run["claims"] = [
        c["metadata"]["name"] for c in cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims")["items"]
    ]
    return run


SIDE_BY_SIDE = SideBySide(
    "dra-extended-1.35",
    own_cluster,
    run_pods,
    kube_args=["--emulated-version=1.35"],
    kopf_args=("--default-scheduler-name", "default-scheduler", "--emulated-version", "1.35"),
)

EXPECTED = {
    "on-dra": "0/2 nodes are available: 1 Insufficient example.com/gpu, 1 node(s) didn't match Pod's node "
    "affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    "on-plugin": "node:plugin-1",
    "statuses": {"on-dra": None, "on-plugin": None},
    "claims": [],
}


@pytest.mark.parametrize("which", ["kube_scheduler", "kopf_scheduler"])
def test_the_gate_off_leaves_extended_resources_to_the_node(
    which: str, request: pytest.FixtureRequest
) -> None:
    assert request.getfixturevalue(which) == EXPECTED
