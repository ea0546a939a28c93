"""Differential test: every scenario file (``tests/scenarios/*.yaml``) runs through the upstream
kube-scheduler on a real control plane and through ``kopf-scheduler simulate``; the two must agree on
every pending pod: bound or not, the FailedScheduling message (the event's note and the PodScheduled
condition's message), the preemption victims, and the chosen node wherever ``simulate --explain`` shows
that the best node is unique.

How the real run is made comparable:

* This module starts its own control plane (etcd, kube-apiserver, kube-scheduler) in a temporary state
  directory, separate from the session's ``control_plane``: kube-scheduler's message counts every node
  it knows ("0/N nodes are available"), so the scenario's nodes must be the only nodes, and no other
  test's pending pod may take them. It is stopped at the end of the module.
* Scenarios run one after the other; each one's pods, budgets, priority classes, Services, controllers
  and nodes are deleted before the next starts. Namespaces stay (without kube-controller-manager's
  namespace controller a deleted one would stay Terminating for good): each scenario sets the labels of
  the namespaces it uses to exactly those simulate gives them (its own plus ``kubernetes.io/metadata.name``,
  which the API server sets); a namespace an earlier scenario left behind holds no pods, so it matches
  nothing a scenario's pod could look for.
* Services, ReplicaSets, StatefulSets and ReplicationControllers are created as the file has them (no
  kube-controller-manager runs, so a controller's ``replicas`` creates no pods; its spec still has to pass
  validation: a selector and a template whose labels match it). An ``ownerReferences`` entry without a
  ``uid`` gets a fixed one (the API server requires one but never checks that the owner exists;
  kube-scheduler looks owners up by name).
* Node names get a per-scenario prefix (rewritten everywhere they are referred to: ``spec.nodeName``,
  hostname labels and selectors, ``matchFields``), so a node of the previous scenario the scheduler has
  not yet forgotten can never pass for one of this scenario.
* A barrier pod proves the scheduler's cache holds exactly the scenario's nodes and bound pods before
  the first pending pod is created: it tolerates every taint, is kept off each scenario node by a
  ``metadata.name NotIn`` requirement and is created after every bound pod (one pod informer, so the
  scheduler has seen those pods once it sees the barrier). Only when the scheduler reports
  "0/N nodes are available: N node(s) didn't match Pod's node affinity/selector" with N the scenario's
  node count is the snapshot right; otherwise the barrier is replaced and tried again.
* The barrier speaks for the pod and node informers only. kube-scheduler reads Namespaces, Services and
  controllers through informers of their own, whose events are not ordered against the pods' (waiting
  until the API serves an object says nothing about a watch). So before the barrier a probe proves that
  each of those listers holds every object created (or deleted) so far: per kind, one probe object is
  created in the barrier namespace after the scenario's ones (each informer's watch delivers its kind's
  events in order, so an informer that has the probe object has everything before it), and one probe pod
  whose placement depends on it is scheduled onto two probe nodes kept apart by a node selector. Node
  ``a`` is lighter, but holds one pod the probe object selects: the default spreading that the probe
  Service or controller gives a probe pod outweighs that (``probe_layout``; ``test_probe_layout`` checks
  it with simulate), so the pod lands on ``b`` only once its lister has the object. For Namespaces the
  barrier namespace gets a fresh label, and the probe pod's required affinity to a pod on ``b`` selects
  namespaces by that label: until the Namespace lister has it, no namespace matches and the pod is
  unschedulable. A probe pod that lands elsewhere is deleted and a new one tried; the probe nodes and pods
  are deleted afterwards, and the barrier that follows proves kube-scheduler has seen that too.
* A scenario with a ``profile`` runs on a kube-scheduler restarted with that profile once the scenario's
  objects are made (and probed, by the default kube-scheduler: the probe relies on the default spreading,
  which a profile may change): a SchedulingProfile spec has the fields of a KubeSchedulerConfiguration
  profile (``api/profile.py``), so ``schedulerName``, ``percentageOfNodesToScore``, ``plugins`` and
  ``pluginConfig`` are passed on as they are (a profile with extenders is skipped). A kube-scheduler
  that starts lists everything and waits for every informer to sync before it schedules, so the restart
  needs no probe; the barrier pods use the profile's scheduler name, so the profile should serve
  ``default-scheduler`` (or the pods name its scheduler). The default kube-scheduler is started again
  afterwards; simulate gets the same profile.
* Pending pods are created one at a time in the queue order simulate uses (priority, then
  creationTimestamp, then file order), each with ``schedulerName: default-scheduler``; the next is
  created only when the previous one is bound, gated, or has PodScheduled=False with a message and no
  preemption in progress. No kubelet finishes a graceful deletion, so preemption victims (bound pods the
  scheduler deleted) are force-deleted here, as a kubelet would confirm; then the preemptor binds.
* After the last pod the test waits until kube-scheduler's active and backoff queues are empty (its
  /metrics), because a later pod's binding may requeue an earlier one, as in simulate.
* A pod given ``spec.priority`` without a class gets a generated PriorityClass of that value (the
  Priority admission plugin refuses a bare priority); simulate reads the same rewritten objects.

Where ``simulate --explain`` shows several nodes tied for the best score, kube-scheduler may pick
another one of them (not a difference). Whenever kube-scheduler's outcome for a pod is not simulate's,
that pod and the ones before it are frozen in kube-scheduler's outcomes (bound there, or left out) and
simulate runs again, so every later pod is compared against the cluster state kube-scheduler saw and
each difference is reported once.

DefaultPreemption is part of our default profile (``plugins/defaults.py``), so messages are compared
whole, ``preemption: ...`` suffix included (were it not, only the part before " preemption: " would be
compared). DynamicResources is not (yet): kube-scheduler v1.34 enables it
by default (feature gate DynamicResourceAllocation, GA) and its PostFilter answers every pod without
resource claims with ``Unschedulable "no new claims to deallocate"`` (``dynamicresources.go``), which
``RunPostFilterPlugins`` joins with DefaultPreemption's reason: "... no new claims to deallocate,
preemption: ...". And when an earlier PreFilter (NodeAffinity's, say) ended the cycle as
UnschedulableAndUnresolvable, DynamicResources' PreFilter never ran, its PostFilter fails reading the
missing cycle state (``fwk.ErrNotFound``, "not found"), ``RunPostFilterPlugins`` stops at that error
before DefaultPreemption, and the message ends in "... not found" instead of "... preemption: ...".
While our default profile has no DynamicResources, ``comparable`` takes out exactly these two traces of
it (and, for the second, the preemption part it cut off); everything else must match verbatim.
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
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.__main__ import main
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness, dumps
from kopf_scheduler.errors import UsageError
from kopf_scheduler.framework.objects import (
    NAMESPACES,
    REPLICA_SETS,
    REPLICATION_CONTROLLERS,
    SERVICES,
    STATEFUL_SETS,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins.defaults import DEFAULT_MULTI_POINT
from kopf_scheduler.simulate.loader import load_cluster
from kopf_scheduler.simulate.output import GATED_MESSAGE

pytestmark = pytest.mark.e2e

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.yaml"))
SCHEDULER_NAME = "default-scheduler"
HOSTNAME = "kubernetes.io/hostname"
BARRIER_NS = "diff-barrier"
POD_TIMEOUT = 30.0
SETTLE_TIMEOUT = 40.0
POLL = 0.05
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: the kinds PodTopologySpread's default selector reads: Services and controllers
WORKLOAD_KINDS = {
    kind.kind: kind for kind in (SERVICES, REPLICA_SETS, STATEFUL_SETS, REPLICATION_CONTROLLERS)
}
#: label of the probe nodes, pods and objects, and of the barrier namespace (module docstring)
PROBE_LABEL = "diff-probe"
PROBE_ATTEMPTS = 40
DYNAMIC_RESOURCES = "DynamicResources"
DEFAULT_PREEMPTION = "DefaultPreemption"
#: DynamicResources' PostFilter reason for a pod without claims (see the module docstring)
NO_CLAIMS = "no new claims to deallocate"
#: its PostFilter's error when its PreFilter never ran (``fwk.ErrNotFound`` reading the cycle state)
CYCLE_STATE_NOT_FOUND = "not found"


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
        harness.post("/api/v1/namespaces", namespace(BARRIER_NS))
        yield harness
    finally:
        dev.down()
        atexit.unregister(dev.down)


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"labels": labels} if labels else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def kube_profile(spec: dict[str, Any]) -> dict[str, Any]:
    """A SchedulingProfile spec as a KubeSchedulerConfiguration profile: the same fields, as they are."""
    fields = ("schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig")
    return {"schedulerName": SCHEDULER_NAME, **{k: spec[k] for k in fields if spec.get(k) is not None}}


@contextlib.contextmanager
def scheduler_profile(cp: ClusterHarness, spec: dict[str, Any] | None) -> Iterator[str]:
    """kube-scheduler serving ``spec`` (restarted with it, and with the default afterwards); yields the
    scheduler name to give the barrier and probe pods."""
    if not spec:
        yield SCHEDULER_NAME
        return
    profile = kube_profile(spec)
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
    pending: list[dict[str, Any]]  # in queue order
    pdbs: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    #: every namespace the scenario uses -> its labels, as simulate reads them
    namespaces: dict[str, dict[str, str]]
    #: Services and controllers, in file order
    workloads: list[dict[str, Any]]
    #: the scenario's SchedulingProfile spec, if any
    profile: dict[str, Any] | None = None


def prepare(scenario: dict[str, Any], prefix: str) -> Prepared:
    """The scenario's objects with prefixed node names, PriorityClasses for bare priorities and owner
    references with a uid; the pending pods in simulate's queue order; the budgets with the status
    simulate gives them; the namespaces with the labels simulate gives them."""
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
    # Priorities resolved and the queue order computed exactly as simulate does.
    with _as_file(objects) as path:
        loaded = load_cluster([path])
    order = sorted(
        enumerate(loaded.pending_pods),
        key=lambda ip: (-int(ip[1]["spec"].get("priority") or 0), PodInfo(ip[1]).creation, ip[0]),
    )
    pods = {pod_key(o): o for o in objects if o["kind"] == "Pod"}
    pending = [pods[pod_key(p)] for _, p in order]
    bound = [o for o in objects if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    pdbs = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    for pdb in pdbs:
        pdb["metadata"].setdefault("namespace", "default")
    # The budgets' status as the disruption controller (absent here) would have set it: simulate's.
    allowed = {pod_key(p): p.get("status") for p in loaded.pdbs}
    for pdb in pdbs:
        pdb["status"] = allowed[pod_key(pdb)]
    namespaces = {
        o["metadata"]["name"]: dict(o["metadata"]["labels"])
        for kind, o in loaded.objects
        if kind is NAMESPACES
    }
    return Prepared(
        objects=objects,
        nodes=[o for o in objects if o["kind"] == "Node"],
        bound=bound,
        pending=pending,
        pdbs=pdbs,
        classes=[o for o in objects if o["kind"] == "PriorityClass"],
        namespaces=namespaces,
        workloads=[o for o in objects if o["kind"] in WORKLOAD_KINDS],
        profile=scenario.get("profile"),
    )


def owner_uid(namespace: str, kind: Any, name: Any) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"kopf-scheduler/{namespace}/{kind}/{name}"))


def collection_path(obj: dict[str, Any]) -> str:
    """Where a Service or controller is created: its kind's collection in its namespace."""
    kind = WORKLOAD_KINDS[obj["kind"]]
    return kind.list_path.replace(
        f"/{kind.plural}", f"/namespaces/{obj['metadata']['namespace']}/{kind.plural}"
    )


