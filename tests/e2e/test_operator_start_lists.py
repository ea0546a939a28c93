"""Start-up lists each kind once: the watches go on from the scheduling process's own lists.

The API server's own count of LIST requests for pods across the cluster (``apiserver_request_total``)
grows, while the operator starts, by the pages of one list of every pod: the scheduling process's. The
watches (Kopf's, in the intake process or in the one process) list nothing more; they start at that
list's resourceVersion. Pods created throughout the start, before, during and after those lists, are
all bound: nothing made between a list and its watch is missed.
"""

from __future__ import annotations

import math
import threading

import pytest
from operator_harness import Operators, Scope

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.service.service import START_PAGE as PAGE

pytestmark = pytest.mark.e2e

#: pods bound before the start (more than one page of Kopf's lists, which are of 500)
EXISTING = 700


def pod_lists(cp: ClusterHarness) -> int:
    """LIST requests for pods across the cluster that the API server has answered."""
    text = cp.api.request("GET", "/metrics", timeout=30).text()
    total = 0
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{"):
            labels, _, value = line.rpartition(" ")
            if all(label in labels for label in ('verb="LIST"', 'resource="pods"', 'scope="cluster"')):
                total += int(float(value))
    return total


def pods_in_cluster(cp: ClusterHarness) -> int:
    """Every pod of the cluster, counted in pages (namespaced lists: not counted by ``pod_lists``)."""
    count = 0
    for ns in cp.get("/api/v1/namespaces")["items"]:
        count += len(cp.get(f"/api/v1/namespaces/{ns['metadata']['name']}/pods")["items"])
    return count


@pytest.mark.parametrize("one_process", [False, True], ids=["intake-process", "one-process"])
def test_start_lists_pods_once_and_misses_nothing_made_meanwhile(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, one_process: bool
) -> None:
    node = scope.nodes(1, pods="1000", cpu="100", memory="400Gi")[0]
    existing = [
        pod_manifest(f"old-{i:04d}", scope.namespace, schedulerName="nobody", nodeName=node)
        for i in range(EXISTING)
    ]
    scope.create_pods(existing, concurrency=16)
    total = pods_in_cluster(control_plane)
    before = pod_lists(control_plane)

    made: list[str] = []
    stop = threading.Event()

    def keep_making() -> None:  # one pod every 50 ms from before the start until it leads
        while not stop.is_set() or len(made) < 5:
            name = f"new-{len(made):03d}"
            scope.create_pod(name)
            made.append(name)
            stop.wait(0.05)

    maker = threading.Thread(target=keep_making, daemon=True)
    maker.start()
    try:
        operator = operators.start("op", lease_namespace=scope.namespace, one_process=one_process)
        operator.wait_leading(timeout=60)
    finally:
        stop.set()
        maker.join(timeout=30)
    scope.create_pod("after")
    made.append("after")

    for name in made:
        scope.wait_bound(name, timeout=30)
    lists = pod_lists(control_plane) - before
    pages = math.ceil((total + len(made)) / PAGE)
    assert math.ceil(total / PAGE) <= lists <= pages, (
        f"{lists} pod LIST requests while starting with {total} pods: one list is "
        f"{math.ceil(total / PAGE)}-{pages} pages\n{operator.tail()}"
    )
    assert not operator.problems(), operator.problems()[:20]
