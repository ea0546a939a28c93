"""The workloads, shaped like upstream scheduler_perf's (``test/integration/scheduler_perf/*/
performance-config.yaml`` and ``templates/``), at up to four sizes.

Every workload: fake nodes (4 CPU, 32 Gi, 110 pods, ``kubernetes.io/hostname`` and
``topology.kubernetes.io/zone`` labels), initial pods that the harness creates already bound
(``spec.nodeName`` set, node ``i % nodes``: spread evenly, not measured), then the measured pods. The
pod templates are upstream's, with ``schedulerName`` set to the scheduler under test.

The volume and DRA workloads add objects beside nodes and pods (``Workload.extras``: ``bench.volumes``,
``bench.dra``); those that rely on kube-controller-manager's controllers (``Workload.controllers``) run it
on their cluster for every scheduler alike.

Sizes follow upstream's named workloads. ``small`` is the 500-node one (1,000 measured pods where the
shape allows it: with required anti-affinity per hostname at most 500 pods fit on 500 nodes, and a
preemptor needs a whole node, so those two measure 400 and 500 pods as upstream's 500-node variants
do). ``full`` is the 5,000-node one upstream's CI runs (``performance`` label); PreemptionBasic's
5,000-node variant is the one upstream keeps commented out (20,000 low-priority pods, 5,000 preemptors).
SchedulingWithResourceClaimTemplate's and ExtendedResource's largest upstream variants have 500 nodes
(``5000pods_500nodes``, their ``performance`` ones); their small size is upstream's
``2000pods_200nodes``. SchedulingWaitForFirstConsumer has no upstream counterpart: its volumes are
made by a provisioner, so it is small at both sizes.

Two sizes go past upstream's named workloads, for how cost grows with the cluster: ``scale`` has
15,000 nodes (SchedulingBasic, TopologySpreading, MixedSchedulingBasePod, MemoryAtScale with 150,000
bound pods, and the churn), with the pods per node of the ``full`` shape; ``medium`` has 1,000 nodes
(SchedulingBasic only), the first point of the cost curve (1,000 / 5,000 / 15,000 nodes).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import churn, dra, gangs, volumes
from bench.objects import Extras

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
INIT_NAMESPACE = "sched-0"
MEASURED_NAMESPACE = "sched-1"
HIGH_PRIORITY_CLASS = "bench-high-priority"

NS_SELECTOR = "SchedulingRequiredPodAntiAffinityWithNSSelector"
MIXED_CHURN = "SchedulingWithMixedChurn"

#: every size, smallest first; a workload has some of them (``Workload.sizes``)
SIZES = ("small", "medium", "full", "scale")

PodBuilder = Callable[[str, str, str], dict[str, Any]]  # (name, namespace, schedulerName) -> Pod


@dataclass(frozen=True)
class Shape:
    nodes: int
    init_pods: int
    measured_pods: int
    #: the upstream workload this size copies
    upstream: str
    #: namespaces the initial pods are spread over (``init-ns-<k>``, pod ``i`` in ``k = i % n``; 1: all
    #: in ``sched-0``)
    init_namespaces: int = 1
    #: measured pods created at this rate (pods/s) rather than as fast as the API server takes them
    rate: float | None = None
    #: seconds a measured pod lives once bound before the harness deletes it (None: it stays)
    lifetime: float | None = None


@dataclass(frozen=True)
class Workload:
    name: str
    sizes: dict[str, Shape]
    init_pod: PodBuilder
    measured_pod: PodBuilder
    #: merged into every node (labels), e.g. one zone for all
    node_template: dict[str, Any] = field(default_factory=dict)
    zones: int = 3
    #: (name, value) PriorityClasses to create first
    priority_classes: tuple[tuple[str, int], ...] = ()
    notes: str = ""
    #: objects beside nodes and pods (volumes, classes, ResourceSlices, claims) and a helper beside the
    #: scheduler; see ``bench.objects``
    extras: Extras | None = None
    #: kube-controller-manager's controllers the workload relies on; any starts kube-controller-manager
    #: (all of its controllers, as ``--with-controller-manager``) for every scheduler
    controllers: tuple[str, ...] = ()
    #: whether the raw binder runs it by default: not where binding without scheduling leaves the
    #: workload undone (volumes never provisioned)
    raw_binder: bool = True
    #: kopf-scheduler's throughput target against kube-scheduler's (None: only that it completes)
    target: float | None = 1.0
    #: the schedulers that can do the workload at all (empty: every one); others are skipped even if named
    schedulers: tuple[str, ...] = ()
    #: the pods' ``schedulerName`` when not the scheduler's own (a profile the workload applies)
    scheduler_name: str = ""
    #: (nodes, measured pods) -> how many measured pods a run binds to be complete (None: all of them)
    expected_bound: Callable[[int, int], int] | None = None
    #: labels of every namespace the workload creates (a namespaceSelector's target)
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def shape(self, size: str) -> Shape:
        return self.sizes[size]


def init_namespace(index: int, shape: Shape) -> str:
    """The namespace of initial pod ``index``."""
    return INIT_NAMESPACE if shape.init_namespaces <= 1 else f"init-ns-{index % shape.init_namespaces}"


def _container(cpu: str = "100m", memory: str = "500Mi") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory}
    return {
        "name": "pause",
        "image": PAUSE_IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
    }


def _pod(
    name: str, namespace: str, scheduler: str, spec: dict[str, Any], labels: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"schedulerName": scheduler, **copy.deepcopy(spec)},
    }


def default_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-default.yaml``: 100m CPU, 500 Mi (requests = limits)."""
    return _pod(name, namespace, scheduler, {"containers": [_container()]})


