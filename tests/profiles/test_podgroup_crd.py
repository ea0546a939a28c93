"""The PodGroup CRD in crds/ serves the kind the scheduler watches, with scheduler-plugins' v1alpha1 fields,
a structural schema, the status subresource the scheduler writes, and the columns `kubectl get podgroups`
shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.framework.objects import POD_GROUPS

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "podgroup.yaml"


def _crd() -> dict[str, Any]:
    return dict(yaml.safe_load(CRD.read_text()))


def test_it_serves_the_watched_kind() -> None:
    crd = _crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{POD_GROUPS.plural}.{POD_GROUPS.group}"
    assert (spec["group"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "scheduling.x-k8s.io",
        "PodGroup",
        "podgroups",
    )
    assert spec["scope"] == "Namespaced" and spec["names"]["shortNames"] == ["pg", "pgs"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (POD_GROUPS.version, True, True)
    assert version["subresources"] == {"status": {}}


def test_fields_are_those_of_scheduler_plugins_v1alpha1() -> None:
    schema = _crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec, status = schema["spec"]["properties"], schema["status"]["properties"]
    assert set(spec) == {"minMember", "minResources", "scheduleTimeoutSeconds"}
    assert spec["minMember"] == {**spec["minMember"], "type": "integer", "format": "int32", "minimum": 1}
    assert spec["minResources"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    assert set(status) == {
        "phase",
        "occupiedBy",
        "scheduled",
        "running",
        "succeeded",
        "failed",
        "scheduleStartTime",
    }
    assert status["scheduleStartTime"]["format"] == "date-time"


def test_printer_columns_tell_where_a_gang_stands() -> None:
    columns = {c["name"]: c["jsonPath"] for c in _crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "MinMember": ".spec.minMember",
        "Scheduled": ".status.scheduled",
        "Running": ".status.running",
        "Succeeded": ".status.succeeded",
        "Failed": ".status.failed",
        "Age": ".metadata.creationTimestamp",
    }


def test_schema_is_structural() -> None:
    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if "properties" in node or "additionalProperties" in node:
                assert node.get("type") == "object", f"{path}: an object without type: object"
            for key, value in node.items():
                walk(value, f"{path}.{key}")

    walk(_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"], "openAPIV3Schema")


def test_deploy_applies_it_and_may_write_its_status() -> None:
    assert "podgroup.yaml" in yaml.safe_load((ROOT / "crds" / "kustomization.yaml").read_text())["resources"]
    role = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text())
        if d["kind"] == "ClusterRole"
    )
    status_rules = [r for r in role["rules"] if "podgroups/status" in r["resources"]]
    assert [r["verbs"] for r in status_rules] == [["patch"]]
