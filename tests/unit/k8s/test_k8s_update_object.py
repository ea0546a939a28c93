"""``KubeClient.update_object``: a PUT of the object (without managedFields, which the API server then
keeps), the stored object back, and the API server's own message in the ``APIError`` of a refusal."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.k8s.client import KubeClient
from kopf_scheduler.k8s.rest import Response

PATH = "/api/v1/persistentvolumes/pv-1"
VOLUME: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "pv-1", "resourceVersion": "7", "managedFields": [{"manager": "kubectl"}]},
    "spec": {"claimRef": {"namespace": "ns", "name": "data", "uid": "u"}},
}


def _client(rest: FakeAPI) -> KubeClient:
    return KubeClient(rest)  # type: ignore[arg-type]


async def test_put_without_managed_fields_returns_the_stored_object() -> None:
    stored = {**VOLUME, "metadata": {"name": "pv-1", "resourceVersion": "8"}}
    rest = FakeAPI().script("PUT", PATH, Response(200, json.dumps(stored).encode()))
    assert await _client(rest).update_object(PATH, VOLUME) == stored
    [call] = rest.requests
    assert (call.method, call.path) == ("PUT", PATH)
    assert call.body["metadata"] == {"name": "pv-1", "resourceVersion": "7"}
    assert call.body["spec"] == VOLUME["spec"]


@pytest.mark.parametrize("status", [409, 404, 422])
async def test_a_refusal_carries_the_api_servers_message(status: int) -> None:
    message = 'Operation cannot be fulfilled on persistentvolumes "pv-1": the object has been modified'
    body = json.dumps({"kind": "Status", "message": message}).encode()
    rest = FakeAPI().script("PUT", PATH, Response(status, body))
    with pytest.raises(APIError) as caught:
        await _client(rest).update_object(PATH, VOLUME)
    assert (caught.value.status, caught.value.message) == (status, message)
