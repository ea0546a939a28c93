"""Dynamic Resource Allocation through the operator, compared with kube-scheduler on a real API server
with kube-controller-manager (its resource-claim controller makes the claims of pods' claim templates,
and removes reservations and allocations when pods go).

A fake driver (``gpu.e2e.example``) publishes one ResourceSlice per node, 8 nodes x 4 devices; each device
has the attributes ``model`` and ``pcieRoot`` (two roots per node, two devices each) and the capacity
``memory``: nodes 0-5 have ``t4`` devices of 16Gi, nodes 6-7 ``a100`` devices of 80Gi. The same pods run
twice, each time on a fresh cluster (one after the other, so the two never share the machine's cores):
scheduled by the upstream kube-scheduler, then by ``kopf-scheduler run --default-scheduler-name
default-scheduler``. Each pod is created once the one before it is bound or reported unschedulable:

- claim templates asking for 1 device, 2 devices and ``All`` devices of the class ``gpu``;
- a template of the class ``big-gpu``, whose CEL selector wants 40Gi of memory or more (a100 only);
- a template asking for 2 devices under one PCIe root (``matchAttribute``);
- one ResourceClaim shared by two pods (both on the node of its allocation, both in ``reservedFor``);
- a template asking for 5 devices: no node has them.

Nodes tie on every score, so the node each pod gets is a random pick in both schedulers; compared are
feasibility and the FailedScheduling text of every pod, and checked in both clusters: each allocation
is on the pod's node, has the devices its request asks for, satisfies the selectors and the constraint,
and no device is allocated twice. Then a pod is deleted: kube-controller-manager removes its reservation
and the allocation (the scheduler does not: with the scheduler stopped, the two pods of the shared claim
go and the claim is released all the same), and its node's devices are all allocatable again.

Then a random cluster (``dra_random``, seeded: ``KOPF_SCHEDULER_DRA_SEED``, else a fixed seed) on eight
more nodes, with what 1.37 added to DRA: device taints and DeviceTaintRules (NoSchedule, NoExecute,
None) and requests that tolerate some, prioritized lists, partitionable devices, devices shared by
capacity, a slice with per-device node selection, requests with admin access (the namespace has the
label they need), nodes with two pools (of two drivers, or two of one), and pods asking for an extended
resource that a DeviceClass stands for. Its objects are created with the fixed ones, long before its
pods. Pools, slices and devices come in a fixed order, so the devices a pod gets are deterministic:
compared are each pod's node or message, and per claim each result's request, device,
tolerations and consumed capacity, whether it is a share (not its random ``shareID``), the allocation's
node selector and ``reservedFor``; for a pod's extended resources, its ``extendedResourceClaimStatus``
and that claim's spec and allocation. Two score pods, each first on a pair of nodes that differ only in
their devices, must go where DynamicResources' Score for their ``firstAvailable`` sends them. A failure
names the seed.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dra_random
import pytest
from operator_harness import condition, fresh_cluster, sized_nodes, wait_until
from side_by_side import Scheduler, SideBySide

from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness, dumps, pod_manifest

pytestmark = pytest.mark.e2e

NS = "dra"
DRIVER = "gpu.e2e.example"
NODES = 8
#: the random cluster's nodes (``dra_random``): two pairs for score pods, then nodes for pinned pods
RANDOM_PAIRS = 2
RANDOM_NODES = 4
ALL_NODES = NODES + 2 * RANDOM_PAIRS + RANDOM_NODES
#: the random cluster's seed: the environment's ``KOPF_SCHEDULER_DRA_SEED``, else a fixed one (CI)
SEED = int(os.environ.get("KOPF_SCHEDULER_DRA_SEED", "1"))
DEVICES = 4
RESOURCE = "/apis/resource.k8s.io/v1"
TIMEOUT = 60.0

#: pod -> (template or claim, ...); in creation order
PODS: list[tuple[str, dict[str, str]]] = [
    ("one", {"resourceClaimTemplateName": "one"}),
    ("two", {"resourceClaimTemplateName": "two"}),
    ("all", {"resourceClaimTemplateName": "all"}),
    ("big", {"resourceClaimTemplateName": "big"}),
    ("same-root", {"resourceClaimTemplateName": "same-root"}),
    ("shared-a", {"resourceClaimName": "shared"}),
    ("shared-b", {"resourceClaimName": "shared"}),
    ("five", {"resourceClaimTemplateName": "five"}),
]
UNSATISFIABLE = (
    f"0/{ALL_NODES} nodes are available: {ALL_NODES} cannot allocate all claims. "
    f"preemption: 0/{ALL_NODES} nodes are available: {ALL_NODES} Preemption is not helpful for scheduling."
)


def device_classes() -> list[dict[str, Any]]:
    big = (
        f'device.driver == "{DRIVER}" && device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    )
    return [
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        {"metadata": {"name": "big-gpu"}, "spec": {"selectors": [{"cel": {"expression": big}}]}},
    ]


def claim_spec(
    device_class: str, count: int | None = None, *, all_devices: bool = False, same_root: bool = False
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if all_devices:
        exactly["allocationMode"] = "All"
    elif count is not None:
        exactly["count"] = count
    spec: dict[str, Any] = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
    if same_root:
        spec["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/pcieRoot"}]
    return spec


TEMPLATES = {
    "one": claim_spec("gpu"),
    "two": claim_spec("gpu", 2),
    "all": claim_spec("gpu", all_devices=True),
    "big": claim_spec("big-gpu"),
    "same-root": claim_spec("gpu", 2, same_root=True),
    "five": claim_spec("gpu", 5),
}


def resource_slice(node: str, index: int) -> dict[str, Any]:
    """The fake driver's slice of one node."""
    model, memory = ("a100", "80Gi") if index >= 6 else ("t4", "16Gi")
    devices = [
        {
            "name": f"gpu-{d}",
            "attributes": {"model": {"string": model}, "pcieRoot": {"string": f"pci-{d // 2}"}},
            "capacity": {"memory": {"value": memory}},
        }
        for d in range(DEVICES)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


@dataclass
class Run:
    """What one scheduler made of the pods: per pod its node or its message, and the claims."""

    outcomes: dict[str, str] = field(default_factory=dict)  # pod -> "node:<name>" or the message
    nodes: dict[str, str] = field(default_factory=dict)
    claims: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # pod -> its claims
    slices: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> its slice
    after_delete: dict[str, Any] = field(default_factory=dict)
    #: the random cluster's pods: pod -> its outcome, its claims' allocations, its extended claim
    random: dict[str, dict[str, Any]] = field(default_factory=dict)


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    """A fresh cluster with kube-controller-manager (its resource-claim controller makes the claims of
    templates), ``NODES`` nodes of 8 cpu and the namespace; stopped on exit."""
    sizes = {f"dra-{index}": (None, "8", "32Gi") for index in range(NODES)}
    sizes |= {f"rnd-node-{index}": (None, "8", "32Gi") for index in range(NODES, ALL_NODES)}
    return fresh_cluster(state_dir, sized_nodes(sizes), namespaces=[NS])


def publish(cp: ClusterHarness, run: Run) -> None:
    """The fake driver's slices, the classes, the templates and the shared claim; the random cluster's
    objects (long before its pods come, so every informer has them by then)."""
    names = sorted(n["metadata"]["name"] for n in cp.get("/api/v1/nodes")["items"])
    nodes = [n for n in names if n.startswith("dra-")]
    for index, node in enumerate(nodes):
        run.slices[node] = cp.post(f"{RESOURCE}/resourceslices", resource_slice(node, index))
    for body in device_classes():
        cp.post(
            f"{RESOURCE}/deviceclasses", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", **body}
        )
    for name, spec in TEMPLATES.items():
        template = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": spec},
        }
        cp.post(f"{RESOURCE}/namespaces/{NS}/resourceclaimtemplates", template)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared"},
        "spec": claim_spec("gpu"),
    }
    cp.post(f"{RESOURCE}/namespaces/{NS}/resourceclaims", claim)
    # claims with adminAccess are refused in a namespace without the label
    namespace = cp.get(f"/api/v1/namespaces/{NS}")
    namespace["metadata"].setdefault("labels", {})[dra_random.ADMIN_LABEL] = "true"
    cp.request("PUT", f"/api/v1/namespaces/{NS}", namespace)
    random_cluster = generate_random()
    for path, bodies in (
        ("resourceslices", random_cluster.slices),
        ("deviceclasses", random_cluster.classes),
        ("devicetaintrules", random_cluster.rules),
        (f"namespaces/{NS}/resourceclaims", random_cluster.claims),
    ):
        for body in bodies:
            try:
                cp.post(f"{RESOURCE}/{path}", body)
            except ApiError as e:
                raise AssertionError(f"seed {SEED}: {path} refused {dumps(body)}: {e}") from None


