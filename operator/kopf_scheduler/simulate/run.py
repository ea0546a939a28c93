"""Drives the scheduler over a simulated cluster in virtual time until nothing more can happen: the
active queue is empty, no binding is in flight, and no pod is backing off. Pods waiting at Permit for
the rest of their gang hold their place until it comes or their wait times out, in virtual time."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.backend.queue import GATED
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.objects import PERSISTENT_VOLUME_CLAIMS, POD_GROUPS, RESOURCE_CLAIMS, PodGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.slim import slim
from kopf_scheduler.plugins.names import SCHEDULING_GATES
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.simulate.client import PodOutcome, SimulatedCluster
from kopf_scheduler.simulate.dra import SimulatedClaims
from kopf_scheduler.simulate.loader import ClusterInput
from kopf_scheduler.simulate.volumes import SimulatedVolumes, ephemeral_claims

#: a pod attempted more often than this is left where it is (guards against event ping-pong)
MAX_ATTEMPTS_PER_POD = 20
#: event-loop rounds given to bindings in flight before the virtual clock moves on
MAX_SETTLE_ROUNDS = 64


@dataclass
class SimulationResult:
    pods: list[dict[str, Any]]
    outcomes: dict[str, PodOutcome]
    #: the volumes and claims as the run left them
    volumes: SimulatedVolumes = field(default_factory=SimulatedVolumes)
    #: the ResourceClaims as the run left them
    claims: SimulatedClaims = field(default_factory=SimulatedClaims)
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)
    unserved: dict[str, str] = field(default_factory=dict)  # uid -> schedulerName nobody serves
    gated: set[str] = field(default_factory=set)  # uids held back by a pre-enqueue plugin
    #: uid -> why a pre-enqueue plugin other than SchedulingGates holds the pod back
    gate_messages: dict[str, str] = field(default_factory=dict)
    #: the PodGroups of the input, as the run left them
    pod_groups: list[PodGroup] = field(default_factory=list)
    nodes: int = 0
    seconds: float = 0.0
    #: the process's CPU time over the same span as ``seconds`` (the loop, not the input's loading)
    cpu_seconds: float = 0.0


def _waiting_at_permit(sched: Scheduler) -> int:
    return sum(len(framework.waiting_pods.all()) for framework in sched.profiles.values())


def _gate_messages(sched: Scheduler, gated: set[str]) -> dict[str, str]:
    """Why each gated pod is held back, for gates other than scheduling gates (a gang short of members)."""
    found = {}
    for uid in gated:
        qp = sched.queue.get(uid)
        framework = sched.profiles.get(qp.pod.scheduler_name) if qp is not None else None
        if qp is None or framework is None or qp.gated_by == SCHEDULING_GATES:
            continue
        status = framework.run_pre_enqueue(qp.pod)
        if status is not None:
            found[uid] = status.message()
    return found


async def _settle_bindings(sched: Scheduler) -> None:
    """Lets the bindings in flight run until each one left waits at Permit for the rest of its gang (or
    on the clock): those only another pod's placement or the passing of time releases."""
    for _ in range(MAX_SETTLE_ROUNDS):
        if sched.in_flight_bindings() <= _waiting_at_permit(sched):
            return
        await asyncio.sleep(0)


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
    sched.wait_for_extenders = True  # one pod after the other, as kube-scheduler decides
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
    sim.volumes.on_object = sched.update_object
    sim.claims.on_object = sched.update_object
    sim.claims.on_deleted = sched.delete_object
    for kind, obj in cluster.objects:
        sched.update_object(kind, sim.claims.load(kind, sim.volumes.load(kind, obj)))
    for pod in cluster.pending_pods:  # the ephemeral volume controller's claims
        for claim in ephemeral_claims(pod):
            if (
                sim.volumes.get(
                    PERSISTENT_VOLUME_CLAIMS, claim["metadata"]["namespace"], claim["metadata"]["name"]
                )
                is None
            ):
                sched.update_object(
                    PERSISTENT_VOLUME_CLAIMS, sim.volumes.load(PERSISTENT_VOLUME_CLAIMS, claim)
                )
    for pod in cluster.pending_pods:  # the resource-claim controller's claims
        for claim in sim.claims.claims_for_pod(pod):
            sched.update_object(RESOURCE_CLAIMS, claim)
    for node in cluster.nodes:
        sim.volumes.node_labels[node["metadata"]["name"]] = dict(node["metadata"].get("labels") or {})
        sched.add_node(node)
    for pod in cluster.bound_pods:
        sim.pods[pod["metadata"]["uid"]] = pod
        sched.add_pod(pod)
    # The queue breaks priority ties by arrival: arrive in creationTimestamp order, then file order.
    infos = [PodInfo(slim(pod)) for pod in cluster.pending_pods]
    ordered = sorted(range(len(infos)), key=lambda i: (infos[i].creation, i))
    unserved: dict[str, str] = {}
    for i in ordered:
        pod, info = cluster.pending_pods[i], infos[i]
        sim.pods[info.uid] = pod
        if not sched.responsible_for(info):
            unserved[info.uid] = info.scheduler_name
            continue
        sched.add_pod(pod, info)
        clock.advance(1e-6)

    started, cpu_started = time.perf_counter(), time.process_time()
    limit = MAX_ATTEMPTS_PER_POD * max(1, len(cluster.pending_pods))
    attempts = 0
    while attempts < limit:
        qp = sched.queue.pop_nowait()
        if qp is not None:
            attempts += 1
            await sched.schedule_one_async(qp)
            if sched.in_flight_bindings() >= 256:
                await _settle_bindings(sched)
            continue
        before = sched.in_flight_bindings()
        if before:
            await _settle_bindings(sched)
            if sched.in_flight_bindings() < before:
                continue  # bound pods may have requeued others
        await asyncio.sleep(0)
        # what wakes next: a pod's backoff, or a permit timeout of pods waiting for their gang
        wakeups = [t for t in (sched.queue.next_backoff_expiry(), clock.next_wakeup()) if t is not None]
        if not wakeups:
            break
        clock.set(min(wakeups))
        sched.queue.flush_due()
    while sched.in_flight_bindings():  # out of attempts: let the permit waits time out
        await _settle_bindings(sched)
        await asyncio.sleep(0)  # a wait's timer starts on the loop's next round
        wakeup = clock.next_wakeup()
        if wakeup is None:
            break
        clock.set(wakeup)
    await sched.wait_for_bindings()
    await sched.close_extenders()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    gated = {
        p["metadata"]["uid"]
        for p in cluster.pending_pods
        if sched.queue.location(p["metadata"]["uid"]) == GATED
    }
    gate_messages = _gate_messages(sched, gated)
    sched.close()
    return SimulationResult(
        pods=cluster.pending_pods,
        outcomes=sim.outcomes,
        volumes=sim.volumes,
        claims=sim.claims,
        explanations=explanations,
        unserved=unserved,
        gated=gated,
        gate_messages=gate_messages,
        pod_groups=list(sched.objects.store(POD_GROUPS).list()),
        nodes=len(cluster.nodes),
        seconds=elapsed,
        cpu_seconds=cpu,
    )
