"""Algorithm-only benchmark: `kopf-scheduler simulate`'s loop on scheduler_perf-shaped workloads.

Nodes: 4 CPU, 32 Gi, 110 pods, zone and hostname labels. Pods: 100m CPU, 500 Mi. Measures pods/s of the
scheduling loop (parsing the input is not timed), as scheduler_perf measures its scheduler.

    .venv/bin/python bench/simulate_bench.py --workload SchedulingBasic --nodes 5000 --pods 5000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository root, for ``bench.dra``
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import dra, volumes
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    DEVICE_CLASSES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
)
from kopf_scheduler.simulate.loader import ClusterInput
from kopf_scheduler.simulate.run import simulate
from kopf_scheduler.testing import make_node, make_pod

ZONES = 3


def nodes(count: int) -> list[dict[str, Any]]:
    return [
        make_node()
        .name(f"node-{i}")
        .capacity(cpu="4", memory="32Gi", pods=110)
        .zone(f"zone-{i % ZONES}")
        .obj()
        for i in range(count)
    ]


def basic_pod(name: str) -> Any:
    return make_pod().name(name).namespace("sched-perf").req(cpu="100m", memory="500Mi")


def anti_affinity_pod(name: str, namespace: str) -> Any:
    """scheduler_perf's ``pod-with-pod-anti-affinity.yaml``: green pods repel green pods per hostname."""
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": ["sched-1", "sched-0"],
    }
    return (
        make_pod()
        .name(name)
        .namespace(namespace)
        .label("color", "green")
        .req(cpu="100m", memory="500Mi")
        .affinity({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    )


def spread_pod(name: str) -> Any:
    """scheduler_perf's TopologySpreading shape: one hard zone constraint over the pods' own label."""
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "spread"}},
    }
    return basic_pod(name).label("app", "spread").spread(constraint)


def low_priority_pod(name: str) -> Any:
    """scheduler_perf's ``pod-low-priority.yaml``: no priority, 900m CPU and 500 Mi (requests = limits)."""
    return basic_pod(name).req(cpu="900m").limits(cpu="900m", memory="500Mi")


def high_priority_pod(name: str) -> Any:
    """``pod-high-priority.yaml``: priority 10, 3 CPU, 500 Mi: preempts 3 of a full node's 4 low pods."""
    return basic_pod(name).priority(10).req(cpu="3").limits(cpu="3", memory="500Mi")


#: SchedulingWithResourceClaimTemplate's namespaces (``bench.workloads``): initial and measured pods
DRA_INIT_NAMESPACE, DRA_NAMESPACE = "sched-0", "sched-1"


def claim_template_pod(name: str) -> dict[str, Any]:
    """``pod-with-claim-template.yaml``: no requests, the claim ``resource`` made from the template."""
    claims = [{"name": dra.POD_CLAIM, "resourceClaimTemplateName": dra.CLAIM_TEMPLATE}]
    return make_pod().name(name).namespace(DRA_NAMESPACE).set("spec.resourceClaims", claims).obj()


def claim_ref_pod(name: str) -> Any:
    """The initial pods: their own claim ``<pod>-resource``, allocated by ``dra_objects``."""
    claims = [{"name": dra.POD_CLAIM, "resourceClaimName": dra.init_claim_name(name)}]
    return make_pod().name(name).namespace(DRA_INIT_NAMESPACE).set("spec.resourceClaims", claims)


def dra_objects(cluster: ClusterInput, devices_per_node: int = 10) -> None:
    """``bench.dra.StructuredResources``' objects: the class, a slice of ``devices_per_node`` devices per
    node, the template in both namespaces, and each initial pod's claim allocated as the harness
    allocates it (device ``instance-<i // nodes>`` of the pod's node ``node-<i % nodes>``)."""
    nodes = len(cluster.nodes)
    if len(cluster.bound_pods) > nodes * devices_per_node:
        raise ValueError("more initial pods than devices")
    objects = cluster.objects
    objects.append((DEVICE_CLASSES, dra.device_class()))
    objects += [
        (RESOURCE_SLICES, dra.resource_slice(n["metadata"]["name"], devices_per_node)) for n in cluster.nodes
    ]
    for namespace in (DRA_INIT_NAMESPACE, DRA_NAMESPACE):
        template = dra.claim_template()
        template["metadata"]["namespace"] = namespace
        objects.append((RESOURCE_CLAIM_TEMPLATES, template))
    for i, pod in enumerate(cluster.bound_pods):
        meta = pod["metadata"]
        claim = dra.init_claim(dra.init_claim_name(meta["name"]))
        claim["metadata"]["namespace"] = DRA_INIT_NAMESPACE
        claim["status"] = dra.allocation(
            pod["spec"]["nodeName"], f"instance-{i // nodes}", meta["name"], meta["uid"]
        )
        objects.append((RESOURCE_CLAIMS, claim))


def csi_volume_pod(name: str) -> Any:
    """SchedulingCSIPVs' pods (``bench.workloads.csi_volume_pod``): the volume ``vol`` over the pod's own
    claim ``pvc-<pod>``."""
    claim = {"claimName": volumes.claim_name(name)}
    return basic_pod(name).set("spec.volumes", [{"name": "vol", "persistentVolumeClaim": claim}])