def generate_random() -> dra_random.RandomCluster:
    nodes = [f"rnd-node-{index}" for index in range(NODES, ALL_NODES)]
    pairs = [(nodes[2 * p], nodes[2 * p + 1]) for p in range(RANDOM_PAIRS)]
    return dra_random.generate(SEED, pairs, nodes[2 * RANDOM_PAIRS :], NS)


#: the claim the scheduler makes for a pod's extended resources: ``<pod>-extended-resources-<5 random>``
EXTENDED_CLAIM = re.compile(r"-extended-resources-[a-z0-9]{5}$")


def allocation_of(claim: dict[str, Any]) -> dict[str, Any]:
    """What a claim's status says the scheduler allocated: per result its request, device and
    tolerations, whether it is a share (its ``shareID`` is random) and the capacity that consumes."""
    status = claim.get("status") or {}
    allocation = status.get("allocation") or {}
    results = []
    for result in (allocation.get("devices") or {}).get("results") or ():
        entry = {k: v for k, v in result.items() if k != "shareID"}
        entry["share"] = "shareID" in result
        results.append(entry)
    return {
        "results": results,
        "config": (allocation.get("devices") or {}).get("config"),
        "nodeSelector": allocation.get("nodeSelector"),
        "reservedFor": sorted(r["name"] for r in status.get("reservedFor") or ()),
    }


