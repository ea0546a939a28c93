"""The manifests in ``deploy/`` against the real API server: the kustomization passes a server-side dry
run (every object validated and admitted, the pod its Deployment would create included), and the
operator does its whole job with nothing but the permissions ``deploy/rbac.yaml`` grants its
ServiceAccount."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import Operators, Scope, condition, kubectl, wait_profile, wait_until

from kopf_scheduler.devcluster import kubeconfig
from kopf_scheduler.devcluster.harness import ClusterHarness, dumps

pytestmark = pytest.mark.e2e

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NAMESPACE = "kopf-scheduler"  # the namespace deploy/ installs into
SYSTEM_CLUSTER_CRITICAL = 2000000000


def rendered(cp: ClusterHarness) -> list[dict[str, Any]]:
    """The objects ``kubectl apply -k deploy/`` sends."""
    return [d for d in yaml.safe_load_all(kubectl(cp, "kustomize", str(DEPLOY)).stdout) if d]


def ensure_namespace(cp: ClusterHarness) -> None:
    """A server-side dry run of namespaced objects needs their namespace to exist (the dry-run Namespace
    is not stored), as on a first real apply; so the namespace is applied for real, first."""
    kubectl(cp, "apply", "-f", str(DEPLOY / "namespace.yaml"))


def test_kustomization_passes_a_server_side_dry_run(control_plane: ClusterHarness) -> None:
    ensure_namespace(control_plane)
    result = kubectl(control_plane, "apply", "-k", str(DEPLOY), "--dry-run=server")
    lines = result.stdout.splitlines()
    objects = rendered(control_plane)
    assert len(lines) == len(objects) and all(line.endswith("(server dry run)") for line in lines), (
        result.stdout
    )
    kinds = {o["kind"] for o in objects}
    assert {"CustomResourceDefinition", "Deployment", "ClusterRole", "ServiceAccount", "Service"} <= kinds
    # nothing but the namespace was stored
    deployment = control_plane.api.request(
        "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kopf-scheduler"
    )
    assert deployment.status == 404, deployment.text()

    # the pod the Deployment would create is admitted too (its priority class resolved)
    [template] = [o["spec"]["template"] for o in objects if o["kind"] == "Deployment"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**template["metadata"], "name": "kopf-scheduler-dry-run"},
        "spec": template["spec"],
    }
    admitted = control_plane.post(f"/api/v1/namespaces/{NAMESPACE}/pods?dryRun=All", pod)
    assert admitted["spec"]["priority"] == SYSTEM_CLUSTER_CRITICAL, dumps(admitted["spec"])


def service_account_kubeconfig(cp: ClusterHarness, path: Path) -> Path:
    """A kubeconfig with a token of the ServiceAccount deploy/ creates (what the pod would mount)."""
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    answer = cp.post(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/kopf-scheduler/token", request)
    config = kubeconfig.build(
        cp.server, cp.ca_file.read_bytes(), answer["status"]["token"], name="kopf-scheduler-sa"
    )
    return kubeconfig.write(path, config)


def test_operator_works_with_the_deployed_rbac(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    ensure_namespace(control_plane)
    for name in ("serviceaccount.yaml", "rbac.yaml"):
        kubectl(control_plane, "apply", "-f", str(DEPLOY / name))
    config = service_account_kubeconfig(control_plane, tmp_path / "sa-kubeconfig")
    whoami = kubectl(control_plane, "auth", "whoami", "-o", "json", kubeconfig=config)
    assert (
        json.loads(whoami.stdout)["status"]["userInfo"]["username"]
        == f"system:serviceaccount:{NAMESPACE}:kopf-scheduler"
    )

    scope.nodes(1)
    operator = operators.start("op-sa", lease_namespace=NAMESPACE, kubeconfig=config)
    operator.wait_leading()
    # binding, the Scheduled event, PodScheduled=False with a FailedScheduling event, profile status
    scope.create_pod("web")
    scope.create_pod("huge", requests={"cpu": "100"})
    profile = scope.name("profile")
    scope.create_profile(profile, {"schedulerName": scope.name("sched")})

    scope.wait_bound("web")
    scope.wait_event("Scheduled", "web")
    scope.wait_event("FailedScheduling", "huge")
    # the event and the pod's PodScheduled condition are written by two writers: either may land first
    wait_until(
        lambda: condition(scope.get_pod("huge"), "PodScheduled").get("reason") == "Unschedulable",
        15,
        "PodScheduled=False with reason Unschedulable on pod huge",
    )
    wait_profile(control_plane, profile, "True")
    assert not operator.problems(), operator.problems()
    forbidden = [
        line for line in operator.log().splitlines() if "forbidden" in line.lower() or " 403" in line
    ]
    assert not forbidden, forbidden
    assert operator.terminate() == 0, operator.tail()
