"""The volume binder through the operator and through the upstream kube-scheduler, each on a fresh cluster
(etcd, kube-apiserver, kube-controller-manager: its PV controller binds what the scheduler decides) with
identical nodes and objects, one after the other so the two never share the machine's cores; the
manifests name no scheduler (``kopf-scheduler run --default-scheduler-name default-scheduler``). A test
provisioner (``volume_provisioner``) stands in for a CSI external-provisioner. In each cluster, in order:

1. **A StatefulSet** of 3 replicas with a volumeClaimTemplate of the class ``zonal`` (WaitForFirstConsumer,
   ``allowedTopologies`` zones a and b): every pod is bound and every claim Bound to a volume made in the
   zone of its pod's node. The nodes are sized so that no two tie for any replica (checked with
   ``kopf-scheduler simulate --explain``; the smallest margin is 18 points): the largest node, in zone c,
   would take every replica on resources alone, the volume binder rules it out; the replicas go 2 to
   zone a, 1 to zone b, and the two schedulers' per-node counts are compared.
2. **A pod deleted while its PreBind waits.** Its two claims: ``static`` (class ``local``, matched to an
   Available local volume on the zone-b node) and ``dynamic`` (class ``zonal``, to be provisioned). With
   kube-controller-manager stopped, nothing completes what the scheduler writes (the test provisioner
   acts only on claims the PV controller handed to it), so PreBind waits; once both writes are on the
   API server the pod is deleted, the scheduler gives up (its metric
   ``scheduler_schedule_attempts_total{result="error"}`` goes up), and only then is
   kube-controller-manager started again.
3. **Bad input**: a claim whose only candidate volume has a node affinity the API server accepts but no
   scheduler can evaluate (``Gt`` with a value that is not an integer: validation checks only that there
   is one value), a claim bound to such a volume, and a claim naming a StorageClass that does not exist.
   Their FailedScheduling messages are compared word for word; then a pod with a good claim is still
   bound, and none of the bad ones left anything written.

**Half-claimed**, per upstream: the scheduler's only writes (``bindAPIUpdate``) are a volume's
``spec.claimRef`` (with ``pv.kubernetes.io/bound-by-controller``) for a statically matched claim and the
annotation ``volume.kubernetes.io/selected-node`` on a claim to provision, and it never takes them back
(``BindPodVolumes``: no API rollback). Everything after that is the PV controller's: a volume whose
claimRef names an existing claim (same uid) gets that claim bound to it, whatever became of the pod; a
volume whose claim is gone is Released. So a volume is *half-claimed* when its claimRef names a claim
that does not name it back (claim missing or another uid, and the volume not Released; or the claim's
``spec.volumeName`` is not the volume, or either is not ``Bound``), and a claim is when its
``spec.volumeName`` names a volume whose claimRef is not the claim. Between the scheduler's write and the
PV controller's sync that state is expected; after the sync none may remain. A claim with a selected
node must end either Bound to a volume reachable from that node or with no volume referring to it.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from operator_harness import fresh_cluster, sized_nodes, wait_until
from side_by_side import SideBySide
from volume_provisioner import SELECTED_NODE, ZONE, TestProvisioner

from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

#: name -> (zone, cpu, memory): zone c's node is the largest, but the class ``zonal`` cannot reach it
NODES = {
    "a-0": ("zone-a", "16", "64Gi"),
    "b-1": ("zone-b", "4", "16Gi"),
    "c-2": ("zone-c", "32", "128Gi"),
}
NODE_A, NODE_B, NODE_C = NODES
NS = "volumes"
PROVISIONER = "provisioner.e2e.kopf-scheduler.dev"
ZONAL, LOCAL, BROKEN = "zonal", "local", "broken"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: what `kopf-scheduler simulate --explain` says of the StatefulSet on these nodes
EXPECTED_REPLICAS = {NODE_A: 2, NODE_B: 1}
LOCAL_VOLUME = "local-b"
#: accepted by the API server (one value for Gt), unusable by any scheduler (not an integer)
UNUSABLE_AFFINITY = {"key": "kubernetes.io/hostname", "operator": "Gt", "values": ["not-a-number"]}
BAD_PODS = ("unusable-volume", "bound-to-unusable-volume", "missing-class")
TIMEOUT = 60.0


# -- objects ---------------------------------------------------------------------------------------------


def storage_class(name: str, provisioner: str, zones: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    if zones:
        body["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE, "values": zones}]}]
    return body


def claim_body(name: str, class_name: str, volume: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": class_name,
        "resources": {"requests": {"storage": "1Gi"}},
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }


def volume_body(name: str, class_name: str, expression: dict[str, Any], claim: str = "") -> dict[str, Any]:
    """A local volume of 5Gi reachable where ``expression`` says; ``claim``: pre-bound to it."""
    spec: dict[str, Any] = {
        "capacity": {"storage": "5Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": class_name,
        "persistentVolumeReclaimPolicy": "Retain",
        "local": {"path": "/mnt/disks/e2e"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}},
    }
    if claim:
        spec["claimRef"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": NS,
            "name": claim,
        }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def pod_with_claims(name: str, *claims: str) -> dict[str, Any]:
    """No schedulerName: the cluster's scheduler serves ``default-scheduler``."""
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod_manifest(name, NS, requests={"cpu": "100m", "memory": "128Mi"}, volumes=volumes)


