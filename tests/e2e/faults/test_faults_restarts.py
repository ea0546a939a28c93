"""Fault tier: the control plane restarts under the scheduler. On a cluster of its own (the session's
is not restarted under other tests), 300 pods are created, and once the operator has bound some of
them, kube-apiserver or etcd is stopped and started again on the same address. Afterwards, from the API
server's own record: every pod bound by exactly one successful binding request, no node holding more
than its allocatable CPU or pod count, and the operator still running (it reconnected; nothing died)."""

from __future__ import annotations

import atexit
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_harness import Operators, Scope, over_allocatable, settled_audit, wait_until

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import APISERVER, ETCD, default_crds_dir
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

COUNT = 1000


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    dev = DevCluster(
        tmp_path_factory.mktemp("restarts") / "cluster", crds_dir=default_crds_dir(), die_with_parent=True
    )
    atexit.register(dev.down)
    try:
        try:
            dev.up()
        except UsageError as e:  # binaries missing: `make controlplane` was not run
            pytest.fail(f"control plane not available: {e}", pytrace=False)
        yield ClusterHarness.of(dev)
    finally:
        dev.down()
        atexit.unregister(dev.down)


@pytest.mark.parametrize("component", [APISERVER, ETCD])
def test_a_control_plane_restart_in_a_burst(
    own_cluster: ClusterHarness, tmp_path: Path, component: str
) -> None:
    cp = own_cluster
    scope = Scope(cp)
    operators = Operators(cp.kubeconfig, tmp_path)
    try:
        scope.nodes(10, cpu="8", memory="64Gi", pods="110")  # 1,100 pod slots, 80 CPUs for 1,000 x 50m
        operator = operators.start("op-restarts", lease_namespace=scope.namespace, leader_elect=False)
        operator.wait_for_log("scheduling starts")
        names = [f"r{i:04d}" for i in range(COUNT)]
        scope.create_pods([scope.pod(name, requests={"cpu": "50m", "memory": "10Mi"}) for name in names])
        wait_until(lambda: len(scope.bound()) >= 30, 60, "30 pods bound before the restart")
        cp.cluster.restart(component, down_for=2.0)
        scope.wait_all_bound(timeout=180)
        assert operator.alive, operator.tail()

        bindings = Counter(
            r.name
            for r in settled_audit(cp, scope.namespace)
            if r.is_binding and r.namespace == scope.namespace and r.succeeded
        )
        assert bindings == Counter({name: 1 for name in names})
        assert over_allocatable(cp, scope) == {}
    finally:
        problems = operators.stop_all()
        scope.cleanup()
    assert not problems, problems
