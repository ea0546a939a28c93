"""The probes of ``deploy/deployment.yaml`` match what the operator serves: a startup probe on /healthz
sized for large initial lists (liveness waits for it), liveness on /healthz of the liveness port, and
readiness on /readyz beside the metrics (ready when synced and leading or standing by)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def _container() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _port(container: dict[str, Any], name: str) -> int:
    [port] = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return int(port)


def test_startup_probe_gives_the_initial_lists_ten_minutes() -> None:
    container = _container()
    probe = container["startupProbe"]
    assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 600
    assert "initialDelaySeconds" not in container["livenessProbe"]  # the startup probe gates it


def test_liveness_and_readiness_probe_the_ports_the_operator_serves() -> None:
    container = _container()
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"}
    assert f"--liveness-port={_port(container, 'health')}" in container["args"]
    assert f"--metrics-port={_port(container, 'metrics')}" in container["args"]