def stateful_set() -> dict[str, Any]:
    template = pod_manifest("", "", requests={"cpu": "1", "memory": "2Gi"})
    template["metadata"] = {"labels": {"app": "web"}}
    template["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 3,
            "podManagementPolicy": "Parallel",  # no kubelet makes a pod Ready
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": template,
            "volumeClaimTemplates": [
                {"metadata": {"name": "data"}, "spec": claim_body("", ZONAL)["spec"]},
            ],
        },
    }


# -- reading the API server's record -----------------------------------------------------------------------


def get_claim(cp: ClusterHarness, name: str) -> dict[str, Any]:
    return dict(cp.get(f"/api/v1/namespaces/{NS}/persistentvolumeclaims/{name}"))


def get_volume(cp: ClusterHarness, name: str) -> dict[str, Any]:
    return dict(cp.get(f"/api/v1/persistentvolumes/{name}"))


def phase(obj: dict[str, Any]) -> str:
    return str((obj.get("status") or {}).get("phase") or "")


def annotation(obj: dict[str, Any], key: str) -> str:
    return str((obj["metadata"].get("annotations") or {}).get(key, ""))


def volume_zone(volume: dict[str, Any]) -> str:
    """The zone a provisioned volume is reachable from ('' for another affinity)."""
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    expressions = [e for t in terms for e in t.get("matchExpressions") or () if e["key"] == ZONE]
    return ",".join(v for e in expressions for v in e["values"])


def claim_record(cp: ClusterHarness, name: str) -> dict[str, Any]:
    """The claim as comparable across clusters: a volume the provisioner made is named by its zone."""
    claim = get_claim(cp, name)
    volume_name = claim["spec"].get("volumeName") or ""
    if volume_name.startswith("pvc-"):
        volume_name = f"provisioned in {volume_zone(get_volume(cp, volume_name))}"
    return {"phase": phase(claim), "volume": volume_name, "selected-node": annotation(claim, SELECTED_NODE)}


def volume_record(cp: ClusterHarness, name: str) -> dict[str, Any]:
    volume = get_volume(cp, name)
    ref = volume["spec"].get("claimRef")
    if ref is not None:
        uid = get_claim(cp, ref["name"])["metadata"]["uid"]
        ref = {"claim": f"{ref['namespace']}/{ref['name']}", "uid is the claim's": ref.get("uid") == uid}
    return {
        "phase": phase(volume),
        "claimRef": ref,
        "bound-by-controller": annotation(volume, BOUND_BY_CONTROLLER),
    }


