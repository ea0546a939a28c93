"""`up` applies every manifest in the crds folder and its subfolders (as the repository keeps the PodGroup CRD
in crds/podgroup/) and returns only once the CRDs are Established; a kustomization is not applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.devcluster import DevCluster

pytestmark = pytest.mark.e2e

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.kopf-scheduler.dev
spec:
  group: e2e.kopf-scheduler.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
"""


def test_crds_applied_and_established(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    (crds / "widget.yaml").write_text(CRD)
    (crds / "README.txt").write_text("not a manifest, ignored\n")
    (crds / "gadgets").mkdir()
    (crds / "gadgets" / "gadget.yaml").write_text(CRD.replace("widget", "gadget").replace("Widget", "Gadget"))
    (crds / "gadgets" / "kustomization.yaml").write_text("resources: [gadget.yaml]\n")
    with DevCluster(tmp_path / "state", crds_dir=crds, die_with_parent=True) as cluster:
        api = cluster.client()
        for plural in ("widgets", "gadgets"):
            crd = api.request(
                "GET",
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.e2e.kopf-scheduler.dev",
            )
            assert crd.ok, crd.text()
            conditions = {c["type"]: c["status"] for c in crd.json()["status"]["conditions"]}
            assert conditions["Established"] == "True"
        widget = {"apiVersion": "e2e.kopf-scheduler.dev/v1", "kind": "Widget", "metadata": {"name": "w"}}
        created = api.request("POST", "/apis/e2e.kopf-scheduler.dev/v1/namespaces/default/widgets", widget)
        assert created.status == 201, created.text()
