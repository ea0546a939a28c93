"""Differential test: every scenario file (``tests/scenarios/*.yaml``) runs through the upstream
kube-scheduler on a real control plane and through ``kopf-scheduler simulate``; the two must agree on
every pending pod: bound or not, the FailedScheduling message (the event's note and the PodScheduled
condition's message), the preemption victims, the chosen node wherever ``simulate --explain`` shows
that the best node is unique, and the devices allocated to its ResourceClaims wherever kube-scheduler's
choice of them is deterministic (below).

How the real run is made comparable:

* This module starts its own control plane (etcd, kube-apiserver, kube-scheduler) in a temporary state
  directory, separate from the session's ``control_plane``: kube-scheduler's message counts every node
  it knows ("0/N nodes are available"), so the scenario's nodes must be the only nodes, and no other
  test's pending pod may take them. It is stopped at the end of the module.
* Scenarios run one after the other; each one's pods, budgets, priority classes, Services, controllers,
  storage objects, DRA objects and nodes are deleted before the next starts. Namespaces stay (without
  kube-controller-manager's namespace controller a deleted one would stay Terminating for good): each
  scenario sets the labels of the namespaces it uses to exactly those its file gives them (plus
  ``kubernetes.io/metadata.name``, which the API server sets); a namespace an earlier scenario left behind
  holds no pods, so it matches nothing a scenario's pod could look for.
* Services, ReplicaSets, StatefulSets and ReplicationControllers are created as the file has them (no
  kube-controller-manager runs, so a controller's ``replicas`` creates no pods; its spec still has to pass
  validation: a selector and a template whose labels match it). An ``ownerReferences`` entry without a
  ``uid`` gets a fixed one (the API server requires one but never checks that the owner exists;
  kube-scheduler looks owners up by name).
* StorageClasses, CSIDrivers, CSINodes, PersistentVolumes, PersistentVolumeClaims, CSIStorageCapacities
  and VolumeAttachments are created in that order, after the nodes and before the bound pods. The API
  server drops ``status`` on create, so a volume's, claim's or attachment's status from the file is then
  written through its status subresource (a volume's phase ``Available`` is what lets VolumeBinding match
  it to an unbound claim; a claim's ``Lost`` fails VolumeBinding's pre-filter); without one the API
  server's default phase ``Pending`` stays, which the plugins treat as simulate's empty phase (neither
  Available nor Lost). A CSINode is named after its node (validation asks only for a valid node name, no
  owner); a VolumeAttachment needs ``attacher``, ``nodeName`` and ``source.persistentVolumeName``.
* DeviceClasses, ResourceSlices, DeviceTaintRules and ResourceClaims (``resource.k8s.io/v1``, served by
  default in v1.37) are created in that order after the storage objects, before the bound pods. A
  claim's status from the file (the allocation of a claim that bound pods hold) is written through its
  status subresource once the bound pods exist: its ``reservedFor`` entries must name bound pods, and
  get their real uids. No resource-claim controller runs here to make claims from templates (and record
  them in the pod's status), so pods name existing claims (``resourceClaimName``), and a scenario with a
  ResourceClaimTemplate fails; a pod whose template never made a claim is held all the same, which a
  ``resourceClaimTemplateName`` without a template shows. kube-scheduler's PreBind writes the allocation
  and the reservation of a claim it allocates (and gives the claim the
  ``resource.kubernetes.io/delete-protection`` finalizer, which teardown takes off, then deletes), before
  the pod binds: the next pod, created once that one is bound, sees those devices as taken, as in
  simulate.
* No kube-controller-manager runs in this cluster (``assert_no_controllers`` checks it at start and
  before each scenario): no PV controller binds claims or sets phases, and nothing removes the
  ``kubernetes.io/pv-protection`` and ``pvc-protection`` finalizers that the StorageObjectInUseProtection
  admission plugin adds (teardown takes them off, then deletes). So a scenario's pods may only use
  volumes that are decided without a binding: bound claims, and unbound ones the pod cannot bind (it is
  unschedulable). A pod that binds a claim waits in PreBind for the PV controller (or a provisioner)
  until kube-scheduler's 600 s ``bindTimeoutSeconds``, far past ``POD_TIMEOUT``; simulate plays the PV
  controller, so it would not.
* Node names get a per-scenario prefix (rewritten everywhere they are referred to: ``spec.nodeName``,
  hostname labels and selectors, ``matchFields``, a CSINode's name, a VolumeAttachment's ``nodeName``, a
  claim's selected-node annotation, the hostname terms of a volume's node affinity, a class's allowed
  topologies and a capacity's node topology, a ResourceSlice's ``nodeName`` and the terms of its node
  selector, and those of the node selector of a ResourceClaim's allocation), so a node of the previous
  scenario the scheduler has not yet forgotten can never pass for one of this scenario.
* A barrier pod proves the scheduler's cache holds exactly the scenario's nodes and bound pods before
  the first pending pod is created: it tolerates every taint, is kept off each scenario node by a
  ``metadata.name NotIn`` requirement and is created after every bound pod (one pod informer, so the
  scheduler has seen those pods once it sees the barrier). Only when the scheduler reports
  "0/N nodes are available: N node(s) didn't match Pod's node affinity/selector" with N the scenario's
  node count is the snapshot right; otherwise the barrier is replaced and tried again.
* The barrier speaks for the pod and node informers only. kube-scheduler reads Namespaces, Services,
  controllers, the storage kinds and the DRA kinds through informers of their own, whose events are not
  ordered against the pods' (waiting until the API serves an object says nothing about a watch). So
  before the barrier a probe proves that each of those listers holds every object created (or deleted) so
  far: per kind, one probe object is created (in the barrier namespace, for a namespaced kind) after the
  scenario's ones (each informer's watch delivers its kind's events in order, so an informer that has the
  probe object has everything before it), and one probe pod whose placement depends on it is scheduled
  onto two probe nodes kept apart by a node selector. Node ``a`` is lighter, but holds one pod the probe
  object selects: the default spreading that the probe Service or controller gives a probe pod outweighs
  that (``probe_layout``; ``test_probe_layout`` checks it with simulate), so the pod lands on ``b`` only
  once its lister has the object. For Namespaces the barrier namespace gets a fresh label, and the probe
  pod's required affinity to a pod on ``b`` selects namespaces by that label: until the Namespace lister
  has it, no namespace matches and the pod is unschedulable. The storage kinds need no spreading: two
  probe pods read nine probe objects of the seven kinds (``storage_probes``), each pod getting its
  outcome only once every object it reads is known, and another one without any single one of them. One
  lands on ``b`` once its claim, that claim's volume, ``a``'s CSINode and a VolumeAttachment filling
  ``a``'s one slot are known (NodeVolumeLimits rejects ``a``). StorageClasses, CSIDrivers and
  CSIStorageCapacities only matter for a claim to provision, which a pod would wait for in PreBind
  forever here; so the other pod never binds (its anti-affinity rejects both nodes), and its signal is
  its message: one node without free storage and one failing the anti-affinity, which needs its class,
  the class's driver and a capacity on ``b``. Each such signal proves the lister exactly as a placement
  does. The DRA kinds need one probe pod (``dra_probes``): its ResourceClaim asks for a device of a probe
  DeviceClass whose driver has one device on each probe node, ``a``'s tainted by a probe DeviceTaintRule;
  the pod lands on ``b`` once all four are known (without the claim DynamicResources holds it at
  PreEnqueue, without the class its PreFilter rejects it, without ``b``'s slice no device is there, without
  the rule the lighter ``a`` takes it). The claim informer also feeds
  kube-scheduler's record of allocated devices, so the probe claim coming after the scenario's claim
  statuses proves those too. A probe pod that gets another outcome is deleted and a new one tried; the
  probe nodes, pods and objects are deleted afterwards, and the barrier that follows proves
  kube-scheduler has seen the nodes and pods go. It does not prove that for the storage and DRA probe
  objects: they are named with the probe's own random suffix, attached to probe nodes, of probe classes
  and drivers, so no scenario object can match one the scheduler still holds (a probe volume has no class
  and a claimRef to a probe claim or none; only WaitForFirstConsumer claims, which need a class, are
  matched against volumes; the probe slice is on ``b`` only, and its devices are of the probe driver).
* A scenario with a ``profile`` runs on a kube-scheduler restarted with that profile translated into a
  KubeSchedulerConfiguration (``kube_scheduler_profile``: scoring strategies such as MostAllocated and
  RequestedToCapacityRatio, ``percentageOfNodesToScore``, plugin sets and arguments) once the scenario's
  objects are made (and probed, by the default kube-scheduler: the probe relies on the default spreading,
  which a profile may change). A kube-scheduler that starts lists everything and waits for every
  informer to sync before it schedules, so the restart needs no probe; it lists nodes by name, so a
  scenario where the order of nodes matters names them in file order. The barrier pods use the
  profile's scheduler name, so the profile should serve ``default-scheduler`` (or the pods name its
  scheduler). The default kube-scheduler is started again afterwards; simulate gets the same profile. A
  profile that kube-scheduler has no equivalent of (a plugin not in its registry, extenders) fails the
  test unless the scenario is listed in ``WITHOUT_KUBE_SCHEDULER`` with the reason, and is then skipped
  saying so.
* Pending pods are created one at a time in the queue order the scenario file gives, not simulate's:
  priority as the API server's Priority admission resolves it (a dry-run create), then the file's
  creationTimestamp, then file order; each with ``schedulerName: default-scheduler`` unless it names
  one. The next is created only when the previous one is bound, gated, or has PodScheduled=False with a
  message and no preemption in progress. A pod held back by a PreEnqueue plugin other than
  SchedulingGates (here DynamicResources', for a claim that does not exist) gets no condition and no
  event from kube-scheduler (the reason goes to its log at V(4) only): it is known by the count of gated
  pods in kube-scheduler's /metrics going up, and compared only with simulate's verdict that it was
  never tried (no node, none explained, and the gate's reason as its message), not by that reason's
  text. No kubelet finishes a graceful deletion, so preemption victims (bound pods the scheduler deleted)
  are force-deleted here, as a kubelet would confirm; then the preemptor binds.
* After the last pod the test waits until kube-scheduler's active and backoff queues are empty (its
  /metrics), because a later pod's binding may requeue an earlier one, as in simulate.
* A pod given ``spec.priority`` without a class gets a generated PriorityClass of that value (the
  Priority admission plugin refuses a bare priority); simulate reads the same rewritten objects.
* PodDisruptionBudgets get the status the scenario file gives them (written through the status
  subresource; no disruption controller runs here); a budget without one fails the test. Namespaces get
  the labels the file gives them plus the ``kubernetes.io/metadata.name`` the API server sets. Neither
  comes from simulate's loader.

Where ``simulate --explain`` shows several nodes tied for the best score, kube-scheduler may pick
another one of them (not a difference). Whenever kube-scheduler's outcome for a pod is not simulate's,
that pod and the ones before it are frozen in kube-scheduler's outcomes (bound there, or left out) and
simulate runs again, so every later pod is compared against the cluster state kube-scheduler saw and
each difference is reported once; the claims of a pod frozen as bound get the allocation kube-scheduler
wrote (``freeze_claims``), so its devices are taken in the next simulation too.

Devices: the structured allocator of v1.37.2 tries the pools a node sees sorted by driver and pool name,
a pool's slices sorted by name, and within a slice the devices in their order, taking the first that
fit. Where a node sees at most one pool (``exact_device_nodes``), the devices kube-scheduler allocates
for a pod on that node are compared with simulate's (request, driver, pool, device, in order; for a
share of a device that allows multiple allocations that it is one, not its random ``shareID``, and its
``consumedCapacity``); elsewhere only the placement and the messages are compared.

DefaultPreemption and DynamicResources are part of our default profile (``plugins/defaults.py``), as
they are of kube-scheduler v1.34's, so messages are compared whole: the ``preemption: ...`` suffix,
DynamicResources' PostFilter reason for a pod without claims, joined before DefaultPreemption's ("... no
new claims to deallocate, preemption: ..."), and its PostFilter's ``not found`` when an earlier PreFilter
ended the cycle before its own ran (``RunPostFilterPlugins`` stops at that error, so the message ends in
"... not found").
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import io
import json
import re
import ssl
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.api.kube_scheduler_config import export_profile
from kopf_scheduler.api.quantity import format_quantity
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import APISERVER, ETCD, SCHEDULER
from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness, dumps
from kopf_scheduler.framework.objects import (
    CSI_DRIVERS,
    CSI_NODES,
    CSI_STORAGE_CAPACITIES,
    DEVICE_CLASSES,
    DEVICE_TAINT_RULES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    SERVICES,
    STATEFUL_SETS,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
)
from kopf_scheduler.framework.objects.storage import ANN_BIND_COMPLETED, ANN_SELECTED_NODE
from kopf_scheduler.simulate.output import GATED_MESSAGE

pytestmark = pytest.mark.e2e

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.yaml"))
SCHEDULER_NAME = "default-scheduler"
HOSTNAME = "kubernetes.io/hostname"
#: the API server labels every namespace with its name
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
BARRIER_NS = "diff-barrier"
POD_TIMEOUT = 30.0
#: how often a pod without a PodScheduled condition is looked for among kube-scheduler's gated pods
HELD_CHECK = 0.5
SETTLE_TIMEOUT = 40.0
POLL = 0.05
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: the kinds PodTopologySpread's default selector reads: Services and controllers
WORKLOAD_KINDS = {
    kind.kind: kind for kind in (SERVICES, REPLICA_SETS, STATEFUL_SETS, REPLICATION_CONTROLLERS)
}
#: the kinds the volume plugins read, in the order they are created (and deleted in reverse)
STORAGE_KINDS = {
    kind.kind: kind
    for kind in (
        STORAGE_CLASSES,
        CSI_DRIVERS,
        CSI_NODES,
        PERSISTENT_VOLUMES,
        PERSISTENT_VOLUME_CLAIMS,
        CSI_STORAGE_CAPACITIES,
        VOLUME_ATTACHMENTS,
    )
}
#: the kinds DynamicResources reads, in the order they are created (and deleted in reverse); no
#: ResourceClaimTemplates: no resource-claim controller runs here to make claims from them
DRA_KINDS = {
    kind.kind: kind for kind in (DEVICE_CLASSES, RESOURCE_SLICES, DEVICE_TAINT_RULES, RESOURCE_CLAIMS)
}
#: kinds with a status subresource: the API server drops ``status`` on create
STATUS_KINDS = {"PersistentVolume", "PersistentVolumeClaim", "VolumeAttachment", "ResourceClaim"}
#: the StorageObjectInUseProtection admission plugin gives volumes and claims ``kubernetes.io/pv-protection``
#: and ``pvc-protection`` finalizers, which only kube-controller-manager's protection controllers remove;
#: kube-scheduler's PreBind gives a ResourceClaim it allocates ``resource.kubernetes.io/delete-protection``,
#: which only the resource-claim controller removes
FINALIZED_KINDS = {"PersistentVolume", "PersistentVolumeClaim", "ResourceClaim"}
OBJECT_KINDS = {**WORKLOAD_KINDS, **STORAGE_KINDS, **DRA_KINDS}
#: kube-controller-manager's serviceaccount controller makes this (as in every namespace) once it runs;
#: nothing else does here (no ServiceAccount admission plugin)
DEFAULT_SERVICE_ACCOUNT = "/api/v1/namespaces/default/serviceaccounts/default"
#: label of the probe nodes, pods and objects, and of the barrier namespace (module docstring)
PROBE_LABEL = "diff-probe"
PROBE_ATTEMPTS = 40
#: scenarios (file stems) whose profile kube-scheduler has no equivalent of, and why: only simulate's
#: expectations (tests/scenarios) check them; this test skips them, saying so. A scenario whose profile
#: does not translate (``kube_scheduler_profile``) must be listed here, and one listed must not translate.
WITHOUT_KUBE_SCHEDULER: dict[str, str] = {}


# -- the control plane ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def own_control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    """A control plane of this module's own, with the upstream kube-scheduler running."""
    dev = DevCluster(tmp_path_factory.mktemp("differential-cluster"), die_with_parent=True)
    atexit.register(dev.down)  # in case the session ends without running finalizers
    try:
        try:
            dev.up()
            dev.start_kube_scheduler()
        except UsageError as e:  # binaries missing: `make controlplane` was not run
            pytest.fail(f"control plane not available: {e}", pytrace=False)
        except Exception as e:  # ClusterError carries the failing component's log tail
            pytest.fail(f"control plane did not come up: {e}", pytrace=False)
        harness = ClusterHarness.of(dev)
        assert_no_controllers(harness)
        harness.post("/api/v1/namespaces", namespace(BARRIER_NS))
        yield harness
    finally:
        dev.down()
        atexit.unregister(dev.down)