def half_claimed(cp: ClusterHarness) -> list[str]:
    """Volumes and claims half-claimed as the module docstring defines it; [] when none is."""
    volumes = {v["metadata"]["name"]: v for v in cp.get("/api/v1/persistentvolumes")["items"]}
    claims = {
        (c["metadata"]["namespace"], c["metadata"]["name"]): c
        for c in cp.get("/api/v1/persistentvolumeclaims")["items"]
    }
    found = []
    for name, volume in volumes.items():
        ref = volume["spec"].get("claimRef")
        if ref is None:
            continue
        claim = claims.get((ref["namespace"], ref["name"]))
        if claim is None or ref.get("uid") not in (None, "", claim["metadata"]["uid"]):
            if phase(volume) != "Released":
                found.append(f"volume {name} ({phase(volume)}) claims {ref['name']}, which is gone")
        elif claim["spec"].get("volumeName") != name or (phase(volume), phase(claim)) != ("Bound", "Bound"):
            found.append(
                f"volume {name} ({phase(volume)}) claims {ref['name']} ({phase(claim)}), which names "
                f"{claim['spec'].get('volumeName')!r}"
            )
    for (namespace, name), claim in claims.items():
        volume_name = claim["spec"].get("volumeName")
        if not volume_name:
            continue
        ref = (volumes.get(volume_name) or {}).get("spec", {}).get("claimRef") or {}
        if (ref.get("namespace"), ref.get("name"), ref.get("uid")) != (
            namespace,
            name,
            claim["metadata"]["uid"],
        ):
            found.append(f"claim {name} ({phase(claim)}) names volume {volume_name}, which does not name it")
    return found


def failed_scheduling(cp: ClusterHarness, pod: str) -> list[str]:
    """The messages of the FailedScheduling events of ``pod``, oldest first."""
    items = cp.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3D{pod}")["items"]
    events = sorted(
        (e for e in items if e.get("reason") == "FailedScheduling"),
        key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
    )
    return [str(e["message"]) for e in events]


def wait_failed_scheduling(cp: ClusterHarness, pod: str) -> str:
    """The latest FailedScheduling message of ``pod``, once there is one."""
    messages = wait_until(lambda: failed_scheduling(cp, pod), TIMEOUT, f"a FailedScheduling event for {pod}")
    return messages[-1]


def error_attempts(metrics_url: str) -> int:
    """``scheduler_schedule_attempts_total{result="error"}``: attempts that ended in an error, such as a
    PreBind that gave up. Both schedulers export it under that name."""
    context = ssl._create_unverified_context()  # kube-scheduler's self-signed serving certificate
    with urllib.request.urlopen(metrics_url, timeout=10, context=context) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("scheduler_schedule_attempts_total{") and 'result="error"' in line:
            total += float(line.rpartition(" ")[2])
    return int(total)


# -- one fresh cluster, one scheduler, the three phases ---------------------------------------------------


@dataclass(frozen=True)
class Run:
    """What one scheduler's cluster recorded, comparable across the two clusters."""

    #: StatefulSet pod -> its node, and its claim's record
    replicas: dict[str, str]
    replica_claims: dict[str, dict[str, Any]]
    replica_volume_zones: dict[str, str]
    #: phase 2: the record once both writes were made, once the scheduler gave up, and at the end
    written: dict[str, Any]
    after_giving_up: dict[str, Any]
    settled: dict[str, Any]
    half_claimed_after_giving_up: list[str]
    #: the deleted pod's FailedScheduling messages
    victim_events: list[str]
    #: phase 3: pod -> its last FailedScheduling message; the records of the bad objects after them
    bad_messages: dict[str, str]
    bad_objects: dict[str, Any]
    later_pod_node: str
    later_claim: dict[str, Any]
    #: every volume's and claim's inconsistency at the very end ([]: none)
    half_claimed_at_end: list[str]


def own_cluster(state_dir: Path) -> contextlib.AbstractContextManager[ClusterHarness]:
    """A fresh cluster with kube-controller-manager, the nodes of ``NODES``, the namespace and the storage
    classes; stopped on exit."""
    classes = (
        storage_class(ZONAL, PROVISIONER, ["zone-a", "zone-b"]),
        storage_class(LOCAL, NO_PROVISIONER),
        storage_class(BROKEN, NO_PROVISIONER),
    )
    return fresh_cluster(
        state_dir,
        sized_nodes(NODES),
        namespaces=[NS],
        objects=[("/apis/storage.k8s.io/v1/storageclasses", body) for body in classes],
    )