def anti_affinity_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-pod-anti-affinity.yaml``: green pods repel green pods per hostname."""
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": HOSTNAME_LABEL,
        "namespaces": [MEASURED_NAMESPACE, INIT_NAMESPACE],
    }
    spec = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec, {"color": "green"})


def spreading_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-topology-spreading.yaml``: a hard zone constraint over blue pods (upstream's
    maxSkew is 5)."""
    constraint = {
        "maxSkew": 5,
        "topologyKey": ZONE_LABEL,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}},
    }
    spec = {"topologySpreadConstraints": [constraint], "containers": [_container()]}
    return _pod(name, namespace, scheduler, spec, {"color": "blue"})


def anti_affinity_ns_selector_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-anti-affinity-ns-selector.yaml``: green pods repel green pods per hostname in every
    namespace labelled ``team: devops``."""
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": HOSTNAME_LABEL,
        "namespaceSelector": {"matchLabels": {"team": "devops"}},
    }
    spec = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec, {"color": "green"})


def _affinity_term(color: str, topology_key: str) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": {"color": color}},
        "topologyKey": topology_key,
        "namespaces": [MEASURED_NAMESPACE, INIT_NAMESPACE],
    }


def pod_affinity_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-pod-affinity.yaml``: blue pods require a blue pod in their zone."""
    term = _affinity_term("blue", ZONE_LABEL)
    spec = {
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec, {"color": "blue"})


def preferred_pod_affinity_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-preferred-pod-affinity.yaml``: red pods prefer (weight 1) a red pod on their
    node."""
    term = {"weight": 1, "podAffinityTerm": _affinity_term("red", HOSTNAME_LABEL)}
    spec = {
        "affinity": {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec, {"color": "red"})


def preferred_pod_anti_affinity_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-preferred-pod-anti-affinity.yaml``: yellow pods prefer (weight 1) no yellow pod
    on their node."""
    term = {"weight": 1, "podAffinityTerm": _affinity_term("yellow", HOSTNAME_LABEL)}
    spec = {
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}},
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec, {"color": "yellow"})