def csi_pv_objects(cluster: ClusterInput) -> None:
    """``bench.volumes.CSIPersistentVolumes``' objects: a CSINode per node (``ebs.csi.aws.com``, 39
    volumes, also in the node's allocatable), and for every pod its claim bound to a CSI volume of its own
    (both with the status the PV controller leaves)."""
    limit = str(volumes.CSI_ATTACH_LIMIT)
    for node in cluster.nodes:
        node["status"]["capacity"][volumes.ATTACH_LIMIT_RESOURCE] = limit
        node["status"]["allocatable"][volumes.ATTACH_LIMIT_RESOURCE] = limit
        csi_node = volumes.csi_node(node["metadata"]["name"], volumes.CSI_DRIVER, volumes.CSI_ATTACH_LIMIT)
        cluster.objects.append((CSI_NODES, csi_node))
    for pod in cluster.bound_pods + cluster.pending_pods:
        namespace, claim_name = pod["metadata"]["namespace"], volumes.claim_name(pod["metadata"]["name"])
        volume_name, uid = f"{namespace}-{claim_name}", f"uid-{namespace}-{claim_name}"
        claim = volumes.bound_claim(claim_name, volume_name)
        claim["metadata"].update(namespace=namespace, uid=uid)
        claim["status"] = {"phase": "Bound", "accessModes": ["ReadOnlyMany"], "capacity": {"storage": "1Gi"}}
        volume = volumes.bound_volume(volume_name, namespace, claim_name, uid)
        volume["status"] = {"phase": "Bound"}
        cluster.objects += [(PERSISTENT_VOLUME_CLAIMS, claim), (PERSISTENT_VOLUMES, volume)]


WORKLOADS = {
    # name: (builder of a measured pod, initial pods[, builder of an initial pod (bound by build)])
    "SchedulingBasic": (lambda i: basic_pod(f"pod-{i}").obj(), 1000),
    "SchedulingPodAntiAffinity": (
        lambda i: anti_affinity_pod(f"pod-{i}", "sched-1").obj(),
        1000,
        lambda i: anti_affinity_pod(f"init-{i}", "sched-0"),
    ),
    # scheduler_perf's PreemptionBasic/1000Nodes: --nodes 1000 --pods 1000; the 4000 initial pods are 4 per
    # node there (pass --init-pods 4*nodes for other sizes)
    "PreemptionBasic": (
        lambda i: high_priority_pod(f"pod-{i}").obj(),
        4000,
        lambda i: low_priority_pod(f"init-{i}"),
    ),
    "TopologySpreading": (
        lambda i: spread_pod(f"pod-{i}").obj(),
        5000,
        lambda i: basic_pod(f"init-{i}").label("app", "spread"),
    ),
    # scheduler_perf's SchedulingWithResourceClaimTemplate/5000pods_500nodes: --nodes 500 --pods 2500
    # (10 devices per node: the initial and measured pods fill every device)
    "SchedulingWithResourceClaimTemplate": (
        lambda i: claim_template_pod(f"pod-{i}"),
        2500,
        lambda i: claim_ref_pod(f"init-{i}"),
    ),
    # scheduler_perf's SchedulingCSIPVs/5000Nodes_5000Pods: --nodes 5000 --pods 5000 (500Nodes: --nodes 500
    # --init-pods 500 --pods 1000)
    "SchedulingCSIPVs": (
        lambda i: csi_volume_pod(f"pod-{i}").obj(),
        5000,
        lambda i: csi_volume_pod(f"init-{i}"),
    ),
}
#: what a workload adds beside nodes and pods, once those are built
EXTRAS: dict[str, Callable[[ClusterInput], None]] = {
    "SchedulingWithResourceClaimTemplate": dra_objects,
    "SchedulingCSIPVs": csi_pv_objects,
}


def build(workload: str, node_count: int, pod_count: int, init_pods: int | None) -> ClusterInput:
    make, default_init, *init_builder = WORKLOADS[workload]
    make_init = init_builder[0] if init_builder else lambda i: basic_pod(f"init-{i}")
    init = default_init if init_pods is None else init_pods
    cluster = ClusterInput(nodes=nodes(node_count))
    for i in range(init):
        cluster.bound_pods.append(make_init(i).node(f"node-{i % node_count}").obj())
    cluster.pending_pods = [make(i) for i in range(pod_count)]
    if workload in EXTRAS:
        EXTRAS[workload](cluster)
    return cluster


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="SchedulingBasic")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--init-pods", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--profile", action="store_true", help="profile with cProfile and print the top entries"
    )
    args = parser.parse_args()
    cluster = build(args.workload, args.nodes, args.pods, args.init_pods)
    started = time.perf_counter()
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
    result = asyncio.run(simulate(cluster, [], seed=args.seed))
    if args.profile:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    total = time.perf_counter() - started
    scheduled = sum(1 for o in result.outcomes.values() if o.node)
    print(
        json.dumps(
            {
                "workload": args.workload,
                "nodes": args.nodes,
                "pods": args.pods,
                "scheduled": scheduled,
                "loop_seconds": round(result.seconds, 3),
                "pods_per_second": round(args.pods / result.seconds, 1),
                "loop_cpu_seconds": round(result.cpu_seconds, 3),
                "cpu_ms_per_pod": round(result.cpu_seconds / args.pods * 1000, 2),
                "total_seconds": round(total, 3),
            }
        )
    )
    return 0 if scheduled == args.pods else 1


if __name__ == "__main__":
    sys.exit(main())
