"""The Prometheus metrics as kube-scheduler v1.37.2 exports them with its default feature gates: every
family's name, type, help text (with component-base's stability prefix), labels and buckets written out
from upstream's ``pkg/scheduler/metrics/metrics.go`` (and client-go's leader-election metric), and what
the scheduler's run feeds into them: attempts, the algorithm's and Permit's durations, extension points
(PreEnqueue, PreBindPreFlight, Unreserve, PostBind included), preemption, the queue's incoming pods and
the plugins that rejected waiting pods, a pod scheduled after the leftover flush.

The real scheduler, queue, cache and default profile on a virtual clock; the API server is the fake.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fake_api import FakeAPI

from kopf_scheduler.api.profile import ProfileSpec
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.interface import PermitPlugin
from kopf_scheduler.framework.objects import WORKLOAD_POD_GROUPS
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import WAIT, Status
from kopf_scheduler.plugins.dynamic_resources.manager import manager_for
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.testing import VirtualClock, make_node, make_pod

PROFILE = "kopf-scheduler"

#: name -> (type, help, labels, ExponentialBuckets(start, factor, count)); kube-scheduler v1.37.2
UPSTREAM: dict[str, tuple[str, str, tuple[str, ...], tuple[float, float, int] | None]] = {
    "scheduler_schedule_attempts_total": (
        "counter",
        "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
        "not be scheduled, while 'error' means an internal scheduler problem.",
        ("result", "profile"),
        None,
    ),
    "scheduler_scheduling_attempt_duration_seconds": (
        "histogram",
        "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
        ("result", "profile"),
        (0.001, 2, 15),
    ),
    "scheduler_scheduling_algorithm_duration_seconds": (
        "histogram",
        "[BETA] Scheduling algorithm latency in seconds",
        (),
        (0.001, 2, 15),
    ),
    "scheduler_preemption_victims": (
        "histogram",
        "[STABLE] Number of selected preemption victims for preemption initiated by a single pod",
        (),
        (1, 2, 7),
    ),
    "scheduler_preemption_attempts_total": (
        "counter",
        "[STABLE] Total preemption attempts in the cluster till now",
        (),
        None,
    ),
    "scheduler_pending_pods": (
        "gauge",
        "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
        "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
        "unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number "
        "of unschedulable pods that the scheduler never attempted to schedule because they are gated; "
        "'incomplete' means number of pods in incompletePodGroupPods; 'pending' means number of pods in "
        "pendingPodGroupPods.",
        ("queue",),
        None,
    ),
    "scheduler_queued_entities": (
        "gauge",
        "[ALPHA] Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual "
        "pods that are not members of any podgroup) by the queue type. 'active' means number of entities "
        "in activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' means number of "
        "entities in unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is "
        "the number of unschedulable entities that the scheduler never attempted to schedule because they "
        "are gated.",
        ("queue", "type"),
        None,
    ),
    "scheduler_pod_scheduling_sli_duration_seconds": (
        "histogram",
        "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
        "and might involve multiple scheduling attempts.",
        ("attempts",),
        (0.01, 2, 20),
    ),
    "scheduler_pod_scheduling_attempts": (
        "histogram",
        "[STABLE] Number of attempts to successfully schedule a pod.",
        (),
        (1, 2, 5),
    ),
    "scheduler_pod_scheduled_after_flush_total": (
        "counter",
        "[ALPHA] Number of pods that were successfully scheduled after being flushed from "
        "unschedulableEntities due to timeout. This metric helps detect potential queueing hint "
        "misconfigurations or event handling issues.",
        (),
        None,
    ),
    "scheduler_framework_extension_point_duration_seconds": (
        "histogram",
        "[STABLE] Latency for running all plugins of a specific extension point.",
        ("extension_point", "status", "profile"),
        (0.0001, 2, 12),
    ),
    "scheduler_queue_incoming_pods_total": (
        "counter",
        "[STABLE] Number of pods added to scheduling queues by event and queue type.",
        ("queue", "event"),
        None,
    ),
    "scheduler_queue_incoming_entities_total": (
        "counter",
        "[ALPHA] Number of scheduling entities added to scheduling queues by event, queue type, and entity "
        "type. Entity types are either 'pod' (for individual pods that are not members of any podgroup) "
        "or 'podgroup'.",
        ("queue", "event", "type"),
        None,
    ),
    "scheduler_permit_wait_duration_seconds": (
        "histogram",
        "[BETA] Duration of waiting on permit.",
        ("result",),
        (0.001, 2, 15),
    ),
    "scheduler_cache_size": (
        "gauge",
        "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
        ("type",),
        None,
    ),
    "scheduler_unschedulable_pods": (
        "gauge",
        "[BETA] The number of unschedulable pods broken down by plugin name. A pod will increment the "
        "gauge for all plugins that caused it to not schedule and so this metric have meaning only when "
        "broken down by plugin.",
        ("plugin", "profile"),
        None,
    ),
    "scheduler_preemption_goroutines_execution_total": (
        "counter",
        "[ALPHA] Number of preemption goroutines executed.",
        ("result",),
        None,
    ),
    # OpportunisticBatching (on): its counters (the default profile counts no_hint attempts)
    "scheduler_batch_attempts_total": (
        "counter",
        "[ALPHA] Counts of results when we attempt to use batching.",
        ("profile", "result"),
        None,
    ),
    "scheduler_batch_cache_flushed_total": (
        "counter",
        "[ALPHA] Counts of cache flushes by reason.",
        ("profile", "reason"),
        None,
    ),
    "scheduler_batch_rescore_attempts_total": (
        "counter",
        "[ALPHA] Counts of rescore attempts during opportunistic batching.",
        ("profile",),
        None,
    ),
    # DRADeviceBindingConditions (on)
    "scheduler_dra_bindingconditions_allocations_total": (
        "counter",
        "[ALPHA] Number of allocations using devices with BindingConditions, counted per driver per "
        "scheduling attempt",
        ("driver", "profile", "status"),
        None,
    ),
    "scheduler_dra_bindingconditions_wait_duration_seconds": (
        "histogram",
        "[ALPHA] Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
        ("driver", "profile", "status"),
        (0.1, 2, 14),
    ),
    # DRAExtendedResource (on): the claims created for pods' extended resources
    "dynamic_resource_allocation_resourceclaim_creates_total": (
        "counter",
        "[ALPHA] Number of ResourceClaims creation requests, categorized by creation status, admin access, "
        "and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
        ("status", "admin_access", "owner_api_group", "owner_api_kind"),
        None,
    ),
    "leader_election_master_status": (
        "gauge",
        "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
        "indicates master. 'name' is the string used to identify the lease. Please make sure to group by "
        "name.",
        ("name",),
        None,
    ),
}


class WaitingPermit(PermitPlugin):
    name = "FakePermit"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        return (WAIT, 60.0) if pod.name == "waits" else (None, 0.0)


def _setup(cpu: str = "2") -> tuple[Scheduler, FakeAPI, SchedulerMetrics]:
    api = FakeAPI()
    scheduler = Scheduler(api, clock=VirtualClock())
    scheduler.set_profile(ProfileSpec(scheduler_name=PROFILE))
    scheduler.add_node(make_node().name("n1").capacity(cpu=cpu, memory="8Gi", pods=10).obj())
    metrics = SchedulerMetrics()
    metrics.attach(scheduler)
    metrics.register_gated(scheduler.feature_gates.enabled)  # the default gates: binding conditions' on
    metrics.attach_operator(leading=lambda: True, profiles=lambda: {}, binds=lambda: {})
    return scheduler, api, metrics


def _pod(name: str, cpu: str, priority: int = 0) -> dict[str, Any]:
    return make_pod().name(name).uid(name).scheduler_name(PROFILE).req(cpu=cpu).priority(priority).obj()


async def _attempt(scheduler: Scheduler, pod: dict[str, Any]) -> None:
    scheduler.add_pod(pod)
    qp = scheduler.queue.pop_nowait()
    assert qp is not None and qp.pod.name == pod["metadata"]["name"]
    scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()


async def _preemption(scheduler: Scheduler) -> None:
    """``low`` is bound, then ``high`` (higher priority) fits only by preempting it."""
    await _attempt(scheduler, _pod("low", "1500m"))
    await _attempt(scheduler, _pod("high", "1500m", priority=100))


def _samples(metrics: SchedulerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
    }


def _value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_every_family_is_kube_schedulers_v1_37_2_and_no_other() -> None:
    scheduler, _, metrics = _setup()
    await _preemption(scheduler)
    scheduler.recorder.permit_waited(None, time.perf_counter())
    _binding_conditions_waited(scheduler)
    for hook in manager_for(scheduler.objects).claim_create_hooks:  # a claim made for extended resources
        hook("success")
    scheduler.recorder.batch_rescore(PROFILE)  # the default profile signs no pod: it never rescores
    families = {}
    for family in metrics.registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = sorted({key for sample in family.samples for key in sample.labels if key != "le"})
        bounds = [float(sample.labels["le"]) for sample in family.samples if sample.name.endswith("_bucket")]
        families[name] = (family.type, family.documentation, labels, sorted(set(bounds)))
    ours = {name: value for name, value in families.items() if not name.startswith("kopf_scheduler_")}
    assert sorted(ours) == sorted(UPSTREAM)
    for name, (kind, help_text, labels, buckets) in UPSTREAM.items():
        bounds: list[float] = []
        if buckets is not None:
            start, factor, count = buckets
            bounds = [start * factor**i for i in range(count)] + [float("inf")]
        assert ours[name] == (kind, help_text, sorted(labels), bounds), name


def _binding_conditions_waited(scheduler: Scheduler) -> None:
    """What DynamicResources' PreBind reports after a wait for device binding conditions."""
    manager = manager_for(scheduler.objects)
    for hook in manager.binding_wait_hooks:
        hook(PROFILE, "gpu.example.com", "timeout", 1.5)
    for allocation_hook in manager.binding_allocation_hooks:
        allocation_hook(PROFILE, "gpu.example.com", "timeout")


