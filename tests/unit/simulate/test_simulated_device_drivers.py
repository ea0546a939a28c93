"""``simulate`` with devices that have binding conditions (``DRADeviceBindingConditions``): the simulated
driver reports them true once the scheduler has written the allocation, so the pod's PreBind wait ends
and the pod is bound where its device is, instead of timing out after ``bindingTimeout``; the claim
records the conditions as a driver writes them. A device without binding conditions gets no entry."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.simulate.loader import load_objects
from kopf_scheduler.simulate.run import simulate
from kopf_scheduler.testing import make_node, make_pod


def _cluster(binding_conditions: list[str] | None) -> list[dict[str, Any]]:
    device: dict[str, Any] = {"name": "gpu-0"}
    if binding_conditions is not None:
        device["bindingConditions"] = binding_conditions
        device["bindingFailureConditions"] = ["AttachFailed"]
    pod = make_pod().name("p1").namespace("default").obj()
    pod["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimName": "c1"}]
    return [
        {"apiVersion": "v1", "kind": "Node", **make_node().name("n1").obj()},
        {"apiVersion": "v1", "kind": "Node", **make_node().name("n2").obj()},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "n2-gpu"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n2",
                "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1},
                "devices": [device],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c1", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}},
        },
        {"apiVersion": "v1", "kind": "Pod", **pod},
    ]


@pytest.mark.parametrize("conditions", [["Attached"], ["Attached", "Healthy"], None])
async def test_a_pod_whose_device_has_binding_conditions_is_bound_where_the_device_is(
    conditions: list[str] | None,
) -> None:
    cluster = load_objects(("test", obj) for obj in _cluster(conditions))
    result = await simulate(cluster, [], seed=1)
    outcome = next(iter(result.outcomes.values()))
    assert (outcome.node, outcome.message) == ("n2", None)
    claim = result.claims.claim("default", "c1")
    assert claim is not None
    status = claim["status"]
    assert status["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    if conditions is None:
        assert "devices" not in status
        return
    (entry,) = status["devices"]
    assert {k: entry[k] for k in ("driver", "pool", "device")} == {
        "driver": "gpu.example.com",
        "pool": "n2",
        "device": "gpu-0",
    }
    assert [(c["type"], c["status"]) for c in entry["conditions"]] == [(c, "True") for c in conditions]
