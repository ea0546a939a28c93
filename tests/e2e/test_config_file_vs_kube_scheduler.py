"""``--config FILE`` with kube-scheduler's flags beside it, as kube-scheduler v1.37.2 and kopf-scheduler each
take them, on two identical fresh clusters, one after the other.

The command line is the same for both: ``--config FILE --kubeconfig /nonexistent --leader-elect=true
--leader-elect-resource-name <lease>``. The file turns leader election off, names another Lease, sets a
20 s lease duration, reaches the cluster through ``clientConnection.kubeconfig``, and has two profiles:
``file-plain`` (the defaults) and ``file-unfit`` (NodeResourcesFit's filter disabled). What must agree:
``--kubeconfig`` is ignored (both reach the cluster), the flags win over ``leaderElection`` field by
field (the Lease named by the flag is held, for the file's 20 s), both profiles serve (a pod asking for
100 CPUs binds under ``file-unfit``), and a pod naming a scheduler the file does not have stays pending.

kube-scheduler is started here, not through ``side_by_side``, because its command line must carry flags
beside the file, which ``SideBySide`` does not pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import Operators, fresh_cluster, pod_outcome, sized_nodes, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

NS = "configured"
LEASE = "from-the-flag"
NODES = {"n-0": (None, "4", "8Gi"), "n-1": (None, "8", "16Gi")}
FILE_FIELDS: dict[str, Any] = {
    "leaderElection": {"leaderElect": False, "leaseDuration": "20s", "resourceName": "from-the-file"},
    "profiles": [
        {"schedulerName": "file-plain"},
        {"schedulerName": "file-unfit", "plugins": {"filter": {"disabled": [{"name": "NodeResourcesFit"}]}}},
    ],
}
FLAGS = [
    "--kubeconfig=/nonexistent/kubeconfig",
    "--leader-elect=true",
    f"--leader-elect-resource-name={LEASE}",
    "--leader-elect-resource-namespace=default",
]
#: (pod, schedulerName, CPUs), created in this order
PODS = [("stray-0", "not-in-the-file", "1"), ("plain-0", "file-plain", "1"), ("big-0", "file-unfit", "100")]


def place_pods(cp: ClusterHarness) -> dict[str, str]:
    """Each pod of ``PODS`` "bound" or its PodScheduled message; ``stray-0`` is read once the others have
    an outcome ("" if still untouched). With the Lease: its holder's presence and duration."""
    for name, scheduler_name, cpu in PODS:
        body = pod_manifest(name, NS, requests={"cpu": cpu, "memory": "1Gi"}, schedulerName=scheduler_name)
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
    outcomes = {
        name: wait_until(
            lambda name=name: pod_outcome(cp, NS, name), 60, f"pod {name} bound or unschedulable"
        )
        for name, _, _ in PODS[1:]
    }
    outcomes = {name: "bound" if outcome in NODES else outcome for name, outcome in outcomes.items()}
    outcomes["stray-0"] = pod_outcome(cp, NS, "stray-0")
    lease = cp.get(f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{LEASE}")["spec"]
    outcomes["lease"] = f"held: {bool(lease.get('holderIdentity'))}, {lease['leaseDurationSeconds']}s"
    return outcomes


def test_config_file_and_flags_are_combined_as_kube_scheduler_combines_them(tmp_path: Path) -> None:
    with fresh_cluster(tmp_path / "kube", sized_nodes(NODES), namespaces=[NS]) as cp:
        cp.cluster.start_kube_scheduler(extra_args=FLAGS, config=FILE_FIELDS)
        try:
            upstream = place_pods(cp)
        except AssertionError as e:
            raise AssertionError(
                f"{e}\nkube-scheduler log:\n{cp.cluster.log_tail('kube-scheduler', 80)}"
            ) from None
    with fresh_cluster(tmp_path / "kopf", sized_nodes(NODES), namespaces=[NS]) as cp:
        config = tmp_path / "kube-scheduler.yaml"
        config.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kubescheduler.config.k8s.io/v1",
                    "kind": "KubeSchedulerConfiguration",
                    "clientConnection": {"kubeconfig": str(cp.kubeconfig)},
                    **FILE_FIELDS,
                }
            )
        )
        operators = Operators(cp.kubeconfig, tmp_path)
        try:
            operator = operators.start(
                "op",
                lease_namespace="default",
                env={"KUBECONFIG": "/nonexistent/kubeconfig"},
                args=["--config", str(config), *FLAGS],
            )
            operator.wait_leading()
            try:
                ours = place_pods(cp)
            except AssertionError as e:
                raise AssertionError(f"{e}\noperator log:\n{operator.tail(80)}") from None
            assert not operator.problems(), operator.problems()
        finally:
            killed = operators.stop_all()
        assert not killed, operator.tail()
    assert ours == upstream, f"kube-scheduler: {upstream}\nkopf-scheduler: {ours}"
    assert upstream == {"plain-0": "bound", "big-0": "bound", "stray-0": "", "lease": "held: True, 20s"}
