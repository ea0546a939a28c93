"""Drives the scheduler over a simulated cluster in virtual time until nothing more can happen: the
active queue is empty, no binding is in flight, and no pod is backing off."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue import GATED
from kopf_scheduler.errors import UsageError
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.scheduler import Scheduler
from kopf_scheduler.simulate.client import PodOutcome, SimulatedCluster
from kopf_scheduler.simulate.loader import ClusterInput

#: a pod attempted more often than this is left where it is (guards against event ping-pong)
MAX_ATTEMPTS_PER_POD = 20


@dataclass
class SimulationResult:
    pods: list[dict[str, Any]]
    outcomes: dict[str, PodOutcome]
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)
    unserved: dict[str, str] = field(default_factory=dict)  # uid -> schedulerName nobody serves
    gated: set[str] = field(default_factory=set)  # uids held back by a pre-enqueue plugin
    nodes: int = 0
    seconds: float = 0.0


async def simulate(
    cluster: ClusterInput,
    profiles: list[tuple[str, ProfileSpec]],
    seed: int | None = None,
    explain: bool = False,
) -> SimulationResult:
    sim = SimulatedCluster()
    explanations: dict[str, dict[str, Any]] = {}
    clock = VirtualClock()
    sched = Scheduler(
        sim,
        clock=clock,
        rng=random.Random(seed),
        explain=(lambda pod, found: explanations.__setitem__(pod.uid, found)) if explain else None,
    )
    sim.on_update = sched.update_pod
    sim.on_delete = sched.delete_pod
    for where, spec in profiles:
        if spec.scheduler_name in sched.profiles:
            raise UsageError(
                f"{where}: spec.schedulerName: {spec.scheduler_name!r} is served by another profile"
            )
        try:
            sched.set_profile(spec)
        except ProfileError as e:
            raise UsageError(f"{where}: {e}") from None
    if not profiles:
        sched.use_default_profiles()

    for pdb in cluster.pdbs:
        sched.add_pdb(pdb)
    for kind, obj in cluster.objects:
        sched.update_object(kind, obj)
    for node in cluster.nodes:
        sched.add_node(node)
    for pod in cluster.bound_pods:
        sim.pods[pod["metadata"]["uid"]] = pod
        sched.add_pod(pod)
    # The queue breaks priority ties by arrival: arrive in creationTimestamp order, then file order.
    ordered = sorted(enumerate(cluster.pending_pods), key=lambda ip: (PodInfo(ip[1]).creation, ip[0]))
    unserved: dict[str, str] = {}
    for _, pod in ordered:
        uid = pod["metadata"]["uid"]
        sim.pods[uid] = pod
        info = PodInfo(pod)
        if not sched.responsible_for(info):
            unserved[uid] = info.scheduler_name
            continue
        sched.add_pod(pod)
        clock.advance(1e-6)

    started = time.perf_counter()
    limit = MAX_ATTEMPTS_PER_POD * max(1, len(cluster.pending_pods))
    attempts = 0
    while attempts < limit:
        qp = sched.queue.pop_nowait()
        if qp is not None:
            attempts += 1
            await sched.schedule_one_async(qp)
            if sched.in_flight_bindings() >= 256:
                await sched.wait_for_bindings()
            continue
        if sched.in_flight_bindings():
            await sched.wait_for_bindings()
            continue
        await asyncio.sleep(0)
        wakeup = sched.queue.next_backoff_expiry()
        if wakeup is None:
            break
        clock.set(wakeup)
        sched.queue.flush_due()
    await sched.wait_for_bindings()
    await sched.close_extenders()
    elapsed = time.perf_counter() - started
    gated = {
        p["metadata"]["uid"]
        for p in cluster.pending_pods
        if sched.queue.location(p["metadata"]["uid"]) == GATED
    }
    sched.close()
    return SimulationResult(
        pods=cluster.pending_pods,
        outcomes=sim.outcomes,
        explanations=explanations,
        unserved=unserved,
        gated=gated,
        nodes=len(cluster.nodes),
        seconds=elapsed,
    )
