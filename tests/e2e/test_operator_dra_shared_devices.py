"""Partitionable devices and devices shared by capacity through the operator, side by side with
kube-scheduler v1.37.2 on a real API server with kube-controller-manager (its resource-claim controller
makes the claims of pods' templates and releases them when pods go).

Two nodes, each the only one with devices of one driver, so every placement and every device is
determined:

- ``dra-nic-0`` has one NIC (``nic.e2e.example``) that allows multiple allocations: 10Gi of bandwidth, a
  request rounded up to whole Gi, 1Gi for a claim that asks for none. ``a`` asks for 4Gi, ``b`` for 3.5Gi
  (taken as 4Gi), ``c`` for nothing (1Gi), ``d`` for 2Gi: only 1Gi is left, so ``d`` waits.
- ``dra-mig-1`` has a GPU (``mig.e2e.example``) published as counters (40Gi, in a slice of its own) and
  three devices consuming them: the whole GPU and two halves. ``half-a`` and ``half-b`` take the halves,
  ``whole`` then finds the counters used up and waits.

Then ``a`` and ``half-a`` go: the resource-claim controller releases their claims, and the waiting pods
are tried again and placed (``d`` on the share ``a`` freed; ``whole`` still not, half the GPU is taken,
until ``half-b`` goes too). Compared: every pod's outcome and message, in order, and every allocation the
scheduler wrote (devices, that a device allowing multiple allocations is a share with a ``shareID`` of its
own, the capacity each share consumes, the node selector).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from operator_harness import condition, fresh_cluster, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

NS = "dra-shared"
NIC, MIG = "nic.e2e.example", "mig.e2e.example"
RESOURCE = "/apis/resource.k8s.io/v1"
TIMEOUT = 60.0
NIC_NODE, MIG_NODE = "dra-nic-0", "dra-mig-1"
#: (pod, what it asks for: a share of the NIC, half the GPU or all of it, the bandwidth asked for), in
#: creation order
PODS: list[tuple[str, str, str | None]] = [
    ("a", "nic", "4Gi"),
    ("b", "nic", "3.5Gi"),
    ("c", "nic", None),
    ("d", "nic", "2Gi"),
    ("half-a", "half", None),
    ("half-b", "half", None),
    ("whole", "whole", None),
]
WAITING = (
    "0/2 nodes are available: 2 cannot allocate all claims. "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    sizes = {NIC_NODE: (None, "8", "32Gi"), MIG_NODE: (None, "8", "32Gi")}
    return fresh_cluster(state_dir, sized_nodes(sizes), namespaces=[NS])


def _slice(name: str, driver: str, node: str, count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


def _mig(name: str, memory: str, slices: str) -> dict[str, Any]:
    return {
        "name": name,
        "capacity": {"memory": {"value": memory}},
        "consumesCounters": [
            {"counterSet": "gpu-0", "counters": {"memory": {"value": memory}, "slices": {"value": slices}}}
        ],
    }


SLICES = [
    _slice(
        "nic-slice",
        NIC,
        NIC_NODE,
        1,
        devices=[
            {
                "name": "nic-0",
                "allowMultipleAllocations": True,
                "capacity": {
                    "bandwidth": {
                        "value": "10Gi",
                        "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}},
                    }
                },
            }
        ],
    ),
    _slice(
        "mig-counters",
        MIG,
        MIG_NODE,
        2,
        sharedCounters=[
            {"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}, "slices": {"value": "4"}}}
        ],
    ),
    _slice(
        "mig-devices",
        MIG,
        MIG_NODE,
        2,
        devices=[
            _mig("gpu-0", "40Gi", "4"),
            _mig("gpu-0-half-0", "20Gi", "2"),
            _mig("gpu-0-half-1", "20Gi", "2"),
        ],
    ),
]


def _template(name: str, device_class: str, bandwidth: str | None, selector: str | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if bandwidth is not None:
        exactly["capacity"] = {"requests": {"bandwidth": bandwidth}}
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "dev", "exactly": exactly}]}}},
    }


def _memory(amount: str) -> str:
    return f'device.capacity["{MIG}"].memory.compareTo(quantity("{amount}")) == 0'


def publish(cp: ClusterHarness) -> None:
    for driver, name in ((NIC, "nic"), (MIG, "mig")):
        body = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
        }
        cp.post(f"{RESOURCE}/deviceclasses", body)
    for body in SLICES:
        cp.post(f"{RESOURCE}/resourceslices", body)
    templates = [
        _template(f"nic-{pod}", "nic", bandwidth, None) for pod, kind, bandwidth in PODS if kind == "nic"
    ]
    templates += [
        _template("half", "mig", None, _memory("20Gi")),
        _template("whole", "mig", None, _memory("40Gi")),
    ]
    for body in templates:
        cp.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", body)


def template_of(pod: str) -> str:
    _, kind, _ = next(p for p in PODS if p[0] == pod)
    return f"nic-{pod}" if kind == "nic" else kind


@dataclass
class Run:
    #: per step, per pod: its node or its message
    outcomes: list[dict[str, str]] = field(default_factory=list)
    #: per bound pod: what is compared of its claim's allocation
    allocations: dict[str, Any] = field(default_factory=dict)
    #: per bound pod sharing a device: its shareID
    share_ids: dict[str, str] = field(default_factory=dict)


def outcome(cp: ClusterHarness, name: str) -> str | None:
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    if pod["spec"].get("nodeName"):
        return "node:" + pod["spec"]["nodeName"]
    cond = condition(pod, "PodScheduled")
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and cond.get("message"):
        return str(cond["message"])
    return None


def record(cp: ClusterHarness, run: Run, name: str) -> None:
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    (status,) = pod["status"].get("resourceClaimStatuses") or ()
    claim = cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{status['resourceClaimName']}")
    allocation = claim["status"]["allocation"]
    results = []
    for result in allocation["devices"]["results"]:
        compared = {k: result[k] for k in ("request", "driver", "pool", "device")}
        if "shareID" in result:
            run.share_ids[name] = result["shareID"]
            compared["shared"] = True
        if "consumedCapacity" in result:
            compared["consumedCapacity"] = result["consumedCapacity"]
        results.append(compared)
    run.allocations[name] = {"results": results, "nodeSelector": allocation.get("nodeSelector")}


def run_pods(cp: ClusterHarness, scheduler: Scheduler) -> Run:
    run = Run()
    publish(cp)
    step: dict[str, str] = {}
    for name, _, _ in PODS:
        body = pod_manifest(name, NS, requests={"cpu": "100m"})
        body["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": template_of(name)}]
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
        step[name] = wait_until(lambda n=name: outcome(cp, n), TIMEOUT, f"pod {name} placed or reported")
        if step[name].startswith("node:"):
            record(cp, run, name)
    run.outcomes.append(step)
    # pods go: their claims are released, and the waiting pods are tried again
    for gone, waiting in (("a", "d"), ("half-a", None), ("half-b", "whole")):
        cp.delete(f"/api/v1/namespaces/{NS}/pods/{gone}")
        if waiting is None:
            continue
        placed = wait_until(
            lambda w=waiting: (o := outcome(cp, w)) and o.startswith("node:") and o,
            TIMEOUT,
            f"pod {waiting} placed once {gone} went",
        )
        run.outcomes.append({waiting: placed, "after": gone})
        record(cp, run, waiting)
    return run


SIDE_BY_SIDE = SideBySide("dra-shared", own_cluster, run_pods)


def test_outcomes_as_kube_scheduler(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    assert kopf_scheduler.outcomes == kube_scheduler.outcomes, (
        f"kube-scheduler: {dumps(kube_scheduler.outcomes)}\nkopf-scheduler: {dumps(kopf_scheduler.outcomes)}"
    )
    first = kube_scheduler.outcomes[0]
    assert first == {
        "a": f"node:{NIC_NODE}",
        "b": f"node:{NIC_NODE}",
        "c": f"node:{NIC_NODE}",
        "d": WAITING,
        "half-a": f"node:{MIG_NODE}",
        "half-b": f"node:{MIG_NODE}",
        "whole": WAITING,
    }, first


def test_allocations_as_kube_scheduler(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    kube, ours = kube_scheduler.allocations, kopf_scheduler.allocations
    assert ours == kube, f"kube-scheduler: {dumps(kube)}\nkopf-scheduler: {dumps(ours)}"
    consumed = {p: a["results"][0].get("consumedCapacity") for p, a in kube_scheduler.allocations.items()}
    assert consumed == {
        "a": {"bandwidth": "4Gi"},
        "b": {"bandwidth": "4Gi"},
        "c": {"bandwidth": "1Gi"},
        "d": {"bandwidth": "2Gi"},
        "half-a": None,
        "half-b": None,
        "whole": None,
    }, consumed
    devices = {p: a["results"][0]["device"] for p, a in kube_scheduler.allocations.items()}
    assert devices["half-a"] == "gpu-0-half-0" and devices["half-b"] == "gpu-0-half-1", devices
    assert devices["whole"] == "gpu-0", devices


@pytest.mark.parametrize("which", ["kube-scheduler", "kopf-scheduler"])
def test_each_share_has_an_id_of_its_own(which: str, kube_scheduler: Run, kopf_scheduler: Run) -> None:
    ids = (kube_scheduler if which == "kube-scheduler" else kopf_scheduler).share_ids
    assert set(ids) == {"a", "b", "c", "d"}, ids
    assert len(set(ids.values())) == 4, ids
