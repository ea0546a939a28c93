"""Device binding conditions (DRADeviceBindingConditions, beta and on in v1.37) under kube-scheduler v1.37.2
and under kopf-scheduler, each on a fresh identical cluster, with a fake DRA driver in the test.

The driver publishes one ResourceSlice for all nodes with two fabric devices, ``dev-a`` and ``dev-b``; each
``bindsToNode`` and has the binding condition ``Attached`` and the failure condition ``AttachFailed``. A
loop of the test stands in for the driver's controller: it watches the claims (polling) and, for claim
``ready`` once it is allocated, sets ``Attached`` true in the claim's ``status.devices`` through the
status subresource. It never does so for claim ``never``. Two profiles: ``bc-patient`` (the default
``bindingTimeout``, 10m) and ``bc-impatient`` (``bindingTimeout: 3s``), the same for both schedulers
(KubeSchedulerConfiguration profiles; SchedulingProfiles for kopf-scheduler).

1. Pod ``ready`` (claim ``ready``: ``dev-a``) under ``bc-patient``, then at once pod ``plain`` (no claim):
   PreBind records ``BindingConditionsPending`` and waits; ``plain`` is bound meanwhile (the wait holds
   no scheduling loop); once the driver reports ``Attached``, ``ready`` is bound. The claim's allocation
   carries the device's binding conditions, the node by name (``bindsToNode``) and an
   ``allocationTimestamp``.
2. Pod ``never`` (claim ``never``: ``dev-b``) under ``bc-impatient``: PreBind times out after 3 s
   (``device binding timeout: context deadline exceeded``), the pod is unreserved and retried after
   backoff; the next attempt finds the claim timed out, not available on the node, and deallocates it
   (PostFilter), and the cycle starts again. Compared: the distinct events of the pod and the claim's
   first status writes (audit log), once two timeouts and one deallocation have been reported.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_harness import PROFILES, fresh_cluster, settled_audit, sized_nodes, wait_profile, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

NS = "bc"
NODE = "bc-0"
DRIVER = "fabric.e2e.example"
RESOURCE = "/apis/resource.k8s.io/v1"
CLAIMS = f"{RESOURCE}/namespaces/{NS}/resourceclaims"
TIMEOUT = 90.0
PATIENT, IMPATIENT = "bc-patient", "bc-impatient"
PROFILE_ARGS = {PATIENT: {}, IMPATIENT: {"bindingTimeout": "3s"}}
PREBIND_TIMEOUT = (
    'running PreBind plugin "DynamicResources": device binding timeout: context deadline exceeded'
)


def fabric_device(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"name": {"string": name}},
        "bindsToNode": True,
        "bindingConditions": ["Attached"],
        "bindingFailureConditions": ["AttachFailed"],
    }


def objects() -> list[tuple[str, dict[str, Any]]]:
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "fabric"},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }
    fabric = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {
            "driver": DRIVER,
            "allNodes": True,
            "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
            "devices": [fabric_device("dev-a"), fabric_device("dev-b")],
        },
    }
    return [(f"{RESOURCE}/deviceclasses", device_class), (f"{RESOURCE}/resourceslices", fabric)]


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    nodes = sized_nodes({NODE: (None, "4", "8Gi")})
    return fresh_cluster(state_dir, nodes, namespaces=[NS], objects=objects())


def kube_profiles() -> list[dict[str, Any]]:
    out = []
    for name, args in PROFILE_ARGS.items():
        body: dict[str, Any] = {"schedulerName": name}
        if args:
            typed = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs", **args}
            body["pluginConfig"] = [{"name": "DynamicResources", "args": typed}]
        out.append(body)
    return out


def apply_profiles(cp: ClusterHarness, _: pytest.FixtureRequest) -> None:
    for name, args in PROFILE_ARGS.items():
        spec: dict[str, Any] = {"schedulerName": name}
        if args:
            spec["pluginConfig"] = [{"name": "DynamicResources", "args": args}]
        body = {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": name},
            "spec": spec,
        }
        cp.post(PROFILES, body)
        wait_profile(cp, name, "True", timeout=30.0)


class FakeDriver:
    """Sets ``Attached`` true for the devices of claim ``ready`` once it is allocated (polling the claims)."""

    def __init__(self, cp: ClusterHarness) -> None:
        self.cp = cp
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                for claim in self.cp.get(CLAIMS)["items"]:
                    self._look_at(claim)
            except ApiError as e:
                if "HTTP 409" not in str(e):  # a conflict: the next round sees the claim again
                    self.errors.append(str(e))

    def _look_at(self, claim: dict[str, Any]) -> None:
        status = claim.get("status") or {}
        allocation = status.get("allocation")
        name = claim["metadata"]["name"]
        if name != "ready" or allocation is None or status.get("devices"):
            return
        now = _now()
        status["devices"] = [
            {
                "driver": r["driver"],
                "pool": r["pool"],
                "device": r["device"],
                "conditions": [
                    {
                        "type": "Attached",
                        "status": "True",
                        "reason": "Attached",
                        "message": "attached to the node",
                        "lastTransitionTime": now,
                    }
                ],
            }
            for r in allocation["devices"]["results"]
        ]
        self.cp.request("PUT", f"{CLAIMS}/{name}/status", claim)

    @contextlib.contextmanager
    def running(self) -> Iterator[FakeDriver]:
        self.thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            self.thread.join(10)


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def claim_body(name: str, device: str) -> dict[str, Any]:
    selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].name == "{device}"'}}
    request = {"name": "fabric", "exactly": {"deviceClassName": "fabric", "selectors": [selector]}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"devices": {"requests": [request]}},
    }


def claim_pod(name: str, claim: str, profile: str) -> dict[str, Any]:
    body = pod_manifest(name, NS, requests={"cpu": "100m"}, schedulerName=profile)
    body["spec"]["resourceClaims"] = [{"name": "fabric", "resourceClaimName": claim}]
    return body


def events(cp: ClusterHarness, pod: str) -> list[dict[str, Any]]:
    items = cp.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3D{pod}")["items"]
    return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")


def distinct_events(cp: ClusterHarness, pod: str) -> list[tuple[str, str, str]]:
    """(type, reason, message) of the pod's events, each once, in the order first seen."""
    out: list[tuple[str, str, str]] = []
    for e in events(cp, pod):
        key = (str(e.get("type")), str(e.get("reason")), str(e.get("message")))
        if key not in out:
            out.append(key)
    return out


