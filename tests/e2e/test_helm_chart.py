"""The Helm chart ``charts/kopf-scheduler`` with helm built from the Go module proxy (build-helm.sh): it
lints clean, its schema refuses a value of the wrong type with helm's message naming it, it renders into
objects the real API server accepts (a server-side dry run of everything, CRDs included), grants exactly
the RBAC of ``deploy/`` (both read the same files), passes the operator only flags ``kopf-scheduler run``
knows, and its options (ServiceMonitor, PodDisruptionBudget, profiles, a serving certificate, the Lease,
name overrides, pod annotations and labels, pull secrets, the PodGroup CRD switch) turn into what they say.

A release is installed for real (``helm install``) on a fresh control plane without any CRD, and
``helm test`` passes against it. No kubelet runs here, so the test plays its part twice, as
``test_image_deploy.py`` does: it runs the chart's scheduler container from the built image with podman
(``image_runtime.Kubelet``: the Deployment's image, args, env, securityContext, probes, service account
token), and for the test hook pod only, once that scheduler has bound it (``spec.nodeName`` set, with the
scheduler's Scheduled event), it runs the hook's container the same way (``kopf-scheduler --version``
from the release's image) and writes the pod's status as a kubelet would after the container exited 0:
phase Succeeded, the container terminated with exit code 0. ``helm uninstall`` then removes the release
and keeps both CRDs.
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from image_runtime import kubelet, wait_probe
from operator_harness import Scope, holder, kubectl, sized_nodes, wait_until

from kopf_scheduler.cli import run as run_cli
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.binaries import built_tool
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.devcluster.processes import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-scheduler"
SCHEDULING_PROFILE_CRD = "schedulingprofiles.kopf-scheduler.io"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def helm(*args: str) -> str:
    done = subprocess.run(
        [str(built_tool("helm", "helm")), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def render(namespace: str, *values: str) -> list[dict[str, Any]]:
    text = helm("template", "rel", str(CHART), "--namespace", namespace, "--include-crds", *values)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    return found


def test_the_chart_lints_clean() -> None:
    out = helm("lint", str(CHART), "--strict")
    assert "1 chart(s) linted, 0 chart(s) failed" in out, out


def test_the_rendered_chart_passes_a_server_side_dry_run(control_plane: ClusterHarness, scope: Scope) -> None:
    objects = render(scope.namespace, "--set", "shippedProfiles={bin-packing,spreading}")
    text = yaml.safe_dump_all(objects)
    result = kubectl(control_plane, "apply", "--dry-run=server", "-f", "-", input=text)
    lines = result.stdout.splitlines()
    assert len(lines) == len(objects) and all(line.endswith("(server dry run)") for line in lines), (
        result.stdout
    )
    kinds = {o["kind"] for o in objects}
    assert {
        "CustomResourceDefinition",
        "Deployment",
        "ClusterRole",
        "Role",
        "ServiceAccount",
        "Service",
        "PodDisruptionBudget",
        "SchedulingProfile",
    } <= kinds
    assert "ServiceMonitor" not in kinds  # off by default: its CRD comes with Prometheus Operator


def test_the_chart_grants_what_deploy_grants_in_its_namespace() -> None:
    objects = render("sched", "--set", "leaderElection.leaseName=my-lease")
    shipped = [
        d
        for f in ("rbac.yaml", "profile-editor.yaml")
        for d in yaml.safe_load_all((ROOT / "deploy" / f).read_text())
        if d
    ]
    for expected in shipped:
        got = one(objects, expected["kind"], expected["metadata"]["name"])
        if expected["kind"] == "Role":
            [lease_rule] = [r for r in got["rules"] if r.get("resourceNames")]
            assert lease_rule["resourceNames"] == ["my-lease"]
            lease_rule["resourceNames"] = ["kopf-scheduler"]
        assert got.get("rules") == expected.get("rules"), expected["metadata"]["name"]
        assert got.get("roleRef") == expected.get("roleRef")
        assert got.get("aggregationRule") == expected.get("aggregationRule")
        for label, value in (expected["metadata"].get("labels") or {}).items():
            assert got["metadata"]["labels"][label] == value
        if "namespace" in expected["metadata"]:
            assert got["metadata"]["namespace"] == "sched"
        for subject in got.get("subjects") or ():
            if subject["kind"] == "ServiceAccount":
                assert subject["namespace"] == "sched"


def _run_flags(args: list[str]) -> argparse.Namespace:
    """The container's args as ``kopf-scheduler run`` parses them (an unknown flag fails the test)."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    run_cli.add_parser(parser.add_subparsers(), "run")
    return parser.parse_args(args)