def random_outcome(cp: ClusterHarness, name: str) -> str | None:
    """The pod's node, or its PodScheduled condition's reason and message once it is False with one
    (``Unschedulable``, or ``SchedulerError`` when the allocator fails)."""
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    if pod["spec"].get("nodeName"):
        return "node:" + pod["spec"]["nodeName"]
    cond = condition(pod, "PodScheduled")
    if cond.get("status") == "False" and cond.get("message"):
        return f"{cond.get('reason')}: {cond['message']}"
    return None


def run_random_pods(cp: ClusterHarness, run: Run) -> None:
    """The random cluster's pods, each once the one before it is bound or reported."""
    for body in generate_random().pods:
        name = body["metadata"]["name"]
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
        seen: dict[str, Any] = {
            "outcome": wait_until(
                lambda n=name: random_outcome(cp, n), TIMEOUT, f"seed {SEED}: pod {name} placed or reported"
            )
        }
        pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        if body["spec"].get("resourceClaims"):
            seen["claim"] = allocation_of(cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{name}"))
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus")
        if extended:
            claim = cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{extended['resourceClaimName']}")
            seen["extended"] = {
                "claimName": EXTENDED_CLAIM.sub("-extended-resources-*", extended["resourceClaimName"]),
                "requestMappings": extended.get("requestMappings"),
                "spec": claim["spec"],
                **allocation_of(claim),
            }
        run.random[name] = seen


def pod_claims(cp: ClusterHarness, pod: dict[str, Any]) -> list[dict[str, Any]]:
    statuses = {
        s["name"]: s.get("resourceClaimName")
        for s in pod.get("status", {}).get("resourceClaimStatuses") or ()
    }
    out = []
    for entry in pod["spec"].get("resourceClaims") or ():
        name = entry.get("resourceClaimName") or statuses.get(entry["name"])
        if name:
            out.append(cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims/{name}"))
    return out


def outcome(cp: ClusterHarness, name: str) -> str | None:
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
    if pod["spec"].get("nodeName"):
        return "node:" + pod["spec"]["nodeName"]
    cond = condition(pod, "PodScheduled")
    if cond.get("status") == "False" and cond.get("reason") == "Unschedulable" and cond.get("message"):
        return str(cond["message"])
    return None


def run_pods(cp: ClusterHarness, scheduler: Scheduler) -> Run:
    run = Run()
    publish(cp, run)
    for name, source in PODS:
        body = pod_manifest(name, NS, requests={"cpu": "100m"})
        body["spec"]["resourceClaims"] = [{"name": "gpu", **source}]
        cp.post(f"/api/v1/namespaces/{NS}/pods", body)
        run.outcomes[name] = wait_until(
            lambda n=name: outcome(cp, n), TIMEOUT, f"pod {name} placed or reported"
        )
        pod = cp.get(f"/api/v1/namespaces/{NS}/pods/{name}")
        run.nodes[name] = pod["spec"].get("nodeName") or ""
        if run.nodes[name]:
            run.claims[name] = pod_claims(cp, pod)
    # a pod goes: the controller drops its reservation and the allocation, and its devices are free again
    victim = run.nodes["all"]
    generated = run.claims["all"][0]["metadata"]["name"]
    cp.delete(f"/api/v1/namespaces/{NS}/pods/all")

    def released() -> dict[str, Any] | None:
        claims = {
            c["metadata"]["name"]: c for c in cp.get(f"{RESOURCE}/namespaces/{NS}/resourceclaims")["items"]
        }
        claim = claims.get(generated)
        return {"released": True} if claim is None or not claim.get("status", {}).get("allocation") else None

    run.after_delete["released"] = wait_until(released, TIMEOUT, "the deleted pod's claim released")
    body = pod_manifest(
        "all-again", NS, requests={"cpu": "100m"}, nodeSelector={"kubernetes.io/hostname": victim}
    )
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "all"}]
    cp.post(f"/api/v1/namespaces/{NS}/pods", body)
    run.after_delete["outcome"] = wait_until(
        lambda: outcome(cp, "all-again"), TIMEOUT, "all-again placed or reported"
    )
    pod = cp.get(f"/api/v1/namespaces/{NS}/pods/all-again")
    if pod["spec"].get("nodeName"):
        run.claims["all-again"] = pod_claims(cp, pod)
        run.nodes["all-again"] = pod["spec"]["nodeName"]
    run_random_pods(cp, run)
    # who releases a claim: with the scheduler stopped, the shared claim's pods go, and still its
    # reservations and its allocation do
    scheduler.stop()
    for name in ("shared-a", "shared-b"):
        cp.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    path = f"{RESOURCE}/namespaces/{NS}/resourceclaims/shared"

    def deallocated() -> bool:
        status = cp.get(path).get("status") or {}
        return not status.get("allocation") and not status.get("reservedFor")

    run.after_delete["released without a scheduler"] = wait_until(
        deallocated, TIMEOUT, "shared claim released"
    )
    return run


