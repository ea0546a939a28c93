"""Prometheus metrics under kube-scheduler v1.37.2's names, labels, buckets and help texts
(``pkg/scheduler/metrics/metrics.go``), so existing dashboards and alerts work unchanged.

Fed by the scheduler's recorder (bound, failed, extension-point, algorithm and Permit-wait timings,
preemption); the queue's and the cache's state is read when the endpoint is scraped (``metric_state``).
The metrics kube-scheduler v1.37.2 registers only with a feature gate on are registered the same way,
once the gates are known (``register_gated``): GenericWorkload's (the pod group cycle's attempts and
algorithm, workload preemption, and preemption's evaluation and execution timings, PDB violations and
disrupted groups, of pods too) and DRADeviceBindingConditions' (``scheduler_dra_bindingconditions_*``, fed
by DynamicResources' PreBind waits) and DRAExtendedResource's
(``dynamic_resource_allocation_resourceclaim_creates_total``, fed by the claims it creates for extended
resources). TopologyAwareWorkloadScheduling's placement metrics and SchedulerAsyncAPICalls' are not here:
those gates are refused.
Of opportunistic batching's, the counters are here; its latency histograms (``get_node_hint``,
``store_schedule_results``, ``batch_rescore``) are not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.utils import INF

from kopf_scheduler.framework.pod_info import QueuedPodInfo
from kopf_scheduler.plugins.dynamic_resources.manager import manager_for
from kopf_scheduler.service.metric_state import OperatorCollector, StateCollector

if TYPE_CHECKING:
    from kopf_scheduler.framework.runtime.recorder import Recorder
    from kopf_scheduler.scheduling.scheduler import Scheduler
    from kopf_scheduler.scheduling.shadow import ShadowDecision

# kube-scheduler exports no ``*_created`` series; neither do we.
disable_created_metrics()


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)] + [INF]


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # component-base prefixes every help text with the metric's stability level; labels are declared
        # in the order client_golang writes them (by name), so a series reads as kube-scheduler's does
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
            "not be scheduled, while 'error' means an internal scheduler problem.",
            ["profile", "result"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["profile", "result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "[BETA] Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
            "and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.scheduled_after_flush = Counter(
            "scheduler_pod_scheduled_after_flush",
            "[ALPHA] Number of pods that were successfully scheduled after being flushed from "
            "unschedulableEntities due to timeout. This metric helps detect potential queueing hint "
            "misconfigurations or event handling issues.",
            registry=r,
        )
        self.extension_point = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            ["extension_point", "profile", "status"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.permit_wait = Histogram(
            "scheduler_permit_wait_duration_seconds",
            "[BETA] Duration of waiting on permit.",
            ["result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts",
            "[STABLE] Total preemption attempts in the cluster till now",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims for preemption initiated by a single pod",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )
        # SchedulerAsyncPreemption (on): preemption_goroutines_duration_seconds, deprecated in 1.37.0, is
        # hidden from v1.37 on (an alpha metric is hidden in the release that deprecates it)
        self.preemption_executions = Counter(
            "scheduler_preemption_goroutines_execution",
            "[ALPHA] Number of preemption goroutines executed.",
            ["result"],
            registry=r,
        )
        self.batch_attempts = Counter(
            "scheduler_batch_attempts",
            "[ALPHA] Counts of results when we attempt to use batching.",
            ["profile", "result"],
            registry=r,
        )
        self.batch_cache_flushed = Counter(
            "scheduler_batch_cache_flushed",
            "[ALPHA] Counts of cache flushes by reason.",
            ["profile", "reason"],
            registry=r,
        )
        self.batch_rescore_attempts = Counter(
            "scheduler_batch_rescore_attempts",
            "[ALPHA] Counts of rescore attempts during opportunistic batching.",
            ["profile"],
            registry=r,
        )
        # DRADeviceBindingConditions (registered by ``register_gated``)
        self.dra_binding_allocations = Counter(
            "scheduler_dra_bindingconditions_allocations",
            "[ALPHA] Number of allocations using devices with BindingConditions, counted per driver per "
            "scheduling attempt",
            ["driver", "profile", "status"],
            registry=None,
        )
        self.dra_binding_wait = Histogram(
            "scheduler_dra_bindingconditions_wait_duration_seconds",
            "[ALPHA] Time in seconds spent waiting for BindingConditions to be satisfied during PreBind.",
            ["driver", "profile", "status"],
            buckets=exponential_buckets(0.1, 2, 14),
            registry=None,
        )
        self.workload = _WorkloadMetrics()
        self._gated_registered = False
        # DRAExtendedResource (registered by ``register_gated``)
        self.resourceclaim_creates = Counter(
            "dynamic_resource_allocation_resourceclaim_creates",
            "[ALPHA] Number of ResourceClaims creation requests, categorized by creation status, admin "
            "access, and owning API group and kind (either Pod or scheduling.k8s.io/PodGroup)",
            ["status", "admin_access", "owner_api_group", "owner_api_kind"],
            registry=None,
        )
        self.shadow_decisions = Counter(
            "kopf_scheduler_shadow_decisions",
            "Verdicts of shadow profiles on the pods another scheduler bound: 'same' (the node is among "
            "those the profile scores highest), 'different', 'infeasible' (no node passes its filters).",
            ["profile", "result"],
            registry=r,
        )

    def attach(self, scheduler: Scheduler) -> None:
        """Subscribes to the scheduler's recorder and exports its queue's and cache's state."""
        self.registry.register(StateCollector(scheduler))
        clock = scheduler.clock

        attempts_of, duration_of = _labelled(self.schedule_attempts), _labelled(self.attempt_duration)
        sli_of, extension_of = _labelled(self.sli_duration), _labelled(self.extension_point)
        permit_of, executions_of = _labelled(self.permit_wait), _labelled(self.preemption_executions)

        def bound(qp: QueuedPodInfo, node: str, started: float) -> None:
            profile = qp.pod.scheduler_name
            attempts_of(profile, "scheduled").inc()
            duration_of(profile, "scheduled").observe(_since(started))
            attempts = qp.attempts
            sli_of("15+" if attempts >= 15 else str(attempts)).observe(
                max(0.0, clock.now() - qp.initial_timestamp)
            )
            self.pod_attempts.observe(attempts)
            if qp.was_flushed:
                self.scheduled_after_flush.inc()

        def failed(qp: QueuedPodInfo, reason: str, message: str, result: str, started: float) -> None:
            profile = qp.pod.scheduler_name
            attempts_of(profile, result).inc()
            duration_of(profile, result).observe(_since(started))

        def extension(point: str, status: str, profile: str, seconds: float) -> None:
            extension_of(point, profile, status).observe(seconds)

        def permit_waited(status: str, seconds: float) -> None:
            permit_of(status).observe(seconds)

        def preemption_executed(result: str) -> None:
            executions_of(result).inc()

        def shadow(decision: ShadowDecision) -> None:
            self.shadow_decisions.labels(decision.profile, decision.result).inc()

        recorder = scheduler.recorder
        recorder.bound_hooks.append(bound)
        recorder.failed_hooks.append(failed)
        recorder.extension_hooks.append(extension)
        recorder.algorithm_hooks.append(self.algorithm_duration.observe)
        recorder.permit_wait_hooks.append(permit_waited)
        recorder.preemption_attempt_hooks.append(self.preemption_attempts.inc)
        recorder.preemption_victims_hooks.append(self.preemption_victims.observe)
        recorder.preemption_execution_hooks.append(preemption_executed)
        batch_attempt_of, batch_flush_of = _labelled(self.batch_attempts), _labelled(self.batch_cache_flushed)
        rescore_of = _labelled(self.batch_rescore_attempts)
        recorder.batch_attempt_hooks.append(lambda profile, result: batch_attempt_of(profile, result).inc())
        recorder.batch_flush_hooks.append(lambda profile, reason: batch_flush_of(profile, reason).inc())
        recorder.batch_rescore_hooks.append(lambda profile: rescore_of(profile).inc())
        scheduler.shadow_hooks.append(shadow)
        self.workload.attach(recorder)
        self._attach_dra(scheduler)

    def register_gated(self, enabled: Callable[[str], bool]) -> None:
        """Registers the metrics kube-scheduler registers only with a feature gate on (``Register``), once
        the gates in force are known (once: later calls change nothing). Until then, and with the gate
        off, they are fed but not served."""
        if self._gated_registered:
            return
        self._gated_registered = True
        if enabled("DRAExtendedResource"):
            self.registry.register(self.resourceclaim_creates)
        if enabled("GenericWorkload"):
            for metric in self.workload.all():
                self.registry.register(metric)
        if enabled("DRADeviceBindingConditions"):
            self.registry.register(self.dra_binding_allocations)
            self.registry.register(self.dra_binding_wait)

    def _attach_dra(self, scheduler: Scheduler) -> None:
        """DynamicResources' waits for device binding conditions (one DRA manager per scheduler)."""
        waits, allocations = _labelled(self.dra_binding_wait), _labelled(self.dra_binding_allocations)
        manager = manager_for(scheduler.objects)
        manager.binding_wait_hooks.append(
            lambda profile, driver, status, seconds: waits(driver, profile, status).observe(seconds)
        )
        manager.binding_allocation_hooks.append(
            lambda profile, driver, status: allocations(driver, profile, status).inc()
        )
        # the claims made for pods' extended resources (DRAExtendedResource): never admin access, owned
        # by the pod
        creates = _labelled(self.resourceclaim_creates)
        manager.claim_create_hooks.append(lambda status: creates(status, "false", "", "Pod").inc())

    def attach_operator(
        self,
        *,
        leading: Callable[[], bool],
        profiles: Callable[[], Mapping[str, int]],
        binds: Callable[[], Mapping[str, int]],
    ) -> None:
        """Exports the operator's state: the leader gauge, profiles accepted and refused, bindings."""
        self.registry.register(OperatorCollector(leading, profiles, binds))


