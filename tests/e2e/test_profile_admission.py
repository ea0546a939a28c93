"""The SchedulingProfile CRD's CEL rules on the real API server: the CRD is Established with them (their
estimated cost within the budget), `kubectl apply` of a profile breaking one is refused with the rule's
message at the field, one error for one mistake; a profile they cannot fault (unknown plugins, a queue sort
that replaces PrioritySort) is admitted and left to the operator; `kubectl explain` describes the fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
from operator_harness import kubectl

from kopf_scheduler.api.schema import GROUP, PLURAL
from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e


def manifest(name: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": name},
            "spec": {"schedulerName": f"{name}-scheduler", **spec},
        }
    )


def extender(**fields: Any) -> dict[str, Any]:
    return {"urlPrefix": "http://extender.example", **fields}


REFUSED = [
    (
        {"plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 0}]}}},
        "spec.plugins.score.enabled[0].weight: Invalid value: 0: must be > 0",
    ),
    (
        {"plugins": {"multiPoint": {"enabled": [{"name": "ImageLocality", "weight": 101}]}}},
        "spec.plugins.multiPoint.enabled[0].weight: Invalid value: 101: must be <= 100",
    ),
    (
        {"percentageOfNodesToScore": 101},
        "spec.percentageOfNodesToScore: Invalid value: 101: must be <= 100",
    ),
    (
        {"plugins": {"queueSort": {"enabled": [{"name": "PrioritySort"}, {"name": "OtherSort"}]}}},
        "spec.plugins.queueSort: Invalid value: "
        "exactly one queue sort plugin is required: enable at most one",
    ),
    (
        {"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}]}}},
        "spec.plugins.queueSort: Invalid value: exactly one queue sort plugin is required, got 2: "
        "PrioritySort still sorts from the defaults "
        "(disable it in queueSort.disabled or multiPoint.disabled)",
    ),
    (
        {"plugins": {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}}},
        "spec.plugins.queueSort: Invalid value: exactly one queue sort plugin is required, got 0: "
        "PrioritySort is disabled and no other is enabled",
    ),
    (
        {"plugins": {"placementScore": {"enabled": [{"name": "NodeResourcesFit"}]}}},
        "spec.plugins.placementScore.enabled: Invalid value: no plugin extends placementScore: "
        "kopf-scheduler has no plugin at kube-scheduler v1.37's pod group extension points "
        "(GenericWorkload); this set may only disable",
    ),
    (
        {"extenders": [extender(prioritizeVerb="prioritize")]},
        "spec.extenders[0].weight: Invalid value: "
        "must be > 0 when prioritizeVerb is set (must have a positive weight applied to it)",
    ),
    (
        {"extenders": [extender(weight=-1)]},
        "spec.extenders[0].weight: Invalid value: -1: must not be negative",
    ),
    (
        {"extenders": [extender(bindVerb="bind"), extender(bindVerb="bind")]},
        "spec.extenders: Invalid value: only one extender can implement bind",
    ),
    (
        {"extenders": [extender(httpTimeout="5 s")]},
        'spec.extenders[0].httpTimeout: Invalid value: "5 s": must be a Go duration ("5s", "1m30s")',
    ),
    (
        {"extenders": [extender(httpTimeout="-1ns")]},
        'spec.extenders[0].httpTimeout: Invalid value: "-1ns": must not be negative (every extender call '
        "has a time limit)",
    ),
    (
        {"extenders": [extender(httpTimeout="5m1ns")]},
        'spec.extenders[0].httpTimeout: Invalid value: "5m1ns": must be at most 300s',
    ),
]


def test_the_crd_is_established_with_its_rules(control_plane: ClusterHarness) -> None:
    served = json.loads(kubectl(control_plane, "get", "crd", f"{PLURAL}.{GROUP}", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in served["status"]["conditions"]}
    assert conditions["Established"] == "True", served["status"]
    assert "x-kubernetes-validations" in json.dumps(served["spec"]["versions"][0]["schema"])


@pytest.mark.parametrize(("spec", "error"), REFUSED, ids=lambda v: None if isinstance(v, dict) else v[:40])
def test_kubectl_apply_is_refused_with_the_rules_message(
    control_plane: ClusterHarness, spec: dict[str, Any], error: str
) -> None:
    refused = kubectl(control_plane, "apply", "-f", "-", check=False, input=manifest("refused", spec))
    assert refused.returncode != 0
    assert error in refused.stderr, refused.stderr
    # one error for one mistake: no OpenAPI bound repeats the rule, no second rule fires
    assert refused.stderr.count("Invalid value") == 1, refused.stderr
    missing = kubectl(control_plane, "get", "sprof", "refused", check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr, missing.stdout


ADMITTED = [
    # what CEL cannot know is the operator's to refuse: plugin names, and a queue sort replacing
    # PrioritySort where the profile disables it
    {"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin", "weight": 100}]}}},
    {"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "PrioritySort"}]}}},
    {"plugins": {"queueSort": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "*"}]}}},
    {"plugins": {"multiPoint": {"enabled": [{"name": "OtherSort"}], "disabled": [{"name": "*"}]}}},
    {"plugins": {"placementScore": {"disabled": [{"name": "*"}]}}},
    {"extenders": [extender(prioritizeVerb="p", weight=1, httpTimeout="1m30s"), extender(bindVerb="b")]},
    {"extenders": [extender(httpTimeout="0"), extender(httpTimeout=""), extender(httpTimeout="300s")]},
]


@pytest.mark.parametrize("spec", ADMITTED)
def test_what_the_rules_cannot_fault_is_admitted(control_plane: ClusterHarness, spec: dict[str, Any]) -> None:
    kubectl(control_plane, "apply", "--dry-run=server", "-f", "-", input=manifest("admitted", spec))


def test_kubectl_explain_describes_the_score_plugins(control_plane: ClusterHarness) -> None:
    out = kubectl(control_plane, "explain", "sprof.spec.plugins.score").stdout
    words = " ".join(out.split())  # kubectl wraps descriptions at 80 columns
    assert (
        "DESCRIPTION: Plugins that rank the feasible nodes; weight multiplies each plugin's scores." in words
    )
    assert "enabled <[]Object> Plugins to run, after the default ones that are not disabled" in words, out
    weight = " ".join(
        kubectl(control_plane, "explain", "sprof.spec.plugins.score.enabled.weight").stdout.split()
    )
    assert "Multiplies the plugin's normalized 0-100 node scores" in weight, weight