def mixed_init_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """MixedSchedulingBasePod's initial pods: upstream creates ``initPods`` of each of five templates;
    here initial pod ``i`` takes template ``i % 5`` (default, pod affinity, required anti-affinity,
    preferred affinity, preferred anti-affinity), the same counts in one stream."""
    builders = (
        default_pod,
        pod_affinity_pod,
        anti_affinity_pod,
        preferred_pod_affinity_pod,
        preferred_pod_anti_affinity_pod,
    )
    return builders[int(name.rsplit("-", 1)[1]) % len(builders)](name, namespace, scheduler)


def node_affinity_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-with-node-affinity.yaml``: required zone In [zone1, zone2]."""
    term = {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": ["zone1", "zone2"]}]}
    spec = {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        },
        "containers": [_container()],
    }
    return _pod(name, namespace, scheduler, spec)


def csi_volume_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """SchedulingCSIPVs' pods: upstream's base pod (``makeBasePod``: ``pod-default``'s container) with the
    volume ``vol`` over its own claim ``pvc-<pod>`` (``CreatePodWithPersistentVolume``)."""
    return volumes.with_claim(default_pod(name, namespace, scheduler))


def claim_template_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``dra/templates/pod-with-claim-template.yaml``: one pause container (no CPU or memory requests) using
    the claim ``resource`` made from ``test-claim-template``."""
    spec = {
        "containers": [
            {"name": "pause", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": dra.POD_CLAIM}]}}
        ],
        "resourceClaims": [{"name": dra.POD_CLAIM, "resourceClaimTemplateName": dra.CLAIM_TEMPLATE}],
    }
    return _pod(name, namespace, scheduler, spec)


def claim_ref_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """The initial pods of the DRA workload: as ``pod-with-claim-template`` but using their own claim
    ``<pod>-resource`` (``pod-with-claim-ref.yaml``'s form), which the harness allocates (``bench.dra``)."""
    spec = {
        "containers": [
            {"name": "pause", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": dra.POD_CLAIM}]}}
        ],
        "resourceClaims": [{"name": dra.POD_CLAIM, "resourceClaimName": dra.init_claim_name(name)}],
    }
    return _pod(name, namespace, scheduler, spec)


#: ExtendedResource's DeviceClasses (upstream's ``Explicit_25classes`` variants)
EXTENDED_RESOURCE_CLASSES = 25


def extended_resource_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``dra/templates/pod-with-extended-resource.yaml``: one pause container asking for one
    ``example.com/gpu-<index mod 25>`` (requests = limits), the index being the pod's number."""
    index = int(name.rsplit("-", 1)[1])
    amount = {dra.extended_resource(index, EXTENDED_RESOURCE_CLASSES): "1"}
    container = {"name": "pause", "image": PAUSE_IMAGE, "resources": {"requests": amount, "limits": amount}}
    return _pod(name, namespace, scheduler, {"containers": [container]})


def gang_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """A member of gang ``pod-<i> // 8``: ``pod-default`` with 1500m CPU (two fit a node) and the
    PodGroup label (``bench.gangs``)."""
    spec = {"containers": [_container(cpu=gangs.MEMBER_CPU)]}
    return _pod(name, namespace, scheduler, spec, {gangs.GROUP_LABEL: gangs.gang_of(name)})


def large_cpu_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-high-priority-large-cpu.yaml``: priority 10 and 9 CPU (requests only): no node of
    4 CPU holds it, even with every other pod preempted."""
    container = _container(cpu="9")
    del container["resources"]["limits"]
    spec = {"priorityClassName": HIGH_PRIORITY_CLASS, "containers": [container]}
    return _pod(name, namespace, scheduler, spec)


def low_priority_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-low-priority.yaml``: no priority, 900m CPU, grace period 0. Four fill a node."""
    spec = {"terminationGracePeriodSeconds": 0, "containers": [_container(cpu="900m")]}
    return _pod(name, namespace, scheduler, spec)


def high_priority_pod(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/pod-high-priority.yaml``: priority 10, 3 CPU: preempts 3 of a full node's 4 low pods.
    Upstream sets ``spec.priority`` with the Priority admission plugin off; here the plugin is on, so
    the pod names a PriorityClass of value 10."""
    spec = {"priorityClassName": HIGH_PRIORITY_CLASS, "containers": [_container(cpu="3")]}
    return _pod(name, namespace, scheduler, spec)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "SchedulingBasic",
            {
                "small": Shape(500, 500, 1000, "SchedulingBasic/500Nodes"),
                "medium": Shape(1000, 200, 2000, "none upstream (SchedulingBasic, 1,000 nodes)"),
                "full": Shape(5000, 1000, 10000, "SchedulingBasic/5000Nodes_10000Pods"),
                "scale": Shape(15000, 3000, 30000, "none upstream (SchedulingBasic, 15,000 nodes)"),
            },
            init_pod=default_pod,
            measured_pod=default_pod,
        ),
        Workload(
            "SchedulingPodAntiAffinity",
            {
                "small": Shape(500, 100, 400, "SchedulingPodAntiAffinity/500Nodes"),
                "full": Shape(5000, 1000, 2000, "SchedulingPodAntiAffinity/5000Nodes_2000Pods"),
            },
            init_pod=anti_affinity_pod,
            measured_pod=anti_affinity_pod,
            notes="one green pod per node at most: measured pods are upstream's 400 (small) and 2,000 (full)",
        ),
        Workload(
            "TopologySpreading",
            {
                "small": Shape(500, 1000, 1000, "TopologySpreading/500Nodes"),
                "full": Shape(5000, 5000, 5000, "TopologySpreading/5000Nodes_5000Pods"),
                "scale": Shape(15000, 15000, 15000, "none upstream (TopologySpreading, 15,000 nodes)"),
            },
            init_pod=default_pod,
            measured_pod=spreading_pod,
            zones=3,
        ),
        Workload(
            "SchedulingNodeAffinity",
            {
                "small": Shape(500, 500, 1000, "SchedulingNodeAffinity/500Nodes"),
                "full": Shape(5000, 5000, 10000, "SchedulingNodeAffinity/5000Nodes_10000Pods"),
            },
            init_pod=node_affinity_pod,
            measured_pod=node_affinity_pod,
            # upstream's labelNodePrepareStrategy: every node in zone1
            node_template={"metadata": {"labels": {ZONE_LABEL: "zone1"}}},
        ),
        Workload(
            "SchedulingPodAffinity",
            {
                "small": Shape(500, 500, 1000, "SchedulingPodAffinity/500Nodes"),
                "full": Shape(5000, 5000, 5000, "SchedulingPodAffinity/5000Nodes_5000Pods"),
            },
            init_pod=pod_affinity_pod,
            measured_pod=pod_affinity_pod,
            # upstream's labelNodePrepareStrategy: every node in zone1
            node_template={"metadata": {"labels": {ZONE_LABEL: "zone1"}}},
        ),
        Workload(
            "SchedulingPreferredPodAffinity",
            {
                "small": Shape(500, 500, 1000, "SchedulingPreferredPodAffinity/500Nodes"),
                "full": Shape(5000, 5000, 5000, "SchedulingPreferredPodAffinity/5000Nodes_5000Pods"),
            },
            init_pod=preferred_pod_affinity_pod,
            measured_pod=preferred_pod_affinity_pod,
        ),
        Workload(
            "SchedulingPreferredPodAntiAffinity",
            {
                "small": Shape(500, 500, 1000, "SchedulingPreferredPodAntiAffinity/500Nodes"),
                "full": Shape(5000, 5000, 5000, "SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods"),
            },
            init_pod=preferred_pod_anti_affinity_pod,
            measured_pod=preferred_pod_anti_affinity_pod,
        ),
        Workload(
            "MixedSchedulingBasePod",
            {
                "small": Shape(500, 1000, 1000, "MixedSchedulingBasePod/500Nodes (5 x 200 initial pods)"),
                "full": Shape(5000, 10000, 5000, "MixedSchedulingBasePod/5000Nodes_5000Pods (5 x 2,000)"),
                "scale": Shape(15000, 30000, 15000, "none upstream (MixedSchedulingBasePod, 15,000 nodes)"),
            },
            init_pod=mixed_init_pod,
            measured_pod=default_pod,
            node_template={"metadata": {"labels": {ZONE_LABEL: "zone1"}}},
            notes="initial pods of five templates (affinity and anti-affinity, required and preferred) "
            "around which plain pods are measured",
        ),
        Workload(
            NS_SELECTOR,
            {
                "small": Shape(500, 40, 100, f"{NS_SELECTOR}/500Nodes", init_namespaces=10),
                "full": Shape(5000, 4000, 1000, f"{NS_SELECTOR}/5000Nodes", init_namespaces=100),
            },
            init_pod=anti_affinity_ns_selector_pod,
            measured_pod=anti_affinity_ns_selector_pod,
            namespace_labels={"team": "devops"},
            notes="initial pods spread over 10 (100) namespaces of 4 (40); the anti-affinity term selects "
            "namespaces by label, not by name",
        ),
        Workload(
            "Unschedulable",
            {
                "small": Shape(500, 10, 1000, "Unschedulable/500Nodes/10Init/1kPods"),
                "full": Shape(5000, 100, 10000, "Unschedulable/5kNodes/100Init/10kPods"),
            },
            init_pod=default_pod,
            measured_pod=default_pod,
            priority_classes=((HIGH_PRIORITY_CLASS, 10),),
            extras=churn.Churn((churn.pods(large_cpu_pod),), mode="create", interval=0.2),
            raw_binder=False,
            notes="5 pods a second that no node holds (9 CPU, priority 10: each tries preemption) arrive "
            "while the measured pods are scheduled",
        ),
        Workload(
            MIXED_CHURN,
            {
                "small": Shape(500, 0, 6000, f"{MIXED_CHURN}, 2 min", rate=50, lifetime=20),
                "full": Shape(5000, 0, 60000, f"{MIXED_CHURN}/5000Nodes, 10 min", rate=100, lifetime=30),
                "scale": Shape(
                    15000, 0, 60000, f"{MIXED_CHURN} at 15,000 nodes, 10 min", rate=100, lifetime=30
                ),
            },
            init_pod=default_pod,
            measured_pod=default_pod,
            priority_classes=((HIGH_PRIORITY_CLASS, 10),),
            extras=churn.Churn(
                (churn.NODES, churn.pods(large_cpu_pod), churn.SERVICES), mode="recreate", interval=1.0
            ),
            raw_binder=False,
            notes="upstream's churn (a node, an unschedulable pod and a Service made and deleted every "
            "second) while measured pods are created at a fixed rate for 10 minutes (2 at size small) "
            "and each is deleted 30 s (20 s) after it is bound: latency and resident memory over time",
        ),
        Workload(
            "MemoryAtScale",
            {
                "small": Shape(500, 5000, 1000, "none upstream (SchedulingBasic, 10 bound pods a node)"),
                "full": Shape(5000, 50000, 10000, "none upstream (SchedulingBasic, 50,000 bound pods)"),
                "scale": Shape(15000, 150000, 15000, "none upstream (SchedulingBasic, 150,000 bound pods)"),
            },
            init_pod=default_pod,
            measured_pod=default_pod,
            notes="SchedulingBasic on a cluster already holding 50,000 bound pods (5,000 at size small): "
            "the memory a scheduler needs for a large cluster",
        ),
        Workload(
            "PreemptionBasic",
            {
                "small": Shape(500, 2000, 500, "PreemptionBasic (500 nodes; upstream runs 1000Nodes)"),
                "full": Shape(5000, 20000, 5000, "PreemptionBasic/5000Nodes (commented out upstream)"),
            },
            init_pod=low_priority_pod,
            measured_pod=high_priority_pod,
            priority_classes=((HIGH_PRIORITY_CLASS, 10),),
            notes="4 low-priority pods fill each node; each measured pod must preempt 3 of them",
        ),
        Workload(
            "SchedulingCSIPVs",
            {
                "small": Shape(500, 500, 1000, "SchedulingCSIPVs/500Nodes"),
                "full": Shape(5000, 5000, 5000, "SchedulingCSIPVs/5000Nodes_5000Pods"),
            },
            init_pod=csi_volume_pod,
            measured_pod=csi_volume_pod,
            # upstream's nodeAllocatableStrategy.nodeAllocatable (CSINodes: volumes.CSIPersistentVolumes)
            node_template={
                "status": {"allocatable": {volumes.ATTACH_LIMIT_RESOURCE: str(volumes.CSI_ATTACH_LIMIT)}}
            },
            extras=volumes.CSIPersistentVolumes(),
            notes="every pod has its own claim, pre-bound to a CSI volume (ebs.csi.aws.com, 39 per node)",
        ),
        Workload(
            "SchedulingWaitForFirstConsumer",
            {
                "small": Shape(500, 500, 200, "none upstream (500 nodes, 200 provisioned claims)"),
                "full": Shape(5000, 1000, 1000, "none upstream (5000 nodes, 1000 provisioned claims)"),
            },
            init_pod=default_pod,
            measured_pod=csi_volume_pod,
            extras=volumes.DelayedBindingVolumes(),
            controllers=("persistentvolume-binder-controller",),
            raw_binder=False,
            target=None,
            notes="each measured pod's claim is provisioned in its node's zone once a scheduler picks it",
        ),
        Workload(
            "SchedulingWithResourceClaimTemplate",
            {
                "small": Shape(200, 1000, 1000, "SchedulingWithResourceClaimTemplate/2000pods_200nodes"),
                "full": Shape(500, 2500, 2500, "SchedulingWithResourceClaimTemplate/5000pods_500nodes"),
            },
            init_pod=claim_ref_pod,
            measured_pod=claim_template_pod,
            node_template={"metadata": {"labels": {dra.DRA_NODE_LABEL: "true"}}},
            extras=dra.StructuredResources(devices_per_node=10),
            controllers=("resourceclaim-controller",),
            notes="10 devices per node (maxClaimsPerNode); initial and measured pods fill every device",
        ),
        Workload(
            "ExtendedResource",
            {
                "small": Shape(200, 1000, 1000, "ExtendedResource/Explicit_25classes_2000pods_200nodes"),
                "full": Shape(500, 2500, 2500, "ExtendedResource/Explicit_25classes_5000pods_500nodes"),
            },
            init_pod=claim_ref_pod,
            measured_pod=extended_resource_pod,
            node_template={"metadata": {"labels": {dra.DRA_NODE_LABEL: "true"}}},
            extras=dra.StructuredResources(devices_per_node=10, extended_classes=EXTENDED_RESOURCE_CLASSES),
            notes="pods ask for example.com/gpu-<k> (25 classes map them to devices); the scheduler makes "
            "each pod's claim; initial and measured pods fill every device",
        ),
        Workload(
            "SchedulingGangs",
            {
                "small": Shape(100, 100, 400, "none upstream (50 gangs of 8 on 100 nodes)"),
                "full": Shape(1000, 1000, 4000, "none upstream (500 gangs of 8 on 1,000 nodes)"),
            },
            init_pod=default_pod,
            measured_pod=gang_pod,
            extras=gangs.GangScheduling(),
            schedulers=("kopf-scheduler",),
            scheduler_name=gangs.GANG_SCHEDULER,
            expected_bound=gangs.expected_bound,
            target=None,
            notes="gangs of 8 (PodGroups); room for half of them; done when every gang that fits is "
            "bound whole; kube-scheduler has no gang scheduling",
        ),
    )
}

#: the workload of ``--latency-rate``: SchedulingBasic's nodes and pods, created at a fixed rate
LATENCY_WORKLOAD = "SchedulingBasic"


def node_name(index: int) -> str:
    return f"node-{index}"


def init_pod_name(index: int) -> str:
    return f"init-{index}"


def measured_pod_name(index: int) -> str:
    return f"pod-{index}"