def wait_claim_bound(cp: ClusterHarness, name: str) -> dict[str, Any]:
    return wait_until(
        lambda: phase(c := get_claim(cp, name)) == "Bound" and c, TIMEOUT, f"claim {name} Bound", interval=0.2
    )


def wait_volume_available(cp: ClusterHarness, name: str) -> None:
    """Until the PV controller has made the volume Available (it has seen it, then)."""
    wait_until(lambda: phase(get_volume(cp, name)) == "Available", TIMEOUT, f"volume {name} Available")


def wait_pod_bound(cp: ClusterHarness, name: str) -> str:
    path = f"/api/v1/namespaces/{NS}/pods/{name}"
    node: str = wait_until(lambda: cp.get(path)["spec"].get("nodeName"), TIMEOUT, f"pod {name} bound")
    return node


def place_stateful_set(cp: ClusterHarness) -> dict[str, Any]:
    """Phase 1: the StatefulSet, until every replica is bound and every claim Bound."""
    cp.post(f"/apis/apps/v1/namespaces/{NS}/statefulsets", stateful_set())
    path = f"/api/v1/namespaces/{NS}/pods?labelSelector=app%3Dweb"

    def placed() -> dict[str, str] | None:
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in cp.get(path)["items"]}
        return nodes if len(nodes) == 3 and all(nodes.values()) else None

    replicas = wait_until(placed, TIMEOUT, "three StatefulSet replicas bound", interval=0.2)
    claims, zones = {}, {}
    for pod in replicas:
        claim = wait_claim_bound(cp, f"data-{pod}")
        claims[pod] = claim_record(cp, f"data-{pod}")
        zones[pod] = volume_zone(get_volume(cp, claim["spec"]["volumeName"]))
    return {"replicas": replicas, "replica_claims": claims, "replica_volume_zones": zones}


def delete_while_pre_bind_waits(cp: ClusterHarness, errors: Callable[[], int]) -> dict[str, Any]:
    """Phase 2 (see the module docstring)."""
    hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_B]}
    cp.post("/api/v1/persistentvolumes", volume_body(LOCAL_VOLUME, LOCAL, hostname))
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("static", LOCAL))
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("dynamic", ZONAL))
    wait_volume_available(cp, LOCAL_VOLUME)  # the scheduler matches only Available volumes

    def record() -> dict[str, Any]:
        return {
            "local volume": volume_record(cp, LOCAL_VOLUME),
            "static claim": claim_record(cp, "static"),
            "dynamic claim": claim_record(cp, "dynamic"),
        }

    cp.cluster.stop_controller_manager()
    try:
        errors_before = errors()
        cp.post(f"/api/v1/namespaces/{NS}/pods", pod_with_claims("victim", "static", "dynamic"))
        wait_until(
            lambda: (
                get_volume(cp, LOCAL_VOLUME)["spec"].get("claimRef")
                and annotation(get_claim(cp, "dynamic"), SELECTED_NODE)
            ),
            TIMEOUT,
            "the scheduler's PreBind wrote the local volume's claimRef and the dynamic claim's selected node",
        )
        written = record()
        cp.delete(f"/api/v1/namespaces/{NS}/pods/victim")
        wait_until(
            lambda: errors() > errors_before, TIMEOUT, "the scheduler gave up the deleted pod's PreBind"
        )
        after_giving_up = record()
        half = half_claimed(cp)
    finally:
        cp.cluster.start_controller_manager()
    wait_claim_bound(cp, "static")
    wait_claim_bound(cp, "dynamic")
    wait_until(lambda: not half_claimed(cp), TIMEOUT, "no volume or claim half-claimed")
    return {
        "written": written,
        "after_giving_up": after_giving_up,
        "settled": record(),
        "half_claimed_after_giving_up": half,
    }