def bound_at(cp: ClusterHarness, pod: str) -> str:
    return str(
        wait_until(
            lambda: cp.get(f"/api/v1/namespaces/{NS}/pods/{pod}")["spec"].get("nodeName"),
            TIMEOUT,
            f"{pod} bound",
        )
    )


def binding_times(cp: ClusterHarness) -> dict[str, str]:
    """Per pod, the time of its Scheduled event."""
    out = {}
    for e in cp.get(f"/api/v1/namespaces/{NS}/events")["items"]:
        if e.get("reason") == "Scheduled":
            out[e["involvedObject"]["name"]] = str(e.get("eventTime") or e.get("lastTimestamp"))
    return out


def ready_case(cp: ClusterHarness) -> dict[str, Any]:
    cp.post(CLAIMS, claim_body("ready", "dev-a"))
    cp.post(f"/api/v1/namespaces/{NS}/pods", claim_pod("ready", "ready", PATIENT))
    wait_until(
        lambda: any(r == "BindingConditionsPending" for _, r, _ in distinct_events(cp, "ready")),
        TIMEOUT,
        "ready's PreBind waiting",
    )
    cp.post(
        f"/api/v1/namespaces/{NS}/pods",
        pod_manifest("plain", NS, requests={"cpu": "100m"}, schedulerName=PATIENT),
    )
    plain_node = bound_at(cp, "plain")
    ready_unbound_when_plain_bound = not cp.get(f"/api/v1/namespaces/{NS}/pods/ready")["spec"].get("nodeName")
    node = bound_at(cp, "ready")
    claim = cp.get(f"{CLAIMS}/ready")
    status = claim["status"]
    allocation = dict(status["allocation"])
    stamped = bool(allocation.pop("allocationTimestamp", None))
    return {
        "plain bound while ready waited": ready_unbound_when_plain_bound and plain_node == NODE,
        "ready": node,
        "allocation": allocation,
        "allocation timestamp": stamped,
        "reserved for": [r["name"] for r in status.get("reservedFor") or ()],
        "events": [e for e in distinct_events(cp, "ready") if e[1] != "Scheduled"],
    }


