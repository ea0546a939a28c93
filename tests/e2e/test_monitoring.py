"""The monitoring shipped in ``deploy/monitoring/`` queries only what the scheduler serves: every metric
named in the Grafana dashboard's panels and in the PrometheusRule's alerts is on a live operator's
``/metrics`` (scraped over HTTPS with a token, as deployed) after it has bound a pod, failed one, and
refused a profile; the operator's own gauges say what happened (leading 1, one profile refused, one
binding ok)."""

from __future__ import annotations

import json
import re
import ssl
import urllib.request
from pathlib import Path

import pytest
import yaml
from operator_harness import Operators, Scope, wait_profile, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

MONITORING = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
METRIC = re.compile(r"\b((?:kopf_scheduler|scheduler|leader_election)_[a-z_]+)\b")
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def queried_metrics() -> dict[str, str]:
    """metric name -> where it is queried."""
    found: dict[str, str] = {}
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in METRIC.findall(target["expr"]):
                found.setdefault(name, f"dashboard panel {panel['title']!r}")
    rules = yaml.safe_load((MONITORING / "alerts.yaml").read_text())
    for group in rules["spec"]["groups"]:
        for rule in group["rules"]:
            assert {"alert", "expr", "for", "labels", "annotations"} <= rule.keys(), rule
            assert rule["labels"]["severity"] in ("warning", "critical") and rule["annotations"]["summary"]
            for name in METRIC.findall(rule["expr"]):
                found.setdefault(name, f"alert {rule['alert']}")
    return found


def families(text: str) -> dict[str, float]:
    """Sample name (labels dropped) -> the sum of its values."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def test_every_queried_metric_is_served(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    scope.nodes(1)
    operator = operators.start(
        "op-monitoring", lease_namespace=scope.namespace, ports=True, secure_metrics=True
    )
    operator.wait_leading()
    scope.create_pod("fits")
    scope.create_pod("huge", requests={"cpu": "100"})
    refused = scope.name("refused")
    scope.create_profile(
        refused,
        {
            "schedulerName": refused,
            "percentageOfNodesToScore": 100,
            "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}},
        },
    )
    scope.wait_bound("fits")
    scope.wait_event("FailedScheduling", "huge")
    wait_profile(control_plane, refused, "False")

    def scrape() -> str:  # as Prometheus scrapes the deployed scheduler: HTTPS with a bearer token
        request = urllib.request.Request(
            f"https://127.0.0.1:{operator.metrics_port}/metrics",
            headers={"Authorization": f"Bearer {control_plane.token}"},
        )
        with urllib.request.urlopen(request, timeout=5, context=ssl._create_unverified_context()) as resp:
            return str(resp.read().decode())

    served = wait_until(
        lambda: (f := families(scrape())).get("kopf_scheduler_profiles", 0) >= 1 and f,
        10,
        "profiles exported",
    )
    text = scrape()
    queried = queried_metrics()
    assert len(queried) >= 8, queried
    missing = {
        name: where
        for name, where in queried.items()
        if not any(f"{name}{suffix}" in served for suffix in ("", *SUFFIXES)) and name not in served
    }
    assert missing == {}, missing
    assert 'leader_election_master_status{name="kopf-scheduler"} 1.0' in text
    assert re.search(r'kopf_scheduler_profiles\{accepted="false"\} [1-9]', text), text
    assert re.search(r'kopf_scheduler_binding_requests_total\{result="ok"\} [1-9]', text), text
