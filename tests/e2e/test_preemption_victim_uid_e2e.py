"""A preemption victim is deleted only if it is still the pod the scheduler chose: against the real API
server, a pod created again under a victim's name (same name, new UID) is neither marked nor deleted,
and the eviction of the gone victim is not an error (the DELETE's UID precondition fails with 409)."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s import KubeClient

pytestmark = pytest.mark.e2e


def create(cp: ClusterHarness, ns: str, name: str, **spec: Any) -> PodInfo:
    return PodInfo(cp.post(f"/api/v1/namespaces/{ns}/pods", pod_manifest(name, ns, **spec)))


def test_the_api_server_refuses_requests_for_another_uid(control_plane: ClusterHarness) -> None:
    """What ``k8s/eviction.py`` relies on: 409 for a DELETE whose UID precondition fails, 422 naming
    ``metadata.uid`` for a status patch carrying another UID; the pod is left as it was."""
    ns = control_plane.create_namespace("victim-uid")
    create(control_plane, ns, "low")
    path = f"/api/v1/namespaces/{ns}/pods/low"
    response = control_plane.api.request("DELETE", path, {"preconditions": {"uid": "not-its-uid"}})
    assert response.status == 409, response.text()
    assert "the UID in the precondition (not-its-uid) does not match" in response.text(), response.text()
    patch = {
        "metadata": {"uid": "not-its-uid"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]},
    }
    response = control_plane.api.request(
        "PATCH", path + "/status", patch, content_type="application/strategic-merge-patch+json"
    )
    assert response.status == 422 and "metadata.uid" in response.text(), response.text()
    pod = control_plane.get(path)
    assert not pod["metadata"].get("deletionTimestamp"), dumps(pod["metadata"])
    assert "DisruptionTarget" not in {c["type"] for c in pod["status"].get("conditions") or ()}


async def test_a_victim_replaced_under_its_name_is_left_alone(control_plane: ClusterHarness) -> None:
    ns = control_plane.create_namespace("victim-uid")
    victim = create(control_plane, ns, "low")
    preemptor = create(control_plane, ns, "high")
    control_plane.delete(f"/api/v1/namespaces/{ns}/pods/low")  # unbound: gone at once
    replacement = create(control_plane, ns, "low")
    assert replacement.uid != victim.uid
    async with KubeClient.from_environment(control_plane.kubeconfig) as client:
        await client.evict(victim, preemptor, "node-1")  # not an error
    pod = control_plane.get(f"/api/v1/namespaces/{ns}/pods/low")
    assert pod["metadata"]["uid"] == replacement.uid
    assert not pod["metadata"].get("deletionTimestamp"), dumps(pod["metadata"])
    conditions = {c["type"] for c in pod["status"].get("conditions") or ()}
    assert "DisruptionTarget" not in conditions, dumps(pod["status"])
    events = control_plane.get(
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events?fieldSelector=reason%3DPreempted"
    )
    assert events["items"] == []
