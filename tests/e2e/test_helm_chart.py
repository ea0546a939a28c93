"""The Helm chart ``charts/kopf-scheduler`` with helm built from the Go module proxy (build-helm.sh): it
lints clean, renders into objects the real API server accepts (a server-side dry run of everything,
CRDs included), grants exactly the RBAC of ``deploy/`` (both read the same files), passes the operator
only flags ``kopf-scheduler run`` knows, and its options (ServiceMonitor, PodDisruptionBudget, profiles,
a serving certificate, the Lease) turn into what they say."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from operator_harness import Scope, kubectl

from kopf_scheduler.cli import run as run_cli
from kopf_scheduler.devcluster.binaries import built_tool
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-scheduler"


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