#: the pods under kube-scheduler, then on an identical fresh cluster under ``kopf-scheduler run
#: --default-scheduler-name default-scheduler`` (the fixtures ``kube_scheduler`` and ``kopf_scheduler``)
SIDE_BY_SIDE = SideBySide("dra", own_cluster, run_pods)


# -- checks --------------------------------------------------------------------------------------------------


def check_allocations(run: Run) -> None:
    """Every allocation on its pod's node, of the devices asked for, within the selectors and the
    constraint; no device in two claims."""
    owners: dict[tuple[str, str, str], str] = {}
    for pod, claims in run.claims.items():
        node = run.nodes[pod]
        for claim in claims:
            allocation = claim["status"]["allocation"]
            results = allocation["devices"]["results"]
            devices = {(r["driver"], r["pool"], r["device"]) for r in results}
            assert {(d, p) for d, p, _ in devices} == {(DRIVER, node)}, (pod, dumps(claim))
            template = pod.removesuffix("-again")
            want = {
                "one": 1,
                "two": 2,
                "all": DEVICES,
                "big": 1,
                "same-root": 2,
                "shared-a": 1,
                "shared-b": 1,
            }
            assert len(results) == want[template], (pod, dumps(claim))
            by_name = {d["name"]: d for d in run.slices[node]["spec"]["devices"]}
            if template == "big":
                assert all(by_name[r["device"]]["attributes"]["model"]["string"] == "a100" for r in results)
            if template == "same-root":
                roots = {by_name[r["device"]]["attributes"]["pcieRoot"]["string"] for r in results}
                assert len(roots) == 1, (pod, roots)
            assert claim["status"]["reservedFor"], dumps(claim)
            for device in devices:
                if pod.startswith("shared") or pod == "all-again":
                    continue
                assert device not in owners, f"{device} allocated to {owners[device]} and {pod}"
                owners[device] = pod
    shared = [c for c in run.claims.get("shared-a", []) if c["metadata"]["name"] == "shared"]
    assert shared and run.nodes["shared-a"] == run.nodes["shared-b"]
    reserved = {r["name"] for r in run.claims["shared-b"][0]["status"]["reservedFor"]}
    assert reserved == {"shared-a", "shared-b"}, reserved