def test_binding_conditions_waits_are_counted_per_driver_profile_and_status() -> None:
    scheduler, _, metrics = _setup()
    _binding_conditions_waited(scheduler)
    labels = {"driver": "gpu.example.com", "profile": PROFILE, "status": "timeout"}
    assert _value(metrics, "scheduler_dra_bindingconditions_allocations_total", **labels) == 1
    assert _value(metrics, "scheduler_dra_bindingconditions_wait_duration_seconds_sum", **labels) == 1.5
    bucket = {**labels, "le": "1.6"}
    assert _value(metrics, "scheduler_dra_bindingconditions_wait_duration_seconds_bucket", **bucket) == 1


def test_claims_created_for_extended_resources_are_counted_by_status() -> None:
    scheduler, _, metrics = _setup()
    for status in ("success", "success", "failure"):
        for hook in manager_for(scheduler.objects).claim_create_hooks:
            hook(status)
    labels = {"admin_access": "false", "owner_api_group": "", "owner_api_kind": "Pod"}
    name = "dynamic_resource_allocation_resourceclaim_creates_total"
    assert _value(metrics, name, status="success", **labels) == 2
    assert _value(metrics, name, status="failure", **labels) == 1


async def test_preemption_and_the_attempts_it_ends() -> None:
    scheduler, api, metrics = _setup()
    await _preemption(scheduler)
    assert api.evicted == ["default/low"]
    samples = _samples(metrics)
    assert {
        (name, dict(labels).get("result"), value)
        for (name, labels), value in samples.items()
        if name == "scheduler_schedule_attempts_total"
    } == {
        ("scheduler_schedule_attempts_total", "scheduled", 1.0),
        ("scheduler_schedule_attempts_total", "unschedulable", 1.0),
    }
    assert _value(metrics, "scheduler_preemption_attempts_total") == 1
    assert _value(metrics, "scheduler_preemption_victims_count") == 1
    assert _value(metrics, "scheduler_preemption_victims_sum") == 1
    assert _value(metrics, "scheduler_preemption_goroutines_execution_total", result="success") == 1
    assert _value(metrics, "scheduler_scheduling_algorithm_duration_seconds_count") == 2
    # high waits in the pool for an event about the room it asked for, rejected by NodeResourcesFit
    assert _value(metrics, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 1
    assert _value(metrics, "scheduler_pending_pods", queue="unschedulable") == 1
    assert _value(metrics, "scheduler_queued_entities", queue="unschedulable", type="pod") == 1
    assert _value(metrics, "scheduler_queued_entities", queue="backoff", type="pod") is None  # never entered
    incoming = {
        (dict(labels)["queue"], dict(labels)["event"]): value
        for (name, labels), value in samples.items()
        if name == "scheduler_queue_incoming_pods_total"
    }
    assert incoming == {("active", "UnscheduledPodAdd"): 2, ("unschedulable", "ScheduleAttemptFailure"): 1}
    assert (
        _value(
            metrics,
            "scheduler_queue_incoming_entities_total",
            queue="active",
            event="UnscheduledPodAdd",
            type="pod",
        )
        == 2
    )
    assert _value(metrics, "scheduler_cache_size", type="nodes") == 1
    assert _value(metrics, "scheduler_cache_size", type="pods") == 1  # low: no deletion seen yet


async def test_extension_points_of_a_bound_pod() -> None:
    scheduler, _, metrics = _setup()
    await _attempt(scheduler, _pod("p", "1"))
    counted = {
        (dict(labels)["extension_point"], dict(labels)["status"])
        for (name, labels), value in _samples(metrics).items()
        if name == "scheduler_framework_extension_point_duration_seconds_count" and value
    }
    # PreEnqueue always 'Success' (upstream reports an unassigned status); the one feasible node is not
    # scored; no claims: the pre-flights skip, and PreBind runs (and is timed) all the same
    assert counted == {
        ("PreEnqueue", "Success"),
        ("Sign", "Success"),  # OpportunisticBatching: the pod is signed (the default profile signs none)
        ("PreFilter", "Success"),
        ("Filter", "Success"),
        ("Reserve", "Success"),
        ("Permit", "Success"),
        ("PreBindPreFlight", "Skip"),
        ("PreBind", "Success"),
        ("Bind", "Success"),
        ("PostBind", "Success"),
    }
    assert _value(metrics, "scheduler_permit_wait_duration_seconds_count", result="Success") is None


async def test_a_wait_at_permit_and_a_rejection_after_reserve_unreserves() -> None:
    scheduler, _, metrics = _setup()
    framework = scheduler.profiles[PROFILE]
    plugin = WaitingPermit()
    framework.plugins[plugin.name] = plugin
    framework.permit = [*framework.permit, plugin]
    scheduler.add_pod(_pod("waits", "1"))
    qp = scheduler.queue.pop_nowait()
    assert qp is not None
    scheduler.schedule_one(qp)
    while (waiting := framework.waiting_pods.get("waits")) is None:
        await asyncio.sleep(0)
    waiting.reject("FakePermit", "not now")
    await scheduler.wait_for_bindings()
    assert _value(metrics, "scheduler_permit_wait_duration_seconds_count", result="Unschedulable") == 1
    assert (
        _value(
            metrics,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point="Unreserve",
            status="Success",
            profile=PROFILE,
        )
        == 1
    )


async def test_a_pod_scheduled_after_the_leftover_flush_is_counted() -> None:
    scheduler, _, metrics = _setup(cpu="1")
    await _attempt(scheduler, _pod("big", "2"))
    assert scheduler.queue.location("big") == "unschedulable"
    # room appears without an event the queue sees: only the leftover flush retries the pod
    scheduler.cache.update_node(make_node().name("n1").capacity(cpu="4", memory="8Gi", pods=10).obj())
    scheduler.clock.advance(301)  # type: ignore[attr-defined]
    scheduler.queue.flush_unschedulable_leftover()
    qp = scheduler.queue.pop_nowait()
    assert qp is not None and qp.was_flushed
    scheduler.schedule_one(qp)
    await scheduler.wait_for_bindings()
    assert _value(metrics, "scheduler_pod_scheduled_after_flush_total") == 1


def test_a_pod_group_counts_its_pods_and_is_one_podgroup_entity() -> None:
    """GenericWorkload: ``scheduler_pending_pods`` counts a gang's pods, ``scheduler_queued_entities`` and
    ``scheduler_queue_incoming_entities_total`` its entity as ``type="podgroup"``."""
    scheduler, _, metrics = _setup()
    scheduler.use_pod_groups(True)
    group = {
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"schedulingPolicy": {"basic": {}}},
    }
    scheduler.update_object(WORKLOAD_POD_GROUPS, group)
    for name in ("m0", "m1"):
        pod = make_pod().name(name).uid(name).scheduler_name(PROFILE).req(cpu="100m")
        scheduler.add_pod(pod.set("spec.schedulingGroup", {"podGroupName": "g"}).obj())
    assert _value(metrics, "scheduler_pending_pods", queue="active") == 2
    assert _value(metrics, "scheduler_queued_entities", queue="active", type="podgroup") == 1
    assert _value(metrics, "scheduler_queued_entities", queue="active", type="pod") is None
    assert (
        _value(
            metrics,
            "scheduler_queue_incoming_entities_total",
            event="UnscheduledPodAdd",
            queue="active",
            type="podgroup",
        )
        == 1
    )
    assert (
        _value(metrics, "scheduler_queue_incoming_pods_total", event="UnscheduledPodAdd", queue="active") == 3
    )
