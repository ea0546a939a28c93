"""Prometheus metrics under kube-scheduler's names and buckets (``pkg/scheduler/metrics/metrics.go``),
so existing dashboards and alerts work unchanged.

Fed by the scheduler's hooks (bound, failed, extension-point timings); queue and cache sizes are read
when the endpoint is scraped, so they cost nothing between scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import INF

from kopf_scheduler.framework.pod_info import QueuedPodInfo

if TYPE_CHECKING:
    from kopf_scheduler.scheduling.scheduler import Scheduler
    from kopf_scheduler.scheduling.shadow import ShadowDecision


#: the ``name`` label of ``leader_election_master_status`` (client-go's metric; the Lease's name)
LEASE_METRIC_NAME = "kopf-scheduler"

# kube-scheduler exports no ``*_created`` series; neither do we.
disable_created_metrics()


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)] + [INF]


class _StateCollector(Collector):
    """Gauges read at scrape time: pending pods per queue and the cache's size."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the "
            "number of unschedulable pods that the scheduler never attempted to schedule because they "
            "are gated.",
            labels=["queue"],
        )
        for queue, count in self.scheduler.queue.counts().items():
            pending.add_metric([queue], count)
        yield pending
        cache = GaugeMetricFamily(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            labels=["type"],
        )
        cache.add_metric(["nodes"], self.scheduler.cache.node_count())
        cache.add_metric(["pods"], self.scheduler.cache.pod_count())
        cache.add_metric(["assumed_pods"], self.scheduler.cache.assumed_count())
        yield cache


class _OperatorCollector(Collector):
    """The operator's own state, read at scrape time: leading or not (client-go's leader election
    metric), SchedulingProfiles accepted and refused, and binding requests by outcome."""

    def __init__(
        self,
        leading: Callable[[], bool],
        profiles: Callable[[], Mapping[str, int]],
        binds: Callable[[], Mapping[str, int]],
    ) -> None:
        self.leading, self.profiles, self.binds = leading, profiles, binds

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        leader = GaugeMetricFamily(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
            "indicates master. 'name' is the string used to identify the lease.",
            labels=["name"],
        )
        leader.add_metric([LEASE_METRIC_NAME], 1.0 if self.leading() else 0.0)
        yield leader
        profiles = GaugeMetricFamily(
            "kopf_scheduler_profiles",
            "SchedulingProfiles by whether their current generation is accepted.",
            labels=["accepted"],
        )
        for accepted, count in sorted(self.profiles().items()):
            profiles.add_metric([accepted], count)
        yield profiles
        binds = CounterMetricFamily(
            "kopf_scheduler_binding_requests",
            "Binding requests by outcome: ok, conflict (bound elsewhere), gone (deleted), error (reported "
            "and retried later), retried (sent again within the binding cycle).",
            labels=["result"],
        )
        counts = self.binds()
        for result in ("ok", "conflict", "gone", "error", "retried"):
            binds.add_metric([result], counts.get(result, 0))
        yield binds


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=r,
        )
        self.sli_duration = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
            "and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=r,
        )
        self.extension_point = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=r,
        )
        self.shadow_decisions = Counter(
            "kopf_scheduler_shadow_decisions",
            "Verdicts of shadow profiles on the pods another scheduler bound: 'same' (the node is among "
            "those the profile scores highest), 'different', 'infeasible' (no node passes its filters).",
            ["profile", "result"],
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=r
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=r,
        )

    def attach(self, scheduler: Scheduler) -> None:
        """Subscribes to the scheduler's hooks and exports its queue and cache sizes."""
        self.registry.register(_StateCollector(scheduler))
        clock = scheduler.clock

        attempts_of, duration_of = _labelled(self.schedule_attempts), _labelled(self.attempt_duration)
        sli_of, extension_of = _labelled(self.sli_duration), _labelled(self.extension_point)

        def bound(qp: QueuedPodInfo, node: str, started: float) -> None:
            profile = qp.pod.scheduler_name
            attempts_of("scheduled", profile).inc()
            duration_of("scheduled", profile).observe(_since(started))
            attempts = qp.attempts
            sli_of("15+" if attempts >= 15 else str(attempts)).observe(
                max(0.0, clock.now() - qp.initial_timestamp)
            )
            self.pod_attempts.observe(attempts)

        def failed(qp: QueuedPodInfo, reason: str, message: str, result: str, started: float) -> None:
            profile = qp.pod.scheduler_name
            attempts_of(result, profile).inc()
            duration_of(result, profile).observe(_since(started))

        def extension(point: str, status: str, profile: str, seconds: float) -> None:
            extension_of(point, status, profile).observe(seconds)

        def shadow(decision: ShadowDecision) -> None:
            self.shadow_decisions.labels(decision.profile, decision.result).inc()

        scheduler.recorder.bound_hooks.append(bound)
        scheduler.recorder.failed_hooks.append(failed)
        scheduler.recorder.extension_hooks.append(extension)
        scheduler.shadow_hooks.append(shadow)

    def attach_operator(
        self,
        *,
        leading: Callable[[], bool],
        profiles: Callable[[], Mapping[str, int]],
        binds: Callable[[], Mapping[str, int]],
    ) -> None:
        """Exports the operator's state: the leader gauge, profiles accepted and refused, bindings."""
        self.registry.register(_OperatorCollector(leading, profiles, binds))


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
