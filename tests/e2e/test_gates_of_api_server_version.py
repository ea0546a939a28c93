"""Feature gates taken from the API server's version: on a cluster whose kube-apiserver is v1.36.3
(``hack/controlplane/build-previous.sh``; etcd and kubectl of the main build, no
kube-controller-manager, which may not be newer than the API server), ``kopf-scheduler run`` takes
Kubernetes 1.36's gate defaults and decides as kube-scheduler v1.36.3 does on an identical cluster, where
on a 1.37 cluster both decide otherwise (``test_v137_vs_kube_scheduler.py``).

The gate that tells them apart is StorageCapacityScoring (off in 1.36, Beta on in 1.37): a pod with an
unbound WaitForFirstConsumer claim between two nodes whose zones publish 10Gi and 100Gi of capacity
(``storage_capacity``) goes to ``cap-x-2`` on one point of LeastAllocated under 1.36's gates, to
``cap-y-3`` under 1.37's. The scheduler's choice is read from the claim's
``volume.kubernetes.io/selected-node`` (with no PV controller the binding then waits in PreBind), and
its nominatedNodeName (NominatedNodeNameForExpectation is on in 1.36 too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import storage_capacity
from operator_harness import fresh_cluster, sized_nodes, wait_until
from side_by_side import KOPF_SCHEDULER, Scheduler, SideBySide
from volume_provisioner import selected_node

from kopf_scheduler.devcluster.binaries import REQUIRED, built_tool, find_bin_dir
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

NS = "gates"
NODES = {"a-0": ("a", "4", "8Gi"), "b-1": ("b", "4", "8Gi"), **storage_capacity.NODES}
PREVIOUS = ("kube-apiserver", "kube-scheduler")
TIMEOUT = 60.0


def previous_bin_dir(directory: Path) -> Path:
    """Links to the main control plane's binaries, but kube-apiserver and kube-scheduler of v1.36."""
    directory.mkdir(parents=True, exist_ok=True)
    main = find_bin_dir()
    for name in REQUIRED:
        target = built_tool("controlplane-previous", name) if name in PREVIOUS else main / name
        (directory / name).symlink_to(target)
    return directory


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    version = cp.get("/version")["gitVersion"]
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", storage_capacity.claim(NS))
    cp.post(f"/api/v1/namespaces/{NS}/pods", storage_capacity.pod_with_claim(NS))

    node = wait_until(lambda: selected_node(cp, NS, "data"), TIMEOUT, "a node selected for the claim")
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/with-claim")
    gates = ""
    if scheduler.name == KOPF_SCHEDULER:
        gates = next(
            (line for line in scheduler.log().splitlines() if "feature gates of Kubernetes" in line), ""
        )
    return {
        "version": version,
        "selected": node,
        "nominated": (pod.get("status") or {}).get("nominatedNodeName", ""),
        "gates": gates,
    }


def cluster(state_dir: Path) -> Any:
    return fresh_cluster(
        state_dir,
        sized_nodes(NODES),
        namespaces=[NS],
        objects=storage_capacity.objects(NS),
        controller_manager=False,
        bin_dir=previous_bin_dir(state_dir.parent / "bin"),
    )


SIDE_BY_SIDE = SideBySide("gates-1.36", cluster, run)


def test_kopf_scheduler_takes_the_gates_of_a_1_36_api_server(kopf_scheduler: dict[str, Any]) -> None:
    assert kopf_scheduler["version"] == "v1.36.3"
    assert "feature gates of Kubernetes 1.36 in force (the API server is v1.36.3)" in kopf_scheduler["gates"]


def test_placement_is_kube_scheduler_v136s(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kube_scheduler["version"] == "v1.36.3"
    assert (kube_scheduler["selected"], kube_scheduler["nominated"]) == ("cap-x-2", "cap-x-2")
    assert (kopf_scheduler["selected"], kopf_scheduler["nominated"]) == ("cap-x-2", "cap-x-2")
