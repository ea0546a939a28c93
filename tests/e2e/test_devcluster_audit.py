"""The dev cluster's audit log records every write with its user and answer, and none of the reads; the
ordinary dev users are authenticated but may do nothing until a role is bound to them."""

from __future__ import annotations

import pytest
import yaml
from operator_harness import settled_audit

from kopf_scheduler.devcluster import ApiClient
from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest
from kopf_scheduler.devcluster.pki import ADMIN_USER, DEV_USERS

pytestmark = pytest.mark.e2e


def _client_for(harness: ClusterHarness, user: str) -> ApiClient:
    config = yaml.safe_load(harness.cluster.user_kubeconfig(user).read_text())
    return ApiClient(
        server=harness.server, token=config["users"][0]["user"]["token"], ca_file=harness.ca_file
    )


def test_writes_are_recorded_with_user_and_code_and_reads_are_not(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("audit")
    control_plane.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest("p", ns))
    control_plane.get(f"/api/v1/namespaces/{ns}/pods/p")
    user = DEV_USERS[0]
    refused = _client_for(control_plane, user).request(
        "DELETE", f"/api/v1/namespaces/{ns}/pods/p", {"gracePeriodSeconds": 0}
    )
    assert refused.status == 403, refused.text()

    records = [r for r in settled_audit(control_plane, ns) if r.namespace == ns and r.name == "p"]
    assert [(r.verb, r.user, r.code) for r in records] == [("create", ADMIN_USER, 201), ("delete", user, 403)]
    assert records[0].received <= records[0].completed <= records[1].received
