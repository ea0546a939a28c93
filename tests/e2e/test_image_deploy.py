"""The README's "Install" works as written, against the dev cluster with the image ``make image`` built
loaded: its ``kubectl apply -k deploy/`` is run as it stands, and its ``helm install`` is rendered with the
same release, chart, namespace and values (``helm template``) and applied. (``test_readme_install.py``
runs the whole of it, verify and uninstall included, on a cluster of its own.)

No kubelet or controller manager runs here, so the test plays their part (``image_runtime.Kubelet``):
from the Deployment the API server stored, it starts the one container of a replica with the
Deployment's own image (loaded, not pulled: ``imagePullPolicy: IfNotPresent``), command, args, env
(the pod's name from the downward API), securityContext, volumes, probes and a token of its service
account, then checks what the Deployment promises: the startup, liveness and readiness probes pass, the
replica leads the Lease under its pod name, a pod of the served schedulerName binds with its Scheduled
event, and SIGTERM ends it within the pod's grace period with the Lease released. The Deployment, the
chart's objects that would disturb later modules and the Lease are deleted afterwards.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import readme_steps
import yaml
from image_runtime import kubelet, record, wait_probe
from operator_harness import Scope, holder, kubectl, wait_profile, wait_until

from kopf_scheduler.devcluster import find_bin_dir
from kopf_scheduler.devcluster.binaries import built_tool
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kopf-scheduler"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kopf-scheduler"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kopf-scheduler"
PROFILES = "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles"


def readme_command(*start: str) -> list[str]:
    """The one command of the README's "Install" that starts with these words."""
    return readme_steps.command(readme_steps.section("Install"), *start)


@pytest.fixture
def cleanup(control_plane: ClusterHarness) -> Iterator[list[str]]:
    """API paths deleted after the test (the Deployment and the Lease always): a Deployment left stored
    would fail test_operator_deploy's dry run, a held Lease would delay later operators."""
    paths = [DEPLOYMENT, LEASE]
    yield paths
    for path in reversed(paths):
        control_plane.delete(path)


def run_replica(
    cp: ClusterHarness,
    scope: Scope,
    deployment: dict[str, Any],
    scheduler_name: str,
    what: str,
    profile: str | None = None,
) -> None:
    """One replica of ``deployment`` as a kubelet would run it; checks it accepts ``profile``, binds a
    pod of ``scheduler_name`` and stops cleanly."""
    spec = deployment["spec"]["template"]["spec"]
    with kubelet(cp, deployment["metadata"]["namespace"]) as node_agent:
        container, probes = node_agent.run(spec)
        started = wait_probe(container, probes["startup"], "startup")
        assert probes["liveness"].passes()
        ready = wait_probe(container, probes["readiness"], "readiness")
        record(f"{what}_startup_probe_seconds", round(started, 2))
        record(f"{what}_ready_seconds", round(ready, 2))
        # KOPF_SCHEDULER_IDENTITY is the pod's name (fieldRef metadata.name)
        wait_until(lambda: holder(cp, NAMESPACE) == container.name, 30, f"{container.name} leading")
        if profile:
            wait_profile(cp, profile, "True", timeout=30)

        [node] = scope.nodes(1)
        scope.create_pod("web", scheduler_name)
        assert scope.wait_bound("web", timeout=30)["spec"]["nodeName"] == node
        assert scope.wait_event("Scheduled", "web").get("reportingInstance") == container.name

        code, seconds = container.terminate()
        assert code == 0, (
            f"exit code {code} within the grace period of {container.grace} s:\n{container.tail()}"
        )
        record(f"{what}_sigterm_to_exit_seconds", round(seconds, 2))
        assert holder(cp, NAMESPACE) == "", "the Lease was not released"
        problems = [line for line in container.logs().splitlines() if "Traceback" in line or "[ERROR" in line]
        assert problems == [], container.tail()


def test_kubectl_apply_k_deploy_runs_the_built_image(
    control_plane: ClusterHarness, scope: Scope, cleanup: list[str]
) -> None:
    command = readme_command("kubectl", "apply", "-k", "deploy/")
    cleanup.append(f"/api/v1/namespaces/{NAMESPACE}/services/kopf-scheduler-metrics")
    done = subprocess.run(
        [str(find_bin_dir() / "kubectl"), f"--kubeconfig={control_plane.kubeconfig}", *command[1:]],
        cwd=ROOT,  # the README's relative path
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "deployment.apps/kopf-scheduler" in done.stdout, done.stdout

    deployment = control_plane.get(DEPLOYMENT)  # as stored, with the API server's defaults
    run_replica(control_plane, scope, deployment, "kopf-scheduler", "deploy")


def test_the_charts_deployment_runs_the_built_image(
    control_plane: ClusterHarness, scope: Scope, cleanup: list[str]
) -> None:
    command = readme_command("helm", "install")
    release, chart = command[2], command[3]
    assert (release, chart) == ("kopf-scheduler", "charts/kopf-scheduler"), command
    options = command[4:]
    namespace = options[options.index("--namespace") + 1]
    assert namespace == NAMESPACE
    sets = [options[i + 1] for i, o in enumerate(options) if o == "--set"]
    # `helm install` applies the chart's CRDs and objects; `helm template` renders the same (and the
    # `helm test` pod, which only `helm test` creates: skipped)
    rendered = subprocess.run(
        [str(built_tool("helm", "helm")), "template", release, chart, "--namespace", namespace,
         "--include-crds", "--skip-tests", *(arg for value in sets for arg in ("--set", value))],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert rendered.returncode == 0, rendered.stderr
    kept = [o for o in yaml.safe_load_all(rendered.stdout) if o]
    for o in kept:
        if o["kind"] == "SchedulingProfile":
            cleanup.append(f"{PROFILES}/{o['metadata']['name']}")
        elif o["kind"] in ("Service", "PodDisruptionBudget"):
            group = "api/v1" if o["kind"] == "Service" else "apis/policy/v1"
            plural = "services" if o["kind"] == "Service" else "poddisruptionbudgets"
            cleanup.append(f"/{group}/namespaces/{NAMESPACE}/{plural}/{o['metadata']['name']}")
    kubectl(control_plane, "apply", "-f", "-", input=yaml.safe_dump_all(kept))

    [profile] = [o for o in kept if o["kind"] == "SchedulingProfile"]  # shippedProfiles={bin-packing}
    deployment = control_plane.get(DEPLOYMENT)
    assert deployment["metadata"]["labels"].get("app.kubernetes.io/managed-by") == "Helm"
    run_replica(
        control_plane,
        scope,
        deployment,
        profile["spec"]["schedulerName"],
        "chart",
        profile["metadata"]["name"],
    )