def assert_no_controllers(cp: ClusterHarness) -> None:
    """Nothing but etcd, kube-apiserver and kube-scheduler runs: no kube-controller-manager (which would
    bind claims, set volume phases, finish deletions behind the test's back), neither started by this
    cluster nor, so far, pointed at its API server from elsewhere (its serviceaccount controller would
    have made the default ServiceAccount; the dev cluster's runs without leader election, so no lease
    would tell). Checked at start and before each scenario."""
    assert set(cp.cluster.components) == {ETCD, APISERVER, SCHEDULER}, sorted(cp.cluster.components)
    resp = cp.api.request("GET", DEFAULT_SERVICE_ACCOUNT)
    assert resp.status == 404, f"a controller made {DEFAULT_SERVICE_ACCOUNT}: HTTP {resp.status}"


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def kube_scheduler_profile(spec: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A scenario's SchedulingProfile spec as one profile of kube-scheduler's KubeSchedulerConfiguration
    (v1), or None and why kube-scheduler has no equivalent: ``profiles export``'s translation
    (``export_profile``), which must warn of nothing (a plugin not in kube-scheduler's registry), and
    without ``extenders`` (kube-scheduler configures them once for all profiles, and the scenario's would
    have to be running here). The pods name ``default-scheduler`` unless the profile names another."""
    if spec.get("extenders"):
        return None, "extenders: kube-scheduler's are configured for all profiles and must be running"
    profile, warnings = export_profile({"schedulerName": SCHEDULER_NAME, **spec})
    return (None, "; ".join(warnings)) if warnings else (profile, "")


@contextlib.contextmanager
def scheduler_profile(cp: ClusterHarness, profile: dict[str, Any] | None) -> Iterator[str]:
    """kube-scheduler serving ``profile`` (a KubeSchedulerConfiguration profile: restarted with it, and
    with the default afterwards); yields the scheduler name to give the barrier pods."""
    if not profile:
        yield SCHEDULER_NAME
        return
    cp.cluster.stop_kube_scheduler()
    try:
        cp.cluster.start_kube_scheduler(config={"profiles": [profile]})
        yield profile["schedulerName"]
    finally:
        cp.cluster.stop_kube_scheduler()
        cp.cluster.start_kube_scheduler()


# -- turning a scenario into objects both sides read ----------------------------------------------------


@dataclass
class Prepared:
    """A scenario's objects as both sides read them (see the module docstring), sorted by role."""

    objects: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    pending: list[dict[str, Any]]  # in file order
    pdbs: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    #: every namespace the scenario uses -> its labels, as the API server shows them
    namespaces: dict[str, dict[str, str]]
    #: Services and controllers, in file order
    workloads: list[dict[str, Any]]
    #: StorageClasses, CSIDrivers, CSINodes, PVs, PVCs, CSIStorageCapacities, VolumeAttachments, in that
    #: order (file order within a kind)
    storage: list[dict[str, Any]] = field(default_factory=list)
    #: DeviceClasses, ResourceSlices, DeviceTaintRules, ResourceClaims, in that order (file order within a
    #: kind)
    dra: list[dict[str, Any]] = field(default_factory=list)
    #: the scenario's SchedulingProfile spec, if any
    profile: dict[str, Any] | None = None


def prepare(scenario: dict[str, Any], prefix: str) -> Prepared:
    """The scenario's objects with prefixed node names, PriorityClasses for bare priorities and owner
    references with a uid; the pending pods in file order (``RealRun.queue_order`` sorts them); the
    budgets with the status the file gives them; every namespace the objects use, with the labels the
    file gives it plus the ``kubernetes.io/metadata.name`` the API server sets. Nothing here comes from
    simulate's loader, so that a bug of the loader's cannot shape what kube-scheduler is fed."""
    objects = copy.deepcopy(scenario["objects"])
    node_names = {
        o["metadata"]["name"]: prefix + o["metadata"]["name"] for o in objects if o["kind"] == "Node"
    }
    generated: dict[tuple[int, str], str] = {}
    generated_classes: list[dict[str, Any]] = []
    for obj in objects:
        if obj["kind"] == "Node":
            rename_node(obj, node_names)
        elif obj["kind"] in WORKLOAD_KINDS:
            obj["metadata"].setdefault("namespace", "default")
        elif obj["kind"] in STORAGE_KINDS:
            if STORAGE_KINDS[obj["kind"]].namespaced:
                obj["metadata"].setdefault("namespace", "default")
            rename_storage_nodes(obj, node_names)
        elif obj["kind"] in DRA_KINDS:
            if DRA_KINDS[obj["kind"]].namespaced:
                obj["metadata"].setdefault("namespace", "default")
            rename_dra_nodes(obj, node_names)
        elif obj["kind"] == "ResourceClaimTemplate":
            pytest.fail(
                "ResourceClaimTemplates are not supported here: no resource-claim controller makes claims "
                "from them in this cluster (pods name existing claims by resourceClaimName)",
                pytrace=False,
            )
        elif obj["kind"] == "Pod":
            ns = obj["metadata"].setdefault("namespace", "default")
            for ref in obj["metadata"].get("ownerReferences") or ():
                ref.setdefault("uid", owner_uid(ns, ref.get("kind"), ref.get("name")))
            rename_pod_nodes(obj["spec"], node_names)
            spec = obj["spec"]
            if spec.get("priority") is not None and not spec.get("priorityClassName"):
                policy = spec.pop("preemptionPolicy", None) or "PreemptLowerPriority"
                value = spec.pop("priority")
                key = (value, policy)
                if key not in generated:
                    generated[key] = f"{prefix}prio-{value}{'-never' if policy == 'Never' else ''}"
                    generated_classes.append(
                        {
                            "apiVersion": "scheduling.k8s.io/v1",
                            "kind": "PriorityClass",
                            "metadata": {"name": generated[key]},
                            "value": value,
                            "preemptionPolicy": policy,
                        }
                    )
                spec["priorityClassName"] = generated[key]
    objects += generated_classes
    pending = [o for o in objects if o["kind"] == "Pod" and not o["spec"].get("nodeName")]
    bound = [o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    for pdb in pdbs:
        pdb["metadata"].setdefault("namespace", "default")
        # the status the disruption controller (absent here) would have set: the file's, not simulate's
        if (pdb.get("status") or {}).get("disruptionsAllowed") is None:
            pytest.fail(
                f"PodDisruptionBudget {pod_key(pdb)}: the scenario must give its status "
                "(disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods): no disruption "
                "controller runs in this cluster",
                pytrace=False,
            )
    namespaces = {"default": {}} | {
        o["metadata"]["namespace"]: {} for o in objects if o["metadata"].get("namespace")
    }
    for o in objects:
        if o["kind"] == "Namespace":
            namespaces[o["metadata"]["name"]] = dict(o["metadata"].get("labels") or {})
    for name, labels in namespaces.items():
        labels[NAMESPACE_NAME_LABEL] = name
    bound_keys = {pod_key(p) for p in bound}
    for claim in (o for o in objects if o["kind"] == "ResourceClaim"):
        for ref in (claim.get("status") or {}).get("reservedFor") or ():
            user = f"{claim['metadata']['namespace']}/{ref.get('name')}"
            assert ref.get("resource") == "pods" and user in bound_keys, (
                f"ResourceClaim {pod_key(claim)}: reservedFor {ref} is not a bound pod of the scenario "
                "(its uid is known only once the pod is created, before the claim's status is written)"
            )
    return Prepared(
        objects=objects,
        nodes=[o for o in objects if o["kind"] == "Node"],
        bound=bound,
        pending=pending,
        pdbs=pdbs,
        classes=[o for o in objects if o["kind"] == "PriorityClass"],
        namespaces=namespaces,
        workloads=[o for o in objects if o["kind"] in WORKLOAD_KINDS],
        storage=sorted(
            (o for o in objects if o["kind"] in STORAGE_KINDS),
            key=lambda o: list(STORAGE_KINDS).index(o["kind"]),
        ),
        dra=sorted(
            (o for o in objects if o["kind"] in DRA_KINDS),
            key=lambda o: list(DRA_KINDS).index(o["kind"]),
        ),
        profile=scenario.get("profile"),
    )


def owner_uid(namespace: str, kind: Any, name: Any) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kopf-scheduler/{namespace}/{kind}/{name}"))


def collection_path(obj: dict[str, Any]) -> str:
    """Where a Service, controller, storage or DRA object is created: its kind's collection (in its
    namespace, for a namespaced kind)."""
    return object_path(obj).rsplit("/", 1)[0]


def object_path(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return OBJECT_KINDS[obj["kind"]].object_path(meta.get("namespace") or "", meta["name"])


def pod_key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace') or 'default'}/{obj['metadata']['name']}"


@contextlib.contextmanager
def _as_file(objects: list[dict[str, Any]]) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        yield path


def rename_node(node: dict[str, Any], names: dict[str, str]) -> None:
    meta = node["metadata"]
    meta["name"] = names[meta["name"]]
    labels = meta.get("labels") or {}
    if labels.get(HOSTNAME) in names:
        labels[HOSTNAME] = names[labels[HOSTNAME]]


def rename_pod_nodes(spec: dict[str, Any], names: dict[str, str]) -> None:
    """Every reference a pod makes to a node by name: nodeName, hostname selectors, matchFields."""
    if spec.get("nodeName") in names:
        spec["nodeName"] = names[spec["nodeName"]]
    selector = spec.get("nodeSelector") or {}
    if selector.get(HOSTNAME) in names:
        selector[HOSTNAME] = names[selector[HOSTNAME]]
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = list(
        ((affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
        or []
    )
    terms += [
        t.get("preference") or {}
        for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    ]
    rename_terms(terms, names)


def rename_terms(terms: list[dict[str, Any]], names: dict[str, str]) -> None:
    """Node selector terms: the values of hostname expressions and of ``metadata.name`` fields."""
    for term in terms:
        for req in term.get("matchExpressions") or term.get("matchLabelExpressions") or []:
            if req.get("key") == HOSTNAME:
                req["values"] = [names.get(v, v) for v in req.get("values") or []]
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name":
                req["values"] = [names.get(v, v) for v in req.get("values") or []]


def rename_storage_nodes(obj: dict[str, Any], names: dict[str, str]) -> None:
    """Every reference a storage object makes to a node by name: a CSINode's own name, a
    VolumeAttachment's ``nodeName``, a claim's selected-node annotation, and the hostname terms of a
    volume's node affinity, a class's allowed topologies and a capacity's node topology."""
    meta, spec = obj["metadata"], obj.get("spec") or {}
    if obj["kind"] == "CSINode":
        meta["name"] = names.get(meta["name"], meta["name"])
    elif obj["kind"] == "VolumeAttachment" and spec.get("nodeName") in names:
        spec["nodeName"] = names[spec["nodeName"]]
    elif obj["kind"] == "PersistentVolumeClaim":
        annotations = meta.get("annotations") or {}
        if annotations.get(ANN_SELECTED_NODE) in names:
            annotations[ANN_SELECTED_NODE] = names[annotations[ANN_SELECTED_NODE]]
    elif obj["kind"] == "PersistentVolume":
        required = (spec.get("nodeAffinity") or {}).get("required") or {}
        rename_terms(required.get("nodeSelectorTerms") or [], names)
    elif obj["kind"] == "StorageClass":
        rename_terms(obj.get("allowedTopologies") or [], names)
    elif obj["kind"] == "CSIStorageCapacity":
        topology = obj.get("nodeTopology") or {}
        labels = topology.get("matchLabels") or {}
        if labels.get(HOSTNAME) in names:
            labels[HOSTNAME] = names[labels[HOSTNAME]]
        rename_terms([topology], names)


def rename_dra_nodes(obj: dict[str, Any], names: dict[str, str]) -> None:
    """Every reference a DRA object makes to a node by name: a ResourceSlice's ``nodeName`` and the
    hostname and ``metadata.name`` terms of its node selector (and those of each of its devices, with
    ``perDeviceNodeSelection``), and those of the node selector of a claim's allocation."""
    spec = obj.get("spec") or {}
    if obj["kind"] == "ResourceSlice":
        for selecting in [spec, *(spec.get("devices") or ())]:
            if selecting.get("nodeName") in names:
                selecting["nodeName"] = names[selecting["nodeName"]]
            rename_terms((selecting.get("nodeSelector") or {}).get("nodeSelectorTerms") or [], names)
    elif obj["kind"] == "ResourceClaim":
        allocation = (obj.get("status") or {}).get("allocation") or {}
        rename_terms((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or [], names)


def creatable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as it is POSTed: no server-set metadata; a pod's status is set afterwards."""
    body = copy.deepcopy(obj)
    meta = body["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(key, None)
    if obj["kind"] in ("Pod", "PodDisruptionBudget", *OBJECT_KINDS):
        body.pop("status", None)
    if obj["kind"] == "Pod" and not obj["spec"].get("nodeName"):
        body["spec"]["schedulerName"] = body["spec"].get("schedulerName") or SCHEDULER_NAME
    return body


# -- simulate ----------------------------------------------------------------------------------------------


def simulate(
    objects: list[dict[str, Any]], profile: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    with _as_file(objects) as path:
        args = ["simulate", "--cluster", str(path), "--output", "json", "--explain", "--seed", "1"]
        if profile:
            profile_path = path.with_name("profile.yaml")
            profile_path.write_text(
                yaml.safe_dump(
                    {"apiVersion": "kopf-scheduler.io/v1alpha1", "kind": "SchedulingProfile", "spec": profile}
                )
            )
            args += ["--profile", str(profile_path)]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(args)
    assert code == 0
    return {f"{p['namespace']}/{p['name']}": p for p in json.loads(out.getvalue())["pods"]}


def best_nodes(sim: dict[str, Any]) -> set[str]:
    """The nodes simulate found best for a bound pod: one, or all those tied for the highest total."""
    totals = {
        name: n["total"]
        for name, n in (sim.get("nodes") or {}).items()
        if n.get("filter") is None and n.get("total") is not None
    }
    if not totals or sim["node"] not in totals:
        return {sim["node"]}
    top = max(totals.values())
    return {name for name, total in totals.items() if total == top}


# -- the informer probe (module docstring) ----------------------------------------------------------------


@dataclass
class Probe:
    """One probe pod and the outcome it gets once the listers it speaks for are up to date."""

    #: the kinds whose listers it proves up to date
    kinds: str
    pod: dict[str, Any]
    #: the probe objects it reads: without any one of them it gets another outcome (``test_probe_layout``)
    needs: list[dict[str, Any]]
    #: it lands there ...
    node: str | None = None
    #: ... or, for a pod that must never bind, it is unschedulable with exactly these counted reasons
    #: among the others (the scenario's nodes, which its node selector rejects, are counted too)
    reasons: tuple[str, ...] = ()

    def done(self, node: str | None, message: str | None) -> bool:
        if self.node is not None:
            return node == self.node
        return (
            node is None
            and message is not None
            and all(re.search(rf"[:,] {re.escape(r)}[,.]", message) for r in self.reasons)
        )


@dataclass
class ProbeLayout:
    #: the barrier namespace with a label, set before the probe
    namespace: dict[str, Any]
    #: one Service and one controller of each kind, in the barrier namespace
    workloads: list[dict[str, Any]]
    #: storage objects, in ``STORAGE_KINDS`` order
    storage: list[dict[str, Any]]
    #: DRA objects, in ``DRA_KINDS`` order
    dra: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    probes: list[Probe]


def _probe_pod(name: str, labels: dict[str, str], cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": BARRIER_NS, "labels": labels},
        "spec": {
            "containers": [
                {"name": "c", "image": PAUSE_IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
    }


def probe_layout(gen: str) -> ProbeLayout:
    """The probe objects for one probe run, all named and labelled with ``gen``.

    Node ``a`` holds one small pod per Service/controller kind, each selected by that kind's probe object;
    node ``b`` one bigger pod. By resources alone a probe pod prefers ``a`` (NodeResourcesFit and
    BalancedAllocation: about 27 points); the default spreading by hostname (maxSkew 3, weight 2) that the
    pod's Service or controller gives it prefers ``b`` by about 80. The namespace probe requires affinity
    to ``b``'s pod in namespaces labelled ``PROBE_LABEL: gen``. The storage probes are described at
    ``storage_probes``.
    """
    node_a, node_b = f"{PROBE_LABEL}-{gen}-a", f"{PROBE_LABEL}-{gen}-b"
    nodes = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, PROBE_LABEL: gen}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for name in (node_a, node_b)
    ]
    name = f"{PROBE_LABEL}-{gen}"
    value = {kind: f"{kind.lower()}-{gen}" for kind in WORKLOAD_KINDS}
    template = {
        "metadata": {"labels": {}},
        "spec": {"containers": [{"name": "c", "image": PAUSE_IMAGE}]},
    }

    def workload(kind: str) -> dict[str, Any]:
        labels = {PROBE_LABEL: value[kind]}
        meta = {"name": name, "namespace": BARRIER_NS}
        tmpl = copy.deepcopy(template)
        tmpl["metadata"]["labels"] = labels
        api_version = WORKLOAD_KINDS[kind].api_version
        if kind == "Service":
            spec: dict[str, Any] = {"selector": labels, "ports": [{"port": 80}]}
        elif kind == "ReplicationController":
            spec = {"replicas": 0, "selector": labels, "template": tmpl}
        else:
            spec = {"replicas": 0, "selector": {"matchLabels": labels}, "template": tmpl}
            if kind == "StatefulSet":
                spec["serviceName"] = name
        return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}

    anchor = {PROBE_LABEL: f"anchor-{gen}"}
    bound = [
        _probe_pod(f"{name}-{value[kind]}", {PROBE_LABEL: value[kind]}, "100m", "128Mi", nodeName=node_a)
        for kind in WORKLOAD_KINDS
    ]
    bound.append(_probe_pod(f"{name}-anchor", anchor, "1500m", "2Gi", nodeName=node_b))
    common = {"schedulerName": SCHEDULER_NAME, "nodeSelector": {PROBE_LABEL: gen}}
    workloads = {kind: workload(kind) for kind in WORKLOAD_KINDS}
    probes: list[Probe] = []
    for kind in WORKLOAD_KINDS:
        pod = _probe_pod(f"{name}-probe-{value[kind]}", {PROBE_LABEL: value[kind]}, "100m", "128Mi", **common)
        if kind != "Service":
            owner = {
                "apiVersion": WORKLOAD_KINDS[kind].api_version,
                "kind": kind,
                "name": name,
                "uid": owner_uid(BARRIER_NS, kind, name),
                "controller": True,
            }
            pod["metadata"]["ownerReferences"] = [owner]
        probes.append(Probe(kind, pod, [workloads[kind]], node=node_b))
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": anchor},
                    "namespaceSelector": {"matchLabels": {PROBE_LABEL: gen}},
                    "topologyKey": HOSTNAME,
                }
            ]
        }
    }
    labelled = namespace(BARRIER_NS, {PROBE_LABEL: gen})
    pod = _probe_pod(f"{name}-probe-namespace", {}, "100m", "128Mi", affinity=affinity, **common)
    probes.append(Probe("Namespace", pod, [labelled], node=node_b))
    storage, storage_probes_ = storage_probes(name, node_a, node_b, common)
    dra, dra_probe = dra_probes(name, node_a, node_b, common)
    return ProbeLayout(
        namespace=labelled,
        workloads=list(workloads.values()),
        storage=storage,
        dra=dra,
        nodes=nodes,
        bound=bound,
        probes=[*probes, *storage_probes_, dra_probe],
    )


def storage_probes(
    name: str, node_a: str, node_b: str, common: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[Probe]]:
    """The storage probe objects and their two probe pods (see ``probe_layout`` for the nodes).

    * PersistentVolumeClaim, PersistentVolume, CSINode, VolumeAttachment: the pod's claim is bound to a
      volume of CSI driver ``attach`` (no node affinity); ``a``'s CSINode allows one volume of that driver,
      and a VolumeAttachment of another volume of it already fills that slot. NodeVolumeLimits then
      rejects ``a`` and the pod lands on ``b``. Until the claim is known the pod is unschedulable
      ("not found"), until its volume is, too (VolumeZone's pre-filter); until the CSINode is, ``a`` has
      no limit; until the attachment or its volume is, ``a`` has a free slot: each time the pod lands on
      the lighter ``a``.
    * StorageClass, CSIDriver, CSIStorageCapacity: these only ever matter for a claim to provision, which
      a pod that binds would wait for in PreBind (no provisioner runs here). So this pod never binds: its
      required anti-affinity to every probe pod rejects both probe nodes, and its signal is its message.
      Its claim is unbound, of a WaitForFirstConsumer class whose provisioner is a CSIDriver with
      ``storageCapacity: true``, and one CSIStorageCapacity of that class, enough for the claim, is on
      ``b`` only. Once all are known, ``a`` fails VolumeBinding ("did not have enough free storage") and
      ``b`` passes it to fail the anti-affinity: one node each. Until the class is known the claim counts
      as Immediate (VolumeBinding's pre-filter rejects the pod); until the driver is, capacity is not
      checked (two nodes fail the anti-affinity); until the capacity is, neither node has any (two fail
      VolumeBinding).
    """
    attach, provision = f"attach.{name}.example.com", f"provision.{name}.example.com"

    def volume(volume_name: str, handle: str, claim: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {"driver": attach, "volumeHandle": handle},
        }
        if claim:
            spec["claimRef"] = {"namespace": BARRIER_NS, "name": claim}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name},
            "spec": spec,
        }

    def claim(claim_name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name, "namespace": BARRIER_NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec},
        }

    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provision,
        "volumeBindingMode": "WaitForFirstConsumer",
    }
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": provision},
        "spec": {"attachRequired": False, "storageCapacity": True},
    }
    csi_node = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": node_a},
        "spec": {"drivers": [{"name": attach, "nodeID": node_a, "allocatable": {"count": 1}}]},
    }
    used = volume(f"{name}-used", "used", claim=name)
    attached = volume(f"{name}-attached", "attached", claim=None)
    bound_claim = claim(name, storageClassName="", volumeName=used["metadata"]["name"])
    bound_claim["metadata"]["annotations"] = {ANN_BIND_COMPLETED: "yes"}
    unbound_claim = claim(f"{name}-provision", storageClassName=name)
    capacity = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": {"name": name, "namespace": BARRIER_NS},
        "storageClassName": name,
        "nodeTopology": {"matchLabels": {HOSTNAME: node_b}},
        "capacity": "10Gi",
    }
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {
            "attacher": attach,
            "nodeName": node_a,
            "source": {"persistentVolumeName": attached["metadata"]["name"]},
        },
    }
    storage = [
        storage_class,
        driver,
        csi_node,
        used,
        attached,
        bound_claim,
        unbound_claim,
        capacity,
        attachment,
    ]

    def uses(claim_name: str) -> list[dict[str, Any]]:
        return [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]

    volumes_pod = _probe_pod(f"{name}-probe-volumes", {}, "100m", "128Mi", volumes=uses(name), **common)
    anti_affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": PROBE_LABEL, "operator": "Exists"}]},
                    "topologyKey": HOSTNAME,
                }
            ]
        }
    }
    capacity_pod = _probe_pod(
        f"{name}-probe-capacity",
        {},
        "100m",
        "128Mi",
        volumes=uses(unbound_claim["metadata"]["name"]),
        affinity=anti_affinity,
        **common,
    )
    probes = [
        Probe(
            "PersistentVolumeClaim, PersistentVolume, CSINode, VolumeAttachment",
            volumes_pod,
            [bound_claim, used, csi_node, attachment, attached],
            node=node_b,
        ),
        Probe(
            "StorageClass, CSIDriver, CSIStorageCapacity",
            capacity_pod,
            [unbound_claim, storage_class, driver, capacity],
            reasons=(
                "1 node(s) did not have enough free storage",
                "1 node(s) didn't match pod anti-affinity rules",
            ),
        ),
    ]
    return storage, probes