def feed_bad_input(cp: ClusterHarness) -> dict[str, Any]:
    """Phase 3 (see the module docstring)."""
    cp.post("/api/v1/persistentvolumes", volume_body("unusable", BROKEN, UNUSABLE_AFFINITY))
    cp.post("/api/v1/persistentvolumes", volume_body("unusable-prebound", "", UNUSABLE_AFFINITY, "prebound"))
    # Available: the scheduler matches only such volumes, and the PV controller has seen the pre-bound one
    # (a claim synced before its volume is seen waits for the controller's 15 s resync)
    wait_volume_available(cp, "unusable")
    wait_volume_available(cp, "unusable-prebound")
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("on-unusable", BROKEN))
    cp.post(
        f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("prebound", "", "unusable-prebound")
    )
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("classless", "no-such-class"))
    wait_claim_bound(cp, "prebound")
    claims = {
        "unusable-volume": "on-unusable",
        "bound-to-unusable-volume": "prebound",
        "missing-class": "classless",
    }
    for pod in BAD_PODS:
        cp.post(f"/api/v1/namespaces/{NS}/pods", pod_with_claims(pod, claims[pod]))
    messages = {pod: wait_failed_scheduling(cp, pod) for pod in BAD_PODS}
    cp.post(f"/api/v1/namespaces/{NS}/persistentvolumeclaims", claim_body("later", ZONAL))
    cp.post(f"/api/v1/namespaces/{NS}/pods", pod_with_claims("later", "later"))
    later_node = wait_pod_bound(cp, "later")
    wait_claim_bound(cp, "later")
    pods = {p["metadata"]["name"]: p for p in cp.get(f"/api/v1/namespaces/{NS}/pods")["items"]}
    return {
        "bad_messages": messages,
        "bad_objects": {
            "unbound pods": sorted(p for p in BAD_PODS if not pods[p]["spec"].get("nodeName")),
            "unusable volume": volume_record(cp, "unusable"),
            "unusable prebound volume": volume_record(cp, "unusable-prebound"),
            **{f"claim {c}": claim_record(cp, c) for c in claims.values()},
        },
        "later_pod_node": later_node,
        "later_claim": claim_record(cp, "later"),
    }


def run_phases(cp: ClusterHarness, errors: Callable[[], int]) -> Run:
    with TestProvisioner(cp, NS, PROVISIONER) as provisioner:
        results = {
            **place_stateful_set(cp),
            **delete_while_pre_bind_waits(cp, errors),
            **feed_bad_input(cp),
        }
    assert not provisioner.errors, provisioner.errors
    # read last, seconds after the scheduler gave up: its event has long been written if it writes one
    return Run(**results, victim_events=failed_scheduling(cp, "victim"), half_claimed_at_end=half_claimed(cp))


#: the phases under kube-scheduler, then on an identical fresh cluster under ``kopf-scheduler run
#: --default-scheduler-name default-scheduler`` (the fixtures ``kube_scheduler`` and ``kopf_scheduler``);
#: both count their attempts that ended in an error on their own /metrics
SIDE_BY_SIDE = SideBySide(
    "volumes",
    own_cluster,
    lambda cp, scheduler: run_phases(cp, lambda: error_attempts(scheduler.metrics_url)),
    kopf_ports=True,
)


def show(run: Run) -> str:
    return json.dumps(run.__dict__, indent=1, sort_keys=True)


# -- the comparisons ---------------------------------------------------------------------------------------