def test_the_deployment_runs_the_operator_with_known_flags_and_options_applied() -> None:
    objects = render(
        "sched",
        "--set",
        "metrics.tlsSecretName=serving-cert,metrics.serviceMonitor.enabled=true,replicaCount=3",
        "--set",
        "leaderElection.leaseName=my-lease,extraArgs={--allow-scheduler-name=default-scheduler}",
        "--set",
        "profiles.gpu.schedulerName=gpu,profiles.gpu.percentageOfNodesToScore=50",
    )
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 3
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    flags = _run_flags(container["args"])
    assert (flags.lease_namespace, flags.lease_name, flags.leader_elect) == ("sched", "my-lease", "true")
    assert (flags.tls_cert_file, flags.tls_private_key_file) == (
        "/etc/kopf-scheduler/serving-tls/tls.crt",
        "/etc/kopf-scheduler/serving-tls/tls.key",
    )
    assert flags.allow_scheduler_name == ["default-scheduler"]
    assert not flags.insecure_metrics
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["serving-tls"]["secret"] == {"secretName": "serving-cert"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"}
    monitor = one(objects, "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["scheme"], endpoint["tlsConfig"]["insecureSkipVerify"]) == ("https", False)
    assert one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    profile = one(objects, "SchedulingProfile", "gpu")
    assert profile["spec"] == {"schedulerName": "gpu", "percentageOfNodesToScore": 50}


def test_one_replica_gets_no_disruption_budget_and_an_unknown_profile_is_refused() -> None:
    assert "PodDisruptionBudget" not in {o["kind"] for o in render("sched", "--set", "replicaCount=1")}
    done = subprocess.run(
        [str(built_tool("helm", "helm")), "template", "rel", str(CHART), "--set", "shippedProfiles={nope}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert 'shippedProfiles: no shipped profile "nope"' in done.stderr


def _template_error(*values: str) -> str:
    done = subprocess.run(
        [str(built_tool("helm", "helm")), "template", "rel", str(CHART), *values],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


def test_two_replicas_without_leader_election_are_refused() -> None:
    error = _template_error("--set", "leaderElection.enabled=false")
    assert "leaderElection.enabled: false with replicaCount 2 would run 2 schedulers binding at once" in error
    one_replica = render("sched", "--set", "leaderElection.enabled=false", "--set", "replicaCount=1")
    [deployment] = [o for o in one_replica if o["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert "--leader-elect=false" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def _crd_names(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition")


def test_the_schema_refuses_a_value_of_the_wrong_type_naming_it() -> None:
    header = "values don't meet the specifications of the schema(s) in the following chart(s)"
    wrong_number = _template_error("--set", "replicaCount=abc")
    assert header in wrong_number and "- at '/replicaCount': got string, want integer" in wrong_number
    wrong_bool = _template_error("--set", "podGroupCRD.install=yes")
    assert "- at '/podGroupCRD/install': got string, want boolean" in wrong_bool
    assert "- at '/metrics/port': got string, want integer" in _template_error("--set", "metrics.port=https")
    assert "additional properties 'replicas' not allowed" in _template_error("--set", "replicas=3")
    # what the schema allows still renders
    budget = render("sched", "--set", "podDisruptionBudget.minAvailable=50%")
    assert one(budget, "PodDisruptionBudget")["spec"]["minAvailable"] == "50%"


def test_the_podgroup_crd_is_installed_only_when_asked_and_then_kept() -> None:
    assert _crd_names(render("sched")) == [SCHEDULING_PROFILE_CRD]
    objects = render("sched", "--set", "podGroupCRD.install=true")
    assert _crd_names(objects) == [PODGROUP_CRD, SCHEDULING_PROFILE_CRD]
    crd = one(objects, "CustomResourceDefinition", PODGROUP_CRD)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    shipped = yaml.safe_load((ROOT / "crds" / "podgroup" / "podgroup.yaml").read_text())
    assert crd["spec"] == shipped["spec"]
    # a template, not a file of crds/: `helm template` without --include-crds still renders it
    text = helm("template", "rel", str(CHART), "--set", "podGroupCRD.install=true")
    assert _crd_names([d for d in yaml.safe_load_all(text) if d]) == [PODGROUP_CRD]


def test_names_and_pod_options_reach_every_object() -> None:
    objects = render(
        "sched",
        "--set",
        "fullnameOverride=edge-sched,nameOverride=edge,podAnnotations.team=ml,podLabels.tier=control",
        "--set",
        "imagePullSecrets[0].name=regcred,nodeSelector.role=infra",
        "--set",
        "tolerations[0].key=dedicated,tolerations[0].operator=Exists",
    )
    named = [o for o in objects if o["kind"] != "CustomResourceDefinition"]
    assert all(o["metadata"]["name"].startswith("edge-sched") for o in named), [
        o["metadata"]["name"] for o in named
    ]
    assert {o["metadata"]["labels"]["app.kubernetes.io/name"] for o in named} == {"edge"}
    roles = {(o["kind"], o["metadata"]["name"]) for o in named if o["kind"] in ("Role", "ClusterRole")}
    for binding in (o for o in named if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "edge-sched", "namespace": "sched"}]
    deployment = one(objects, "Deployment")
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"] == {"team": "ml"}
    assert template["metadata"]["labels"]["tier"] == "control"
    assert deployment["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    spec = template["spec"]
    assert spec["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"] == "edge-sched"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["nodeSelector"] == {"role": "infra"}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert one(objects, "Service")["metadata"]["name"] == "edge-sched-metrics"
    test_pod = one(objects, "Pod")
    assert (test_pod["metadata"]["name"], test_pod["spec"]["imagePullSecrets"]) == (
        "edge-sched-test",
        [{"name": "regcred"}],
    )


def test_the_test_pod_runs_the_release_image_under_a_name_the_release_serves() -> None:
    objects = render("sched")
    pod = one(objects, "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    [container] = pod["spec"]["containers"]
    [scheduler] = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["args"]) == (scheduler["image"], ["--version"])
    assert (pod["spec"]["schedulerName"], pod["spec"]["restartPolicy"]) == ("kopf-scheduler", "Never")
    # no default name served: the first profile's
    shipped = one(
        render("sched", "--set", "defaultSchedulerName=", "--set", "shippedProfiles={spreading}"), "Pod"
    )
    assert shipped["spec"]["schedulerName"] == "kopf-scheduler-spreading"
    error = _template_error("--set", "defaultSchedulerName=")
    assert "tests.schedulerName: no schedulerName the release serves" in error


# -- a release installed for real, and `helm test` ---------------------------------------------------------


@pytest.fixture
def bare_cluster(tmp_path: Path) -> Iterator[ClusterHarness]:
    """etcd and kube-apiserver of this test's own, without any CRD: the chart installs both."""
    cluster = DevCluster(tmp_path / "cluster", crds_dir=None, die_with_parent=True)
    atexit.register(cluster.down)
    try:
        try:
            cluster.up()
        except Exception as e:  # ClusterError carries the failing component's log tail
            pytest.fail(f"control plane did not come up: {e}", pytrace=False)
        yield ClusterHarness.of(cluster)
    finally:
        cluster.down()
        atexit.unregister(cluster.down)


def helm_on(cp: ClusterHarness, *args: str) -> str:
    return helm(*args, f"--kubeconfig={cp.kubeconfig}")


def notes_commands(notes: str, program: str) -> list[list[str]]:
    """The commands of the release's NOTES that start with ``program``, split as a shell would."""
    return [shlex.split(line) for line in notes.splitlines() if line.strip().startswith(f"{program} ")]


def crd_exists(cp: ClusterHarness, name: str) -> bool:
    return bool(cp.api.request("GET", f"{CRDS}/{name}").status == 200)


def scheduled_by(cp: ClusterHarness, namespace: str, pod: str) -> dict[str, Any] | None:
    events = cp.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
    found = [e for e in events if e.get("reason") == "Scheduled" and e["regarding"]["name"] == pod]
    return found[0] if found else None


def stand_in_kubelet_for(cp: ClusterHarness, node_agent: Any, namespace: str, name: str) -> str:
    """What a kubelet does with the hook pod once the scheduler bound it to its node: run its container
    (the release's image, its args), then report it: phase Succeeded or Failed, the container terminated
    with its exit code. Returns the container's output."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    pod = wait_until(lambda: cp.api.request("GET", path).status == 200 and cp.get(path), 60, f"pod {name}")
    pod = wait_until(lambda: (p := cp.get(path))["spec"].get("nodeName") and p, 30, f"{name} bound")
    started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    container, _ = node_agent.run(pod["spec"], pod_name=name)
    code = container.wait_exit(60)
    output = container.logs()
    assert code is not None, f"the hook's container did not exit within 60 s:\n{output}"
    [spec] = pod["spec"]["containers"]
    status = {
        "phase": "Succeeded" if code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": spec["name"],
                "image": spec["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": started,
                        "finishedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    }
                },
            }
        ],
    }
    response = cp.api.request(
        "PATCH", f"{path}/status", {"status": status}, content_type="application/merge-patch+json"
    )
    assert response.status == 200, response.text()
    return output


def test_helm_test_passes_on_a_release_whose_scheduler_binds_the_test_pod(
    bare_cluster: ClusterHarness,
) -> None:
    cp, release, namespace = bare_cluster, "kopf-scheduler", "kopf-scheduler"
    [node] = sized_nodes({"helm-node-0": (None, "4", "8Gi")})
    cp.post("/api/v1/nodes", node)
    metrics_port, liveness_port = free_port(), free_port()
    installed = helm_on(
        cp, "install", release, str(CHART), "--namespace", namespace, "--create-namespace",
        "--set", f"podGroupCRD.install=true,replicaCount=1,metrics.port={metrics_port}",
        "--set", f"livenessPort={liveness_port}",
    )  # fmt: skip
    assert crd_exists(cp, SCHEDULING_PROFILE_CRD) and crd_exists(cp, PODGROUP_CRD)
    notes = installed.split("NOTES:", 1)[1]
    deployment = cp.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/kopf-scheduler")

    with kubelet(cp, namespace) as node_agent:
        scheduler, probes = node_agent.run(deployment["spec"]["template"]["spec"])
        wait_probe(scheduler, probes["readiness"], "readiness")
        # ready comes before leading: the Lease may not exist yet when the readiness probe passes
        wait_until(lambda: holder(cp, namespace) == scheduler.name, 60, "leading")
        # the checks the NOTES print work as printed; the Lease names the replica that leads
        outputs = {
            command[2]: kubectl(cp, *command[1:]).stdout for command in notes_commands(notes, "kubectl")
        }
        assert set(outputs) == {"deployment", "lease", "schedulingprofiles"}, notes
        assert outputs["lease"] == scheduler.name

        [helm_test] = notes_commands(notes, "helm")
        assert helm_test[:3] == ["helm", "test", release], helm_test
        helm_binary = str(built_tool("helm", "helm"))
        running = subprocess.Popen(
            [helm_binary, *helm_test[1:], f"--kubeconfig={cp.kubeconfig}", "--timeout=120s"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            output = stand_in_kubelet_for(cp, node_agent, namespace, "kopf-scheduler-test")
            out, _ = running.communicate(timeout=60)
        finally:
            if running.poll() is None:
                running.kill()
                running.wait()
        assert running.returncode == 0, out
        assert "TEST SUITE:     kopf-scheduler-test" in out and "Phase:          Succeeded" in out, out
        assert output.strip().startswith("kopf-scheduler v"), output
        pod = cp.get(f"/api/v1/namespaces/{namespace}/pods/kopf-scheduler-test")
        assert pod["spec"]["nodeName"] == node["metadata"]["name"]
        event = wait_until(lambda: scheduled_by(cp, namespace, "kopf-scheduler-test"), 15, "Scheduled event")
        assert event.get("reportingInstance") == scheduler.name, event
        code, _ = scheduler.terminate()
        assert code == 0, scheduler.tail()

    helm_on(cp, "uninstall", release, "--namespace", namespace)
    gone = cp.api.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/kopf-scheduler")
    assert gone.status == 404
    # Helm never deletes the CRDs of crds/, and the PodGroup CRD carries resource-policy keep
    assert crd_exists(cp, SCHEDULING_PROFILE_CRD) and crd_exists(cp, PODGROUP_CRD)