def dra_probes(
    name: str, node_a: str, node_b: str, common: dict[str, Any]
) -> tuple[list[dict[str, Any]], Probe]:
    """The DRA probe objects and their probe pod (see ``probe_layout`` for the nodes): a DeviceClass of a
    probe driver, a ResourceSlice of that driver with one device on ``a`` and then one with one device on
    ``b``, a DeviceTaintRule tainting ``a``'s device (NoSchedule), and a ResourceClaim asking for one
    device of that class, tolerating nothing. The pod uses the claim and lands on ``b`` once the class,
    ``b``'s slice, the rule and the claim are known. Until the claim is, DynamicResources holds the pod
    back at PreEnqueue (no condition at all); until the class is, its PreFilter rejects the pod; until
    ``b``'s slice is, no device is there; until the rule is, ``a``'s device is free to take and ``a``, the
    lighter node, wins (its slice, made first, is known once ``b``'s is). kube-scheduler allocates the
    claim (PreBind gives it a finalizer that is taken off before it is deleted)."""
    driver = f"dra.{name}.example.com"
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }

    def resource_slice(slice_name: str, node: str) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": slice_name, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "probe"}],
            },
        }

    slice_a, slice_b = resource_slice(f"{name}-a", node_a), resource_slice(name, node_b)
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {
            "deviceSelector": {"driver": driver, "pool": f"{name}-a"},
            "taint": {"key": f"{PROBE_LABEL}/probe", "effect": "NoSchedule"},
        },
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": BARRIER_NS},
        "spec": {"devices": {"requests": [{"name": "probe", "exactly": {"deviceClassName": name}}]}},
    }
    pod = _probe_pod(
        f"{name}-probe-dra",
        {},
        "100m",
        "128Mi",
        resourceClaims=[{"name": "probe", "resourceClaimName": name}],
        **common,
    )
    probe = Probe(
        "DeviceClass, ResourceSlice, DeviceTaintRule, ResourceClaim",
        pod,
        [device_class, slice_b, rule, claim],
        node=node_b,
    )
    return [device_class, slice_a, slice_b, rule, claim], probe


