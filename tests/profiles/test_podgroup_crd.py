"""The PodGroup CRD in crds/podgroup/ serves the kind the scheduler watches, with scheduler-plugins' v1alpha1
fields, a structural schema, the status subresource the scheduler writes, and the columns `kubectl get
podgroups` shows. It is installed on its own (`kubectl apply -k crds/podgroup/`), never by deploy/: the
CRD belongs to scheduler-plugins' API group, and `kubectl delete -k deploy/` must not delete it and every
PodGroup with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.framework.objects import POD_GROUPS

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "podgroup" / "podgroup.yaml"


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


def _kustomized(folder: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize folder`` emits (its ``resources``: files and folders, followed)."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    objects: list[dict[str, Any]] = []
    for entry in kustomization["resources"]:
        path = (folder / entry).resolve()
        if path.is_dir():
            objects += _kustomized(path)
        else:
            objects += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return objects


def _crd_names(objects: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objects if o["kind"] == "CustomResourceDefinition"]


def test_deploy_installs_only_its_own_crd_and_podgroup_is_applied_apart() -> None:
    assert _crd_names(_kustomized(ROOT / "deploy")) == ["schedulingprofiles.kopf-scheduler.io"]
    assert _crd_names(_kustomized(ROOT / "crds" / "podgroup")) == ["podgroups.scheduling.x-k8s.io"]


def test_the_chart_installs_it_only_from_a_template_it_keeps() -> None:
    chart = ROOT / "charts" / "kopf-scheduler"
    # helm installs crds/ unconditionally: the PodGroup CRD is not there but behind podGroupCRD.install
    assert sorted(p.name for p in (chart / "crds").iterdir()) == ["schedulingprofile.yaml"]
    assert (chart / "files" / "podgroup-crd.yaml").resolve() == CRD.resolve()
    template = (chart / "templates" / "podgroup-crd.yaml").read_text()
    assert "helm.sh/resource-policy" in template and "keep" in template
    assert yaml.safe_load((chart / "values.yaml").read_text())["podGroupCRD"] == {"install": False}


def test_the_scheduler_may_write_its_status() -> None:
    role = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "rbac.yaml").read_text())
        if d["kind"] == "ClusterRole"
    )
    status_rules = [
        r
        for r in role["rules"]
        if "podgroups/status" in r["resources"] and "scheduling.x-k8s.io" in r["apiGroups"]
    ]
    assert [r["verbs"] for r in status_rules] == [["patch"]]
