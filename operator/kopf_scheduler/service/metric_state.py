"""The metrics read at scrape time, so that they cost nothing between scrapes: the queue's sizes, the pods
that entered each queue, the plugins that rejected waiting pods, the cache's size (kube-scheduler v1.37.2's
names, labels and help texts, ``pkg/scheduler/metrics/metrics.go``), and the operator's own state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from kopf_scheduler.scheduling.scheduler import Scheduler

#: the ``name`` label of ``leader_election_master_status`` (client-go's metric; the Lease's name)
LEASE_METRIC_NAME = "kopf-scheduler"

# component-base prefixes every help text with the metric's stability level ("[STABLE] ...").
PENDING_PODS_HELP = (
    "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
    "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
    "unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of "
    "unschedulable pods that the scheduler never attempted to schedule because they are gated; "
    "'incomplete' means number of pods in incompletePodGroupPods; 'pending' means number of pods in "
    "pendingPodGroupPods."
)
QUEUED_ENTITIES_HELP = (
    "[ALPHA] Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual pods "
    "that are not members of any podgroup) by the queue type. 'active' means number of entities in "
    "activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' means number of entities in "
    "unschedulableEntities that the scheduler attempted to schedule and failed; 'gated' is the number of "
    "unschedulable entities that the scheduler never attempted to schedule because they are gated."
)
INCOMING_PODS_HELP = "[STABLE] Number of pods added to scheduling queues by event and queue type."
INCOMING_ENTITIES_HELP = (
    "[ALPHA] Number of scheduling entities added to scheduling queues by event, queue type, and entity "
    "type. Entity types are either 'pod' (for individual pods that are not members of any podgroup) or "
    "'podgroup'."
)
UNSCHEDULABLE_PODS_HELP = (
    "[BETA] The number of unschedulable pods broken down by plugin name. A pod will increment the gauge "
    "for all plugins that caused it to not schedule and so this metric have meaning only when broken down "
    "by plugin."
)
CACHE_SIZE_HELP = "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache."
LEADER_HELP = (
    "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
    "indicates master. 'name' is the string used to identify the lease. Please make sure to group by name."
)
#: the queues of ``scheduler_queued_entities`` (``scheduler_pending_pods`` also has pod-group members')
ENTITY_QUEUES = ("active", "backoff", "unschedulable", "gated")
#: every queued entity is a single pod without GenericWorkload (off by default)
POD = "pod"
POD_GROUP = "podgroup"


class StateCollector(Collector):
    """The scheduling queue and the cache, read at scrape time."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        #: (plugin, profile) pairs once exported: upstream's gauge keeps a series at 0 once created
        self._rejectors_seen: set[tuple[str, str]] = set()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        queue = self.scheduler.queue
        counts = queue.counts()
        pending = GaugeMetricFamily("scheduler_pending_pods", PENDING_PODS_HELP, labels=["queue"])
        for name, count in counts.items():
            pending.add_metric([name], count)
        yield pending
        incoming = queue.incoming
        entities = GaugeMetricFamily(
            "scheduler_queued_entities", QUEUED_ENTITIES_HELP, labels=["queue", "type"]
        )
        by_type = queue.entity_counts() if incoming.entered_groups else None  # pod groups (GenericWorkload)
        for name in ENTITY_QUEUES:
            if name in incoming.entered:
                entities.add_metric(
                    [name, POD], counts[name] if by_type is None else by_type.get((name, POD), 0)
                )
            if by_type is not None and name in incoming.entered_groups:
                entities.add_metric([name, POD_GROUP], by_type.get((name, POD_GROUP), 0))
        yield entities
        # labels by name, as client_golang writes them
        pods_in = CounterMetricFamily(
            "scheduler_queue_incoming_pods", INCOMING_PODS_HELP, labels=["event", "queue"]
        )
        for (name, event), count in list(incoming.pods.items()):
            pods_in.add_metric([event, name], count)
        yield pods_in
        entities_in = CounterMetricFamily(
            "scheduler_queue_incoming_entities", INCOMING_ENTITIES_HELP, labels=["event", "queue", "type"]
        )
        for (name, event), count in list(incoming.entities.items()):
            entities_in.add_metric([event, name, POD], count)
        for (name, event), count in list(incoming.group_entities.items()):
            entities_in.add_metric([event, name, POD_GROUP], count)
        yield entities_in
        rejectors = _read_while_moving(queue.rejectors)
        if rejectors is not None:
            seen = self._rejectors_seen
            seen.update(rejectors)
            unschedulable = GaugeMetricFamily(
                "scheduler_unschedulable_pods", UNSCHEDULABLE_PODS_HELP, labels=["plugin", "profile"]
            )
            for plugin, profile in sorted(seen):
                unschedulable.add_metric([plugin, profile], rejectors.get((plugin, profile), 0))
            yield unschedulable
        cache = self.scheduler.cache
        size = GaugeMetricFamily("scheduler_cache_size", CACHE_SIZE_HELP, labels=["type"])
        size.add_metric(["assumed_pods"], cache.assumed_count())
        size.add_metric(["pods"], cache.pod_count())
        size.add_metric(["nodes"], cache.node_count())
        yield size


def _read_while_moving(
    read: Callable[[], Mapping[tuple[str, str], int]],
) -> Mapping[tuple[str, str], int] | None:
    """``read()``, tried again when the scheduling loop changed what it walks meanwhile (a scrape runs on
    the metrics server's thread); None (the family is left out of this scrape) if it never got through."""
    for _ in range(_READ_TRIES):
        try:
            return read()
        except RuntimeError:  # a dict or set changed size during iteration
            continue
    return None


_READ_TRIES = 5


class OperatorCollector(Collector):
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
        leader = GaugeMetricFamily("leader_election_master_status", LEADER_HELP, labels=["name"])
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