class _WorkloadMetrics:
    """GenericWorkload's: the pod group cycle's attempts, and preemption's (of pod groups and of pods)."""

    def __init__(self) -> None:
        self.attempts = Counter(
            "scheduler_podgroup_schedule_attempts",
            "[ALPHA] Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod "
            "group could not be scheduled, while 'error' means an internal scheduler problem.",
            ["profile", "result"],
            registry=None,
        )
        self.attempt_duration = Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "[ALPHA] Pod group scheduling attempt latency in seconds",
            ["profile", "result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=None,
        )
        self.algorithm_duration = Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "[ALPHA] Pod group scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=None,
        )
        self.preemption_attempts = Counter(
            "scheduler_workload_preemption_attempts",
            "[ALPHA] Total preemption attempts initiated by workload (including pod groups) in the cluster "
            "till now.",
            ["result"],
            registry=None,
        )
        self.preemption_victims = Histogram(
            "scheduler_workload_preemption_victims",
            "[ALPHA] Number of pod preemption victims caused by workload preemption.",
            buckets=exponential_buckets(1, 2, 11),
            registry=None,
        )
        self.disruptions = Histogram(
            "scheduler_preemption_workload_disruptions",
            "[ALPHA] Number of workload preemption units being preempted. A single preemption unit can be "
            "all pods in a pod group (in case of DisruptionMode=all), or a single pod (in case of "
            "DisruptionMode=single).",
            ["preemptor"],
            buckets=exponential_buckets(1, 2, 11),
            registry=None,
        )
        self.evaluation_duration = Histogram(
            "scheduler_preemption_evaluation_duration_seconds",
            "[ALPHA] Duration in seconds for identifying the target preemption victims.",
            ["preemptor", "result"],
            buckets=exponential_buckets(0.001, 2, 16),
            registry=None,
        )
        self.execution_duration = Histogram(
            "scheduler_preemption_execution_duration_seconds",
            "[ALPHA] Duration in seconds for preempting the target preemption victims. With async "
            "preemption enabled, preemption execution does not block the scheduling of other pods.",
            ["preemptor", "result"],
            buckets=exponential_buckets(0.001, 2, 16),
            registry=None,
        )
        self.pdb_violations = Counter(
            "scheduler_preemption_pdb_violations",
            "[ALPHA] Total number of pod disruption budget violations caused by preemption.",
            ["preemptor"],
            registry=None,
        )

    def all(self) -> list[Any]:
        return [
            self.attempts,
            self.attempt_duration,
            self.algorithm_duration,
            self.preemption_attempts,
            self.preemption_victims,
            self.disruptions,
            self.evaluation_duration,
            self.execution_duration,
            self.pdb_violations,
        ]

    def attach(self, recorder: Recorder) -> None:
        attempts, durations = _labelled(self.attempts), _labelled(self.attempt_duration)
        preemptions, evaluations = _labelled(self.preemption_attempts), _labelled(self.evaluation_duration)
        executions, disruptions = _labelled(self.execution_duration), _labelled(self.disruptions)
        violations = _labelled(self.pdb_violations)

        def attempt(profile: str, result: str, seconds: float) -> None:
            attempts(profile, result).inc()
            durations(profile, result).observe(seconds)

        recorder.pod_group_attempt_hooks.append(attempt)
        recorder.pod_group_algorithm_hooks.append(self.algorithm_duration.observe)
        recorder.workload_preemption_attempt_hooks.append(lambda result: preemptions(result).inc())
        recorder.workload_preemption_victims_hooks.append(self.preemption_victims.observe)
        recorder.preemption_evaluation_hooks.append(
            lambda preemptor, result, seconds: evaluations(preemptor, result).observe(seconds)
        )
        recorder.preemption_execution_duration_hooks.append(
            lambda preemptor, result, seconds: executions(preemptor, result).observe(seconds)
        )
        recorder.preemption_disruptions_hooks.append(lambda preemptor, n: disruptions(preemptor).observe(n))
        recorder.preemption_pdb_violations_hooks.append(lambda preemptor, n: violations(preemptor).inc(n))


def _labelled(metric: Any) -> Callable[..., Any]:
    """``metric.labels`` remembered per label values. prometheus_client takes a lock and builds a key on
    every call, which cost more than the observation itself: the scheduling path records about a dozen
    observations per pod (each extension point, the attempt, the SLI). Children are never removed, so
    what is remembered is what ``labels`` would return."""
    children: dict[tuple[str, ...], Any] = {}

    def child(*values: str) -> Any:
        found = children.get(values)
        if found is None:
            found = children[values] = metric.labels(*values)
        return found

    return child


def _since(started: float) -> float:
    from kopf_scheduler.scheduling.schedule_one import now

    return max(0.0, now() - started)
