"""Fault tier: the leader's right to its Lease is revoked at runtime while pods keep arriving. The
operator runs as a dev user with exactly the permissions ``deploy/rbac.yaml`` grants (the ClusterRole for
its work, the Role for its Lease); deleting the Lease's RoleBinding makes every renewal fail with 403
while bindings would still be allowed. The leader must stop within the renew deadline: from the API
server's audit log, no binding by it received later than the renew deadline after the revocation, and
the process ends with exit code 1 (as kube-scheduler does), its log naming the lost Lease."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from operator_harness import RENEW_DEADLINE, Operators, Scope, settled_audit, wait_until

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

USER = "dev-user-c"
RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
PATHS = {
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


def _grant_deployed_rbac(cp: ClusterHarness, scope: Scope) -> str:
    """The shipped RBAC, renamed for this test, bound to ``USER``, the Lease Role in the test's
    namespace; returns the path of the Lease's RoleBinding."""
    lease_binding = ""
    for doc in yaml.safe_load_all(RBAC.read_text()):
        kind = doc["kind"]
        doc["metadata"]["name"] = scope.name(doc["metadata"]["name"])
        if kind in ("Role", "RoleBinding"):
            doc["metadata"]["namespace"] = scope.namespace
        if "roleRef" in doc:
            doc["roleRef"]["name"] = scope.name(doc["roleRef"]["name"])
            doc["subjects"] = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]
        collection = PATHS[kind].format(ns=scope.namespace)
        path = scope.delete_later(f"{collection}/{doc['metadata']['name']}")
        cp.post(collection, doc)
        if kind == "RoleBinding":
            lease_binding = path
    assert lease_binding
    return lease_binding


def test_a_leader_that_may_no_longer_renew_stops(
    control_plane: ClusterHarness, operators: Operators, scope: Scope
) -> None:
    lease_binding = _grant_deployed_rbac(control_plane, scope)
    scope.nodes(4)
    operator = operators.start(
        "op-revoked", lease_namespace=scope.namespace, kubeconfig=control_plane.cluster.user_kubeconfig(USER)
    )
    operator.wait_leading()
    for i in range(20):
        scope.create_pod(f"v{i:03d}", requests={"cpu": "10m"})
    wait_until(lambda: len(scope.bound()) >= 20, 30, "the first pods bound")

    def keep_creating() -> None:
        """One pod after another until a second after the operator has ended, and past the renew
        deadline after the revocation however soon it ended (at most 800 in all)."""
        ended_at = None
        for i in range(20, 800):
            scope.create_pod(f"v{i:03d}", requests={"cpu": "10m"})
            if operator.popen.poll() is not None:
                ended_at = ended_at or time.monotonic()
                now = time.monotonic()
                if now > ended_at + 1.0 and now > revoked_at + RENEW_DEADLINE + 1.5:
                    return

    creating = threading.Thread(target=keep_creating)
    control_plane.request("DELETE", lease_binding, expect=(200,))
    revoked_at = time.monotonic()
    creating.start()
    try:
        code = operator.popen.wait(timeout=RENEW_DEADLINE + 20)
    finally:
        creating.join()
    assert code == 1, operator.tail()
    assert "lost the lease" in operator.log(), operator.tail()

    records = settled_audit(control_plane, scope.namespace)
    [revoked] = [
        r
        for r in records
        if r.verb == "delete" and r.resource == "rolebindings" and r.namespace == scope.namespace
    ]
    bindings = [r for r in records if r.is_binding and r.user == USER and r.namespace == scope.namespace]
    assert any(r.succeeded for r in bindings), "it bound pods while it held the Lease"
    late = [r.name for r in bindings if r.received > revoked.completed + timedelta(seconds=RENEW_DEADLINE)]
    assert late == [], f"bindings more than the renew deadline after the revocation: {late}"
    created_late = [
        r
        for r in records
        if r.verb == "create"
        and r.resource == "pods"
        and not r.subresource
        and r.namespace == scope.namespace
        and r.received > revoked.completed + timedelta(seconds=RENEW_DEADLINE)
    ]
    assert created_late, "pods kept arriving past the renew deadline: a leader that went on would bind them"