def test_probe_layout() -> None:
    """Each probe pod gets its outcome when every probe object is known, another one without any single
    object it reads."""
    layout = probe_layout("t0")
    everything = [
        layout.namespace,
        *layout.workloads,
        *layout.storage,
        *layout.dra,
        *layout.nodes,
        *layout.bound,
    ]
    for probe in layout.probes:
        key = pod_key(probe.pod)
        seen = simulate([*everything, probe.pod])[key]
        assert probe.done(seen["node"], seen["message"]), (probe.kinds, seen)
        for needed in probe.needs:
            without = [o for o in everything if o is not needed]
            unseen = simulate([*without, probe.pod])[key]
            assert not probe.done(unseen["node"], unseen["message"]), (probe.kinds, needed, unseen)


# -- the real run ------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    node: str | None = None
    condition: str | None = None  # PodScheduled=False message
    reason: str | None = None
    event: str | None = None  # the latest FailedScheduling note
    victims: list[str] = field(default_factory=list)
    nominated: str | None = None
    #: held at PreEnqueue by a plugin other than SchedulingGates (no condition, counted as gated): the
    #: plugin(s) whose count of unschedulable pods went up with it
    held: str = ""
    #: per ``spec.resourceClaims`` entry: the devices allocated to its claim, as simulate lists them
    devices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class RealRun:
    def __init__(self, cp: ClusterHarness, prepared: Prepared, scheduler_name: str = SCHEDULER_NAME) -> None:
        self.cp = cp
        self.p = prepared
        self.scheduler_name = scheduler_name
        self.uids: dict[str, str] = {}
        #: the pending pods in the order they are created (``queue_order``), set by ``run``
        self.order: list[dict[str, Any]] = []
        self.outcomes: dict[str, Outcome] = {}
        self.victims: set[str] = set()
        #: the scenario's ResourceClaims after the run (``namespace/name``), with kube-scheduler's writes
        self.claims: dict[str, dict[str, Any]] = {}

    # setup and teardown

    def setup(self) -> None:
        assert_no_controllers(self.cp)
        for ns, labels in self.p.namespaces.items():
            self.ensure_namespace(ns, labels)
        for pc in self.p.classes:
            self.cp.post("/apis/scheduling.k8s.io/v1/priorityclasses", creatable(pc))
        for pdb in self.p.pdbs:
            ns, name = pdb["metadata"]["namespace"], pdb["metadata"]["name"]
            self.cp.post(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", creatable(pdb))
            self.patch_status(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{name}", pdb["status"])
        for obj in self.p.workloads:
            self.cp.post(collection_path(obj), creatable(obj))
        for node in self.p.nodes:
            self.cp.post("/api/v1/nodes", creatable(node))
        for obj in self.p.storage:
            self.cp.post(collection_path(obj), creatable(obj))
            if obj.get("status") and obj["kind"] in STATUS_KINDS:
                self.patch_status(object_path(obj), obj["status"])
        for obj in self.p.dra:
            self.cp.post(collection_path(obj), creatable(obj))
        for pod in self.p.bound:
            created = self.cp.post(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", creatable(pod))
            self.uids[pod_key(pod)] = created["metadata"]["uid"]
            if pod.get("status"):
                self.patch_status(
                    f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}",
                    pod["status"],
                )
        for claim in self.p.dra:  # an allocation held by bound pods, reserved for them by their real uids
            if claim["kind"] == "ResourceClaim" and claim.get("status"):
                status = copy.deepcopy(claim["status"])
                ns = claim["metadata"]["namespace"]
                for ref in status.get("reservedFor") or ():
                    ref["uid"] = self.uids[f"{ns}/{ref['name']}"]
                self.patch_status(object_path(claim), status)
        self.probe()

    def ensure_namespace(self, name: str, labels: dict[str, str]) -> None:
        """The namespace exists with exactly ``labels`` (an earlier scenario may have left it)."""
        resp = self.cp.api.request("GET", f"/api/v1/namespaces/{name}")
        if resp.status == 404:
            self.cp.post("/api/v1/namespaces", namespace(name, labels))
            return
        if not resp.ok:
            raise ApiError(f"GET namespace {name}: HTTP {resp.status}: {resp.text()[:300]}")
        current = resp.json()["metadata"].get("labels") or {}
        if current != labels:
            gone = {key: None for key in current if key not in labels}
            self.merge_patch(f"/api/v1/namespaces/{name}", {"metadata": {"labels": {**gone, **labels}}})

    def merge_patch(self, path: str, body: dict[str, Any]) -> None:
        resp = self.cp.api.request("PATCH", path, body, content_type="application/merge-patch+json")
        if not resp.ok:
            raise ApiError(f"PATCH {path}: HTTP {resp.status}: {resp.text()[:300]}")

    def patch_status(self, path: str, status: dict[str, Any]) -> None:
        self.merge_patch(path + "/status", {"status": status})

    def probe(self) -> None:
        """Returns once the default kube-scheduler's Namespace, Service, controller and storage listers hold
        every object made so far (module docstring)."""
        layout = probe_layout(uuid.uuid4().hex[:6])
        created: list[tuple[str, bool]] = []  # (path, whether finalizers must be taken off)
        try:
            self.merge_patch(
                f"/api/v1/namespaces/{BARRIER_NS}",
                {"metadata": {"labels": layout.namespace["metadata"]["labels"]}},
            )
            for obj in [*layout.workloads, *layout.storage, *layout.dra]:
                self.cp.post(collection_path(obj), obj)
                created.append((object_path(obj), obj["kind"] in FINALIZED_KINDS))
            for node in layout.nodes:
                self.cp.post("/api/v1/nodes", node)
                created.append((f"/api/v1/nodes/{node['metadata']['name']}", False))
            for pod in layout.bound:
                self.cp.post(f"/api/v1/namespaces/{BARRIER_NS}/pods", pod)
                created.append((self.pod_path(pod_key(pod)), False))
            for probe in layout.probes:
                self.probe_one(probe)
        finally:
            for path, finalized in reversed(created):
                self.remove(path, finalized)

    def remove(self, path: str, finalized: bool = False) -> None:
        """Deletes the object at once: no grace period, dependents in the background (an orphaning delete
        would wait for the garbage collector, which does not run here); a ``finalized`` one (a volume or
        claim) first loses its protection finalizer, which no controller here would remove."""
        if finalized:
            resp = self.cp.api.request(
                "PATCH",
                path,
                {"metadata": {"finalizers": None}},
                content_type="application/merge-patch+json",
            )
            if resp.status not in (200, 404):
                raise ApiError(f"PATCH {path}: HTTP {resp.status}: {resp.text()[:300]}")
        self.cp.request(
            "DELETE",
            path,
            {"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
            expect=(200, 202, 404),
        )

    def probe_one(self, probe: Probe) -> None:
        pod = probe.pod
        seen: list[str] = []
        for attempt in range(PROBE_ATTEMPTS):
            body = copy.deepcopy(pod)
            body["metadata"]["name"] += f"-{attempt}"
            path = self.pod_path(pod_key(body))
            self.cp.post(f"/api/v1/namespaces/{BARRIER_NS}/pods", body)
            deadline = time.monotonic() + POD_TIMEOUT
            node = message = None
            while node is None and message is None and time.monotonic() < deadline:
                got = self.cp.get(path)
                cond = scheduled_condition(got) or {}
                node = got["spec"].get("nodeName")
                if cond.get("status") == "False" and cond.get("message"):
                    message = str(cond["message"])
                elif node is None:
                    time.sleep(POLL)
            self.cp.delete(path)
            if probe.done(node, message):
                return
            seen.append(f"bound to {node}" if node else str(message))
            time.sleep(POLL)
        raise AssertionError(
            f"kube-scheduler's {probe.kinds} lister(s) never caught up: the probe pod got {seen}\n"
            f"{self.cp.cluster.log_tail('kube-scheduler')}"
        )

    def barrier(self) -> None:
        """Returns once kube-scheduler's snapshot holds exactly this scenario's nodes (module docstring)."""
        names = [n["metadata"]["name"] for n in self.p.nodes]
        n = len(names)
        wanted = f"0/{n} nodes are available: {n} node(s) didn't match Pod's node affinity/selector."
        seen: list[str] = []
        for _ in range(10):
            name = f"barrier-{uuid.uuid4().hex[:6]}"
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": BARRIER_NS},
                "spec": {
                    "schedulerName": self.scheduler_name,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {"key": "metadata.name", "operator": "NotIn", "values": [nn]}
                                            for nn in names
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
            }
            path = f"/api/v1/namespaces/{BARRIER_NS}/pods/{name}"
            self.cp.post(f"/api/v1/namespaces/{BARRIER_NS}/pods", body)
            deadline = time.monotonic() + 3.0
            message = None
            while time.monotonic() < deadline:
                pod = self.cp.get(path)
                if pod["spec"].get("nodeName"):
                    message = f"bound to {pod['spec']['nodeName']}"
                    break
                message = (scheduled_condition(pod) or {}).get("message")
                if message and message.startswith(wanted):
                    self.cp.delete(path)
                    return
                time.sleep(POLL)
            seen.append(str(message))
            self.cp.delete(path)
        raise AssertionError(
            f"kube-scheduler never saw exactly the scenario's {n} nodes; barrier saw: {seen}\n"
            f"{self.cp.cluster.log_tail('kube-scheduler')}"
        )

    def teardown(self) -> None:
        for ns in [*self.p.namespaces, BARRIER_NS]:
            self.cp.request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}, expect=(200,)
            )
            self.cp.request("DELETE", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", expect=(200,))
        for obj in [*self.p.workloads, *reversed(self.p.storage), *reversed(self.p.dra)]:
            self.remove(object_path(obj), obj["kind"] in FINALIZED_KINDS)
        for ns in self.p.namespaces:  # claims kube-scheduler made for extended resources (owned by pods, but
            # no garbage collector runs here): left, their devices would count as taken in later scenarios
            claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
            for claim in self.cp.get(claims)["items"]:
                self.remove(f"{claims}/{claim['metadata']['name']}", finalized=True)
        for pc in self.p.classes:
            self.cp.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")
        self.cp.request("DELETE", "/api/v1/nodes", expect=(200,))

    # pending pods

    def queue_order(self) -> list[dict[str, Any]]:
        """The pending pods in the order kube-scheduler's queue takes pods that are all there at once
        (PrioritySort): by priority as the API server resolves it (its Priority admission plugin, asked
        through a dry-run create), then by the creationTimestamp the file gives (none: first), then in file
        order. Nothing of simulate's goes into it: a pod simulate orders otherwise shows as a difference."""
        keyed = []
        for index, pod in enumerate(self.p.pending):
            ns = pod["metadata"]["namespace"]
            admitted = self.cp.post(f"/api/v1/namespaces/{ns}/pods?dryRun=All", creatable(pod))
            priority = int(admitted["spec"].get("priority") or 0)
            keyed.append(((-priority, file_timestamp(pod), index), pod))
        return [pod for _, pod in sorted(keyed, key=lambda kp: kp[0])]

    def run(self) -> None:
        self.order = self.queue_order()
        for pod in self.order:
            ns = pod["metadata"]["namespace"]
            gated = gate_counts(self.cp)
            created = self.cp.post(f"/api/v1/namespaces/{ns}/pods", creatable(pod))
            self.uids[pod_key(pod)] = created["metadata"]["uid"]
            self.wait_for(pod_key(pod), gated)
        self.settle()
        for claim in self.p.dra:
            if claim["kind"] == "ResourceClaim":
                self.claims[pod_key(claim)] = self.cp.get(object_path(claim))
        for pod in self.order:
            self.outcomes[pod_key(pod)] = self.read(pod_key(pod))

    def pod_path(self, key: str) -> str:
        ns, name = key.split("/")
        return f"/api/v1/namespaces/{ns}/pods/{name}"

    def wait_for(self, key: str, gated: dict[str, float]) -> None:
        """Until the pod is bound, gated, or failed with no preemption left to finish; victims of its
        preemption are force-deleted on the way (as a kubelet would confirm their termination). A pod
        that a PreEnqueue plugin holds back gets no condition: it is known by kube-scheduler's count of
        gated pods, and the plugin by its count of pods it holds, going up from ``gated`` (the counts
        before the pod was created)."""
        deadline = time.monotonic() + POD_TIMEOUT
        next_metrics = time.monotonic() + HELD_CHECK
        while True:
            self.finish_victims(key)
            pod = self.cp.get(self.pod_path(key))
            if pod["spec"].get("nodeName"):
                return
            cond = scheduled_condition(pod) or {}
            if cond.get("reason") == "SchedulingGated":
                return
            if not cond and time.monotonic() > next_metrics:
                next_metrics = time.monotonic() + HELD_CHECK
                now = gate_counts(self.cp)
                if now[""] > gated[""]:
                    plugins = sorted(p for p, n in now.items() if p and n > gated.get(p, 0))
                    self.outcomes.setdefault(key, Outcome()).held = ", ".join(plugins) or "?"
                    return
            preempting = pod["status"].get("nominatedNodeName")
            if cond.get("status") == "False" and cond.get("message") and not preempting:
                return
            if time.monotonic() > deadline:
                log = self.cp.cluster.log_tail("kube-scheduler")
                raise AssertionError(
                    f"{key}: neither bound nor reported unschedulable within {POD_TIMEOUT:.0f} s: "
                    f"{dumps(pod['status'])}\nkube-scheduler log:\n{log}"
                )
            time.sleep(POLL)

    def finish_victims(self, preemptor: str) -> None:
        for ns in self.p.namespaces:
            for pod in self.cp.get(f"/api/v1/namespaces/{ns}/pods")["items"]:
                if pod["metadata"].get("deletionTimestamp"):
                    key = pod_key(pod)
                    self.victims.add(key)
                    if preemptor:
                        self.outcomes.setdefault(preemptor, Outcome()).victims.append(key)
                    self.cp.delete(self.pod_path(key))

    def settle(self) -> None:
        """Until kube-scheduler's active and backoff queues stay empty and no attempt is made."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        last: tuple[float, ...] | None = None
        stable = 0
        while stable < 3:
            if time.monotonic() > deadline:
                raise AssertionError(f"kube-scheduler did not settle: {last}")
            m = scheduler_metrics(self.cp)
            queues = (
                m.get('scheduler_pending_pods{queue="active"}', 0),
                m.get('scheduler_pending_pods{queue="backoff"}', 0),
            )
            attempts = sum(v for k, v in m.items() if k.startswith("scheduler_schedule_attempts_total"))
            state = (*queues, attempts)
            stable = stable + 1 if state == last and queues == (0, 0) else 0
            last = state
            self.finish_victims("")
            time.sleep(0.15)

    def read(self, key: str) -> Outcome:
        outcome = self.outcomes.get(key) or Outcome()
        resp = self.cp.api.request("GET", self.pod_path(key))
        if resp.status == 404:  # preempted after it was scheduled
            return outcome
        pod = resp.json()
        outcome.node = pod["spec"].get("nodeName")
        outcome.nominated = pod["status"].get("nominatedNodeName")
        cond = scheduled_condition(pod) or {}
        if outcome.node or cond:
            outcome.held = ""
        for entry in pod["spec"].get("resourceClaims") or ():
            claim = self.claims.get(f"{pod['metadata']['namespace']}/{entry.get('resourceClaimName')}")
            results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}
            outcome.devices[entry["name"]] = [device_result(r) for r in results.get("results") or ()]
        extended = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        if extended.get("resourceClaimName"):  # the claim made for extended resources backed by DRA
            ns = pod["metadata"]["namespace"]
            path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{extended['resourceClaimName']}"
            found = self.cp.api.request("GET", path)
            claim = found.json() if found.status == 200 else {}
            results = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
            # simulate lists it as ``<extended-resources>`` (``simulate.dra.EXTENDED_RESOURCES``)
            outcome.devices["<extended-resources>"] = [device_result(r) for r in results.get("results") or ()]
        if cond.get("status") == "False":
            outcome.condition, outcome.reason = cond.get("message"), cond.get("reason")
            # a gated pod never reaches the scheduler: it should have no FailedScheduling event
            gated = outcome.reason == "SchedulingGated"
            outcome.event = self.latest_event(key, None if gated else outcome.condition)
        return outcome

    def latest_event(self, key: str, expected: str | None) -> str | None:
        """The newest FailedScheduling note for the pod; waits a little for the one matching the
        condition (events are sent asynchronously)."""
        ns = key.split("/")[0]
        deadline = time.monotonic() + 5.0
        while True:
            events = [
                e
                for e in self.cp.get(f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
                if e["regarding"].get("uid") == self.uids[key] and e.get("reason") == "FailedScheduling"
            ]
            events.sort(
                key=lambda e: (e.get("series") or {}).get("lastObservedTime") or e.get("eventTime") or ""
            )
            note = events[-1]["note"] if events else None
            if note == expected or time.monotonic() > deadline:
                return note
            time.sleep(0.1)


def file_timestamp(pod: dict[str, Any]) -> float:
    """The pod's creationTimestamp as the scenario file gives it (epoch seconds; none: before any)."""
    value = pod["metadata"].get("creationTimestamp")
    if not value:
        return float("-inf")
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp as one
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


def gate_counts(cp: ClusterHarness) -> dict[str, float]:
    """From kube-scheduler's /metrics: under ``""`` its count of pending pods never tried because they are
    gated (by SchedulingGates or another PreEnqueue plugin), under a plugin's name its count of pending
    pods that plugin holds back or last rejected (``scheduler_unschedulable_pods``)."""
    counts = {"": 0.0}
    for name, value in scheduler_metrics(cp).items():
        if name == 'scheduler_pending_pods{queue="gated"}':
            counts[""] = value
        m = re.match(r'scheduler_unschedulable_pods\{plugin="([^"]+)"', name)
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + value
    return counts


def scheduler_metrics(cp: ClusterHarness) -> dict[str, float]:
    url = cp.cluster.urls["kube-scheduler"] + "/metrics"
    with urllib.request.urlopen(url, timeout=5, context=ssl._create_unverified_context()) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(
            r"^(scheduler_(?:pending_pods|schedule_attempts_total|unschedulable_pods)\S*) (\S+)$", line
        )
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


# -- comparing ---------------------------------------------------------------------------------------------


def compare(prepared: Prepared, real: RealRun) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Differences between kube-scheduler and simulate, pod by pod in queue order. At the first pod
    kube-scheduler placed elsewhere (on another of simulate's tied best nodes, or not: then that is a
    difference), that pod and every one before it are frozen in kube-scheduler's outcome (bound there,
    or left out; their victims gone) and simulate runs again for the pods after it, so that each is
    compared against the cluster state kube-scheduler saw and each difference is reported once."""
    objects = copy.deepcopy(prepared.objects)
    frozen: set[str] = set()
    found: list[str] = []  # differences of the frozen pods
    exact = exact_device_nodes(prepared)
    while True:
        sim = simulate(objects, prepared.profile)
        diffs: list[str] = []
        compared: list[str] = []
        diverged = False
        for pod in real.order:
            key = pod_key(pod)
            if key in frozen:
                continue
            got, want = real.outcomes[key], sim[key]
            diffs += compare_pod(key, got, want, exact)
            compared.append(key)
            if got.node != want["node"]:
                if got.node and want["node"] and got.node not in best_nodes(want):
                    diffs.append(
                        f"{key}: kube-scheduler chose {got.node}, "
                        f"simulate's best node(s): {sorted(best_nodes(want))}"
                    )
                diverged = True
                break
        if not diverged:
            # victims that appeared while settling, not while one pod was being waited for
            attributed = {v for outcome in real.outcomes.values() for v in outcome.victims}
            expected = {v for key, p in sim.items() if key not in frozen for v in p.get("victims") or ()}
            stray = real.victims - attributed - expected
            if stray:
                diffs.append(f"preempted by kube-scheduler only: {sorted(stray)}")
            return found + diffs, sim
        found += diffs
        for key in compared:
            frozen.add(key)
            outcome = real.outcomes[key]
            if outcome.node:  # bound there, as kube-scheduler did, with the devices it allocated
                pod_object(objects, key)["spec"]["nodeName"] = outcome.node
                freeze_claims(objects, key, real, {pod_key(p) for p in prepared.bound} | frozen)
            else:  # kube-scheduler left it pending: it holds nothing
                objects.remove(pod_object(objects, key))
            for victim in outcome.victims:  # gone, as kube-scheduler preempted them
                objects.remove(pod_object(objects, victim))


def pod_object(objects: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Pod" and pod_key(o) == key)


def freeze_claims(objects: list[dict[str, Any]], key: str, real: RealRun, placed: set[str]) -> None:
    """The claims of a pod frozen as bound get the allocation kube-scheduler wrote, reserved for the pods
    already placed (bound in the file or frozen), by the uids simulate gives them."""
    pod = pod_object(objects, key)
    ns = pod["metadata"]["namespace"]
    for entry in pod["spec"].get("resourceClaims") or ():
        claim_key = f"{ns}/{entry.get('resourceClaimName')}"
        written = (real.claims.get(claim_key) or {}).get("status") or {}
        claim = next((o for o in objects if o["kind"] == "ResourceClaim" and pod_key(o) == claim_key), None)
        if claim is None or not written.get("allocation"):
            continue
        reserved = []
        for ref in written.get("reservedFor") or ():
            user = f"{ns}/{ref.get('name')}"
            users = [o for o in objects if o["kind"] == "Pod" and pod_key(o) == user]
            if user in placed and users:  # not one of the pods still to place, nor a victim
                meta = users[0]["metadata"]
                reserved.append({**ref, "uid": meta.get("uid") or f"sim-{ns}-{meta['name']}"})
        claim["status"] = {"allocation": copy.deepcopy(written["allocation"]), "reservedFor": reserved}


def exact_device_nodes(prepared: Prepared) -> set[str]:
    """The nodes where kube-scheduler's choice of devices is deterministic, so that it is compared: those
    that see at most one pool. The allocator walks pools sorted by driver and name, a pool's slices
    sorted by name, and within a slice the devices in their order (v1.37.2); a node that sees several
    pools is left out all the same (each pool's devices would be compared, not the choice among pools)."""
    slices = [RESOURCE_SLICES.parse(o) for o in prepared.dra if o["kind"] == "ResourceSlice"]
    exact = set()
    for node in prepared.nodes:
        meta = node["metadata"]
        seen = [s for s in slices if s.reachable_from(meta.get("labels") or {}, meta["name"])]
        if len({(s.driver, s.pool) for s in seen}) <= 1:
            exact.add(meta["name"])
    return exact


def device_result(result: dict[str, Any]) -> dict[str, Any]:
    """What is compared of an allocated device: request, driver, pool and device, whether it is a share
    (its ``shareID`` is random) and what that share consumes (as the API server prints quantities)."""
    out = {k: result[k] for k in ("request", "driver", "pool", "device")}
    if result.get("shareID"):
        out["shared"] = True
    if result.get("consumedCapacity"):
        out["consumedCapacity"] = {k: format_quantity(v) for k, v in result["consumedCapacity"].items()}
    return out


def held(sim: dict[str, Any]) -> bool:
    """simulate never tried the pod because a PreEnqueue plugin other than SchedulingGates held it back:
    no node, no node explained, and the gate's reason for a message (not a FitError's "0/N nodes")."""
    message = sim["message"] or ""
    return (
        not sim["node"] and not sim.get("nodes") and message != GATED_MESSAGE and not message.startswith("0/")
    )


def compare_pod(key: str, got: Outcome, want: dict[str, Any], exact: set[str]) -> list[str]:
    diffs = []
    if got.held or held(want):
        # kube-scheduler writes nothing for such a pod (the reason goes to its log at V(4) only): no
        # condition, no event; so only that is compared, not simulate's text of the reason
        if not (got.held and held(want)) or got.condition or got.event:
            diffs.append(
                f"{key}: kube-scheduler: {'held at PreEnqueue by ' + got.held if got.held else 'not held'} "
                f"(node {got.node}, condition {got.condition!r}, event {got.event!r}); "
                f"simulate: {'held at PreEnqueue' if held(want) else 'not held'} "
                f"(node {want['node']}, message {want['message']!r})"
            )
        return diffs
    if got.node and got.node == want["node"] and got.node in exact:
        for entry in want.get("resourceClaims") or ():
            simulated = [device_result(d) for d in entry["devices"]]
            allocated = got.devices.get(entry["name"])
            if allocated != simulated:
                diffs.append(
                    f"{key}: devices of claim {entry['name']}: "
                    f"kube-scheduler {allocated}, simulate {simulated}"
                )
    if bool(got.node) != bool(want["node"]):
        diffs.append(
            f"{key}: kube-scheduler: {got.node or 'unschedulable: ' + repr(got.condition)}; "
            f"simulate: {want['node'] or 'unschedulable: ' + repr(want['message'])}"
        )
        return diffs
    if not got.node:
        gated = want["message"] == GATED_MESSAGE
        ours = want["message"]
        if got.condition != ours:
            diffs.append(
                f"{key}: PodScheduled message\n  kube-scheduler: {got.condition}\n  simulate:       {ours}"
            )
        if not gated and got.event != ours:
            diffs.append(
                f"{key}: FailedScheduling event\n  kube-scheduler: {got.event}\n  simulate:       {ours}"
            )
        if gated and (got.reason != "SchedulingGated" or got.event is not None):
            diffs.append(f"{key}: PodScheduled reason {got.reason}, event {got.event!r}; simulate: gated")
    victims = sorted(want.get("victims") or [])
    if sorted(got.victims) != victims:
        diffs.append(f"{key}: victims: kube-scheduler {sorted(got.victims)}, simulate {victims}")
    return diffs


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_kube_scheduler_agrees(own_control_plane: ClusterHarness, path: Path) -> None:
    scenario = yaml.safe_load(path.read_text())
    profile, untranslatable = (
        kube_scheduler_profile(scenario["profile"]) if scenario.get("profile") else (None, "")
    )
    listed = WITHOUT_KUBE_SCHEDULER.get(path.stem)
    if untranslatable:
        assert listed, (
            f"{path.name}: its profile has no kube-scheduler equivalent ({untranslatable}); translate it "
            "(kube_scheduler_profile) or list the scenario in WITHOUT_KUBE_SCHEDULER with the reason"
        )
        pytest.skip(reason=f"no kube-scheduler equivalent of the scenario's profile: {listed}")
    assert not listed, f"{path.name} is listed in WITHOUT_KUBE_SCHEDULER, but its profile translates"
    prefix = f"s{SCENARIOS.index(path):02d}-"
    prepared = prepare(scenario, prefix)
    real = RealRun(own_control_plane, prepared)
    try:
        real.setup()
        with scheduler_profile(own_control_plane, profile) as real.scheduler_name:
            real.barrier()
            real.run()
    finally:
        real.teardown()
    diffs, sim = compare(prepared, real)
    lines = []
    for pod in real.order:
        key = pod_key(pod)
        ours = sim.get(key)
        lines.append(f"  {key}\n    kube-scheduler: {real.outcomes[key]}")
        lines.append(
            f"    simulate:       node={ours['node']} message={ours['message']!r}"
            if ours
            else "    simulate:       (frozen in kube-scheduler's outcome, see above)"
        )
    report = "\n".join(lines)
    assert not diffs, (
        f"{path.name}: kube-scheduler and simulate differ:\n" + "\n".join(diffs) + f"\n\n{report}"
    )