def never_case(cp: ClusterHarness) -> dict[str, Any]:
    cp.post(CLAIMS, claim_body("never", "dev-b"))
    cp.post(f"/api/v1/namespaces/{NS}/pods", claim_pod("never", "never", IMPATIENT))

    def enough() -> list[tuple[str, str, str]] | None:
        seen = distinct_events(cp, "never")
        failures = [m for _, r, m in seen if r == "FailedScheduling"]
        timeouts = sum(
            int(e.get("count") or (e.get("series") or {}).get("count") or 1)
            for e in events(cp, "never")
            if e.get("message") == PREBIND_TIMEOUT
        )
        return seen if timeouts >= 2 and len(failures) >= 2 else None

    seen = wait_until(
        enough, TIMEOUT, "never's PreBind timed out twice and its claim deallocated", interval=0.5
    )
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/never")
    writes = [
        r.verb
        for r in settled_audit(cp, NS)
        if r.resource == "resourceclaims" and r.name == "never" and r.subresource == "status" and r.succeeded
    ]
    return {
        "events": seen,
        "bound": bool(pod["spec"].get("nodeName")),
        "claim status writes (first five)": writes[:5],
    }


def run(cp: ClusterHarness, scheduler: Scheduler) -> dict[str, Any]:
    driver = FakeDriver(cp)
    with driver.running():
        out = {"ready": ready_case(cp), "never": never_case(cp)}
    assert driver.errors == [], driver.errors
    return out


SIDE_BY_SIDE = SideBySide(
    "binding-conditions",
    own_cluster,
    run,
    kube_config={"profiles": kube_profiles()},
    kopf_args=(),
    kopf_setup=apply_profiles,
)

BY_NAME = {
    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
}
PENDING = ("Normal", "BindingConditionsPending", f"waiting for binding conditions for device on node {NODE}")


def test_kube_scheduler_does_what_the_module_says(kube_scheduler: dict[str, Any]) -> None:
    ready, never = kube_scheduler["ready"], kube_scheduler["never"]
    assert ready["plain bound while ready waited"] is True, dumps(ready)
    assert ready["allocation"] == {
        "devices": {
            "results": [
                {
                    "request": "fabric",
                    "driver": DRIVER,
                    "pool": "fabric",
                    "device": "dev-a",
                    "bindingConditions": ["Attached"],
                    "bindingFailureConditions": ["AttachFailed"],
                }
            ]
        },
        "nodeSelector": BY_NAME,
    }, dumps(ready)
    assert ready["allocation timestamp"] is True
    assert ready["events"] == [PENDING], dumps(ready)
    assert never["bound"] is False
    assert never["events"][:2] == [PENDING, ("Warning", "FailedScheduling", PREBIND_TIMEOUT)], dumps(never)
    # allocated and reserved, unreserved after the timeout, deallocated (PostFilter), allocated and
    # reserved again, unreserved again
    assert never["claim status writes (first five)"] == ["update", "patch", "update", "update", "patch"]


def test_binding_conditions_as_kube_scheduler(
    kube_scheduler: dict[str, Any], kopf_scheduler: dict[str, Any]
) -> None:
    assert kopf_scheduler == kube_scheduler, (
        f"kube-scheduler: {dumps(kube_scheduler)}\nkopf-scheduler: {dumps(kopf_scheduler)}"
    )