def test_feasibility_and_messages_as_kube_scheduler(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    kube = {p: o if not o.startswith("node:") else "bound" for p, o in kube_scheduler.outcomes.items()}
    ours = {p: o if not o.startswith("node:") else "bound" for p, o in kopf_scheduler.outcomes.items()}
    assert ours == kube, f"kube-scheduler: {dumps(kube)}\nkopf-scheduler: {dumps(ours)}"
    assert kube["five"] == UNSATISFIABLE, kube["five"]
    assert all(kube[p] == "bound" for p, _ in PODS if p != "five"), kube


@pytest.mark.parametrize("which", ["kube-scheduler", "kopf-scheduler"])
def test_allocations_satisfy_requests_and_never_share_a_device(
    which: str, kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    check_allocations(kube_scheduler if which == "kube-scheduler" else kopf_scheduler)


def test_a_deleted_pods_devices_are_allocatable_again(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    for run in (kube_scheduler, kopf_scheduler):
        assert run.after_delete["outcome"].startswith("node:"), run.after_delete
        assert run.nodes["all-again"] == run.nodes["all"]
    assert kopf_scheduler.after_delete["released"] == kube_scheduler.after_delete["released"]
    for run in (kube_scheduler, kopf_scheduler):  # the resource-claim controller, not the scheduler
        assert run.after_delete["released without a scheduler"] is True, run.after_delete


def test_random_cluster_as_kube_scheduler(kube_scheduler: Run, kopf_scheduler: Run) -> None:
    """The random cluster's pods: each one's node or FailedScheduling message, the devices of its claim
    (request or subrequest, device, tolerations, share or not, consumed capacity, node selector, pods
    reserved for) and of the claim made for its extended resources, the same under both; each score
    pod on the node its first satisfiable subrequest's kind is on, under kube-scheduler too."""
    cluster = generate_random()
    repeat = f"seed {SEED} (KOPF_SCHEDULER_DRA_SEED={SEED} repeats it)"
    assert list(kube_scheduler.random) == [p["metadata"]["name"] for p in cluster.pods], repeat
    differ = [p for p in kube_scheduler.random if kopf_scheduler.random.get(p) != kube_scheduler.random[p]]
    if differ:
        pod = differ[0]
        claims = [c for c in cluster.claims if c["metadata"]["name"] == pod]
        body = next(p for p in cluster.pods if p["metadata"]["name"] == pod)
        node = (body["spec"].get("nodeSelector") or {}).get("kubernetes.io/hostname")
        # the node's slices, and the one with per-device node selection (it has no nodeName)
        slices = [s for s in cluster.slices if s["spec"].get("nodeName", node) == node]
        pytest.fail(
            f"{repeat}: {len(differ)} pods differ ({', '.join(differ)}); the first, {pod}:\n"
            f"kube-scheduler: {dumps(kube_scheduler.random[pod], 6000)}\n"
            f"kopf-scheduler: {dumps(kopf_scheduler.random.get(pod), 6000)}\n"
            f"pod: {dumps(body)}\nclaim: {dumps(claims, 4000)}\nnode's slices: {dumps(slices, 8000)}\n"
            f"rules: {dumps(cluster.rules)}"
        )
    for pod, winner in cluster.score_winners.items():
        assert kube_scheduler.random[pod]["outcome"] == f"node:{winner}", (
            repeat,
            pod,
            kube_scheduler.random[pod],
        )