def test_stateful_set_claims_are_provisioned_in_the_zones_of_their_pods_as_with_kube_scheduler(
    kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    for run in (kube_scheduler, kopf_scheduler):
        for pod, node in run.replicas.items():
            zone = NODES[node][0]
            assert run.replica_claims[pod] == {
                "phase": "Bound",
                "volume": f"provisioned in {zone}",
                "selected-node": node,
            }, show(run)
            assert run.replica_volume_zones[pod] == zone, show(run)
    kube, ours = Counter(kube_scheduler.replicas.values()), Counter(kopf_scheduler.replicas.values())
    assert ours == kube, f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    assert kube == EXPECTED_REPLICAS, (
        f"kube-scheduler placed otherwise than designed:\n{show(kube_scheduler)}"
    )


def test_a_pod_deleted_while_its_pre_bind_waits_leaves_no_volume_half_claimed(
    kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    # what PreBind wrote before it waited: the volume's claimRef and the claim's selected node, as upstream
    assert kube_scheduler.written == kopf_scheduler.written, (
        f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    )
    assert kopf_scheduler.written == {
        "local volume": {
            "phase": "Available",
            "claimRef": {"claim": f"{NS}/static", "uid is the claim's": True},
            "bound-by-controller": "yes",
        },
        "static claim": {"phase": "Pending", "volume": "", "selected-node": ""},
        "dynamic claim": {"phase": "Pending", "volume": "", "selected-node": NODE_B},
    }, show(kopf_scheduler)
    for run in (kube_scheduler, kopf_scheduler):
        # giving up takes nothing back (no API rollback upstream): the volume is half-claimed until the
        # PV controller syncs it
        assert run.after_giving_up == run.written, show(run)
        assert run.half_claimed_after_giving_up == [
            f"volume {LOCAL_VOLUME} (Available) claims static (Pending), which names None"
        ], show(run)
        # then the PV controller completes both: the static binding and, with the provisioner, the other
        assert run.settled == {
            "local volume": {
                "phase": "Bound",
                "claimRef": {"claim": f"{NS}/static", "uid is the claim's": True},
                "bound-by-controller": "yes",
            },
            "static claim": {"phase": "Bound", "volume": LOCAL_VOLUME, "selected-node": ""},
            "dynamic claim": {"phase": "Bound", "volume": "provisioned in zone-b", "selected-node": NODE_B},
        }, show(run)
        assert run.half_claimed_at_end == [], show(run)
    # kube-scheduler reports why it gave up, on the deleted pod
    assert kube_scheduler.victim_events[-1:] == [
        'running PreBind plugin "VolumeBinding": binding volumes: pod does not exist any more: '
        'pod "victim" not found'
    ], show(kube_scheduler)


def test_the_deleted_pods_failed_pre_bind_is_reported_as_kube_scheduler_reports_it(
    kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    assert kopf_scheduler.victim_events[-1:] == kube_scheduler.victim_events[-1:]


def test_bad_volume_input_gets_kube_schedulers_messages_and_the_loop_keeps_binding(
    kube_scheduler: Run, kopf_scheduler: Run
) -> None:
    assert kopf_scheduler.bad_messages == kube_scheduler.bad_messages, (
        f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    )
    # the reasons kube-scheduler gives (what its post-filters add after them is compared above)
    reasons = {pod: message.partition(". ")[0] for pod, message in kube_scheduler.bad_messages.items()}
    assert reasons == {
        "unusable-volume": "0/3 nodes are available: 3 node(s) didn't find available persistent volumes "
        "to bind",
        "bound-to-unusable-volume": "0/3 nodes are available: 3 node(s) didn't match PersistentVolume's "
        "node affinity",
        "missing-class": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims",
    }, show(kube_scheduler)
    assert kopf_scheduler.bad_objects == kube_scheduler.bad_objects, (
        f"kube-scheduler:\n{show(kube_scheduler)}\nkopf-scheduler:\n{show(kopf_scheduler)}"
    )
    # nothing written for the bad claims: no claimRef on the unusable volume, no selected node anywhere
    assert kopf_scheduler.bad_objects == {
        "unbound pods": sorted(BAD_PODS),
        "unusable volume": {"phase": "Available", "claimRef": None, "bound-by-controller": ""},
        "unusable prebound volume": {
            "phase": "Bound",
            "claimRef": {"claim": f"{NS}/prebound", "uid is the claim's": True},
            "bound-by-controller": "",
        },
        "claim on-unusable": {"phase": "Pending", "volume": "", "selected-node": ""},
        "claim prebound": {"phase": "Bound", "volume": "unusable-prebound", "selected-node": ""},
        "claim classless": {"phase": "Pending", "volume": "", "selected-node": ""},
    }, show(kopf_scheduler)
    # and the next pod with a claim is bound, its volume provisioned where it runs
    assert kopf_scheduler.later_pod_node == kube_scheduler.later_pod_node
    for run in (kube_scheduler, kopf_scheduler):
        zone = NODES[run.later_pod_node][0]
        assert run.later_claim == {
            "phase": "Bound",
            "volume": f"provisioned in {zone}",
            "selected-node": run.later_pod_node,
        }, show(run)