def object_path(obj: dict[str, Any]) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


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
    for term in terms:
        for req in term.get("matchExpressions") or []:
            if req.get("key") == HOSTNAME:
                req["values"] = [names.get(v, v) for v in req.get("values") or []]
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name":
                req["values"] = [names.get(v, v) for v in req.get("values") or []]


def creatable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as it is POSTed: no server-set metadata; a pod's status is set afterwards."""
    body = copy.deepcopy(obj)
    meta = body["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(key, None)
    if obj["kind"] in ("Pod", "PodDisruptionBudget", *WORKLOAD_KINDS):
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
class ProbeLayout:
    #: a label for the barrier namespace, set before the probe
    namespace_labels: dict[str, str]
    #: one Service and one controller of each kind, in the barrier namespace
    workloads: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    bound: list[dict[str, Any]]
    #: (the kind it proves, the probe pod, where it lands once that kind's lister is up to date)
    probes: list[tuple[str, dict[str, Any], str]]


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
    to ``b``'s pod in namespaces labelled ``PROBE_LABEL: gen``.
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
    probes: list[tuple[str, dict[str, Any], str]] = []
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
        probes.append((kind, pod, node_b))
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
    pod = _probe_pod(f"{name}-probe-namespace", {}, "100m", "128Mi", affinity=affinity, **common)
    probes.append(("Namespace", pod, node_b))
    return ProbeLayout(
        namespace_labels={PROBE_LABEL: gen},
        workloads=[workload(kind) for kind in WORKLOAD_KINDS],
        nodes=nodes,
        bound=bound,
        probes=probes,
    )


def test_probe_layout() -> None:
    """Each probe pod lands on ``b`` when its kind's probe object is known, elsewhere when it is not."""
    layout = probe_layout("t0")
    labelled = namespace(BARRIER_NS, layout.namespace_labels)
    for kind, pod, want in layout.probes:
        key = pod_key(pod)
        base = [*layout.nodes, *layout.bound, pod]
        seen = simulate([labelled, *layout.workloads, *base])[key]
        assert seen["node"] == want, (kind, seen)
        unseen = simulate(base if kind == "Namespace" else [labelled, *base])[key]
        assert unseen["node"] != want, (kind, unseen)


# -- the real run ------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    node: str | None = None
    condition: str | None = None  # PodScheduled=False message
    reason: str | None = None
    event: str | None = None  # the latest FailedScheduling note
    victims: list[str] = field(default_factory=list)
    nominated: str | None = None


class RealRun:
    def __init__(self, cp: ClusterHarness, prepared: Prepared, scheduler_name: str = SCHEDULER_NAME) -> None:
        self.cp = cp
        self.p = prepared
        self.scheduler_name = scheduler_name
        self.uids: dict[str, str] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.victims: set[str] = set()

    # setup and teardown

    def setup(self) -> None:
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
        for pod in self.p.bound:
            created = self.cp.post(f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", creatable(pod))
            self.uids[pod_key(pod)] = created["metadata"]["uid"]
            if pod.get("status"):
                self.patch_status(
                    f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}",
                    pod["status"],
                )
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
        """Returns once the default kube-scheduler's Namespace, Service and controller listers hold every
        object made so far (module docstring)."""
        layout = probe_layout(uuid.uuid4().hex[:6])
        created: list[str] = []
        try:
            self.merge_patch(
                f"/api/v1/namespaces/{BARRIER_NS}", {"metadata": {"labels": layout.namespace_labels}}
            )
            for obj in layout.workloads:
                self.cp.post(collection_path(obj), obj)
                created.append(object_path(obj))
            for node in layout.nodes:
                self.cp.post("/api/v1/nodes", node)
                created.append(f"/api/v1/nodes/{node['metadata']['name']}")
            for pod in layout.bound:
                self.cp.post(f"/api/v1/namespaces/{BARRIER_NS}/pods", pod)
                created.append(self.pod_path(pod_key(pod)))
            for kind, pod, want in layout.probes:
                self.probe_one(kind, pod, want)
        finally:
            for path in reversed(created):
                self.cp.request(
                    "DELETE",
                    path,
                    {"gracePeriodSeconds": 0, "propagationPolicy": "Background"},
                    expect=(200, 202, 404),
                )

    def probe_one(self, kind: str, pod: dict[str, Any], want: str) -> None:
        seen: list[str] = []
        for attempt in range(PROBE_ATTEMPTS):
            body = copy.deepcopy(pod)
            body["metadata"]["name"] += f"-{attempt}"
            path = self.pod_path(pod_key(body))
            self.cp.post(f"/api/v1/namespaces/{BARRIER_NS}/pods", body)
            deadline = time.monotonic() + POD_TIMEOUT
            outcome = None
            while outcome is None and time.monotonic() < deadline:
                got = self.cp.get(path)
                cond = scheduled_condition(got) or {}
                if got["spec"].get("nodeName"):
                    outcome = f"bound to {got['spec']['nodeName']}"
                elif cond.get("status") == "False" and cond.get("message"):
                    outcome = str(cond["message"])
                else:
                    time.sleep(POLL)
            self.cp.delete(path)
            if outcome == f"bound to {want}":
                return
            seen.append(str(outcome))
            time.sleep(POLL)
        raise AssertionError(
            f"kube-scheduler's {kind} lister never caught up: the probe pod got {seen}\n"
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
        for obj in self.p.workloads:
            # Background: an orphaning delete (core v1's default for ReplicationControllers) would wait
            # for the garbage collector, which does not run here.
            self.cp.request(
                "DELETE", object_path(obj), {"propagationPolicy": "Background"}, expect=(200, 202, 404)
            )
        for pc in self.p.classes:
            self.cp.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{pc['metadata']['name']}")
        self.cp.request("DELETE", "/api/v1/nodes", expect=(200,))

    # pending pods

    def run(self) -> None:
        for pod in self.p.pending:
            ns = pod["metadata"]["namespace"]
            created = self.cp.post(f"/api/v1/namespaces/{ns}/pods", creatable(pod))
            self.uids[pod_key(pod)] = created["metadata"]["uid"]
            self.wait_for(pod_key(pod))
        self.settle()
        for pod in self.p.pending:
            self.outcomes[pod_key(pod)] = self.read(pod_key(pod))

    def pod_path(self, key: str) -> str:
        ns, name = key.split("/")
        return f"/api/v1/namespaces/{ns}/pods/{name}"

    def wait_for(self, key: str) -> None:
        """Until the pod is bound, gated, or failed with no preemption left to finish; victims of its
        preemption are force-deleted on the way (as a kubelet would confirm their termination)."""
        deadline = time.monotonic() + POD_TIMEOUT
        while True:
            self.finish_victims(key)
            pod = self.cp.get(self.pod_path(key))
            if pod["spec"].get("nodeName"):
                return
            cond = scheduled_condition(pod) or {}
            if cond.get("reason") == "SchedulingGated":
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


def scheduled_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


def scheduler_metrics(cp: ClusterHarness) -> dict[str, float]:
    url = cp.cluster.urls["kube-scheduler"] + "/metrics"
    with urllib.request.urlopen(url, timeout=5, context=ssl._create_unverified_context()) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^(scheduler_(?:pending_pods|schedule_attempts_total)\S*) (\S+)$", line)
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
    while True:
        sim = simulate(objects, prepared.profile)
        diffs: list[str] = []
        compared: list[str] = []
        diverged = False
        for pod in prepared.pending:
            key = pod_key(pod)
            if key in frozen:
                continue
            got, want = real.outcomes[key], sim[key]
            diffs += compare_pod(key, got, want)
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
            if outcome.node:  # bound there, as kube-scheduler did
                pod_object(objects, key)["spec"]["nodeName"] = outcome.node
            else:  # kube-scheduler left it pending: it holds nothing
                objects.remove(pod_object(objects, key))
            for victim in outcome.victims:  # gone, as kube-scheduler preempted them
                objects.remove(pod_object(objects, victim))


def pod_object(objects: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Pod" and pod_key(o) == key)


def comparable(real: str | None, ours: str | None) -> tuple[str | None, str | None]:
    """kube-scheduler's and simulate's messages, minus what only kube-scheduler's PostFilter plugins add
    while our default profile lacks them (see the module docstring)."""
    if real is None or ours is None:
        return real, ours
    ours_has = {name for name, _ in DEFAULT_MULTI_POINT}
    if DYNAMIC_RESOURCES not in ours_has:
        real = real.replace(f" {NO_CLAIMS}, preemption: ", " preemption: ").removesuffix(f" {NO_CLAIMS}")
        if real.endswith(f". {CYCLE_STATE_NOT_FOUND}"):
            real = real.removesuffix(f" {CYCLE_STATE_NOT_FOUND}")
            ours = ours.split(" preemption: ")[0]
    if DEFAULT_PREEMPTION not in ours_has:
        real = real.split(" preemption: ")[0]
    return real, ours


def compare_pod(key: str, got: Outcome, want: dict[str, Any]) -> list[str]:
    diffs = []
    if bool(got.node) != bool(want["node"]):
        diffs.append(
            f"{key}: kube-scheduler: {got.node or 'unschedulable: ' + repr(got.condition)}; "
            f"simulate: {want['node'] or 'unschedulable: ' + repr(want['message'])}"
        )
        return diffs
    if not got.node:
        gated = want["message"] == GATED_MESSAGE
        condition, ours = comparable(got.condition, want["message"])
        if condition != ours:
            diffs.append(
                f"{key}: PodScheduled message\n  kube-scheduler: {condition}\n  simulate:       {ours}"
            )
        event, ours = comparable(got.event, want["message"])
        if not gated and event != ours:
            diffs.append(
                f"{key}: FailedScheduling event\n  kube-scheduler: {event}\n  simulate:       {ours}"
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
    if (scenario.get("profile") or {}).get("extenders"):
        pytest.skip(reason="a profile with extenders needs the extenders running for kube-scheduler too")
    prefix = f"s{SCENARIOS.index(path):02d}-"
    prepared = prepare(scenario, prefix)
    real = RealRun(own_control_plane, prepared)
    try:
        real.setup()
        with scheduler_profile(own_control_plane, prepared.profile) as real.scheduler_name:
            real.barrier()
            real.run()
    finally:
        real.teardown()
    diffs, sim = compare(prepared, real)
    lines = []
    for pod in prepared.pending:
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
