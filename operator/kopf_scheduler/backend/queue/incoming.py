"""What the scheduling queue counts for the metrics: pods entering each queue, by event.

kube-scheduler v1.37 (``recordIncomingEntitiesMetrics`` in ``backend/queue/scheduling_queue.go``) counts
``scheduler_queue_incoming_pods_total{queue, event}`` each time a pod is added to activeQ or backoffQ,
or enters the unschedulable pool (a pod already there, re-stored, is not counted); the pool's label is
``unschedulable`` for gated pods too. ``scheduler_queue_incoming_entities_total{queue, event, type}``
counts the same additions, but only those of a new pod (no queueing strategy) or where the strategy the
pod was requeued with names another queue than the one it reached (the queue passes the strategy just
decided, so a pod a hint sends where it goes is not counted again: upstream's own behaviour, its
``TestIncomingEntitiesMetrics`` expects it). Without GenericWorkload every entity is a single pod
(``type="pod"``); with it a pod group's members are one entity (``type="podgroup"``), which counts all its
pods among the incoming pods. A ``scheduler_queued_entities{queue, type}`` series exists once some entity
of that type has entered that queue (upstream creates it on the first addition).
"""

from __future__ import annotations

import collections

from kopf_scheduler.backend.queue.profile_events import Strategy

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

#: the events the queue names its own moves by (upstream's ``framework/events.go``)
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"

#: upstream's ``strategyToQueueLabel``
_QUEUE_OF = {Strategy.IMMEDIATELY: ACTIVE, Strategy.AFTER_BACKOFF: BACKOFF, Strategy.SKIP: UNSCHEDULABLE}


class IncomingCounts:
    """Counters the metrics read at scrape time; the queue records, nothing here reads the queue."""

    __slots__ = ("entered", "entered_groups", "entities", "group_entities", "pods")

    def __init__(self) -> None:
        #: (queue, event) -> pods added (``scheduler_queue_incoming_pods_total``)
        self.pods: collections.Counter[tuple[str, str]] = collections.Counter()
        #: (queue, event) -> entities added (``scheduler_queue_incoming_entities_total``, type "pod")
        self.entities: collections.Counter[tuple[str, str]] = collections.Counter()
        #: (queue, event) -> pod group entities added (the same metric, type "podgroup")
        self.group_entities: collections.Counter[tuple[str, str]] = collections.Counter()
        #: the queues (active, backoff, unschedulable, gated) some pod has entered, and some pod group
        self.entered: set[str] = set()
        self.entered_groups: set[str] = set()

    def record(
        self, queue: str, event: str, strategy: Strategy | None, size: int = 1, group: bool = False
    ) -> None:
        """An entity was added to ``queue`` because of ``event``: a pod, or (``group``) a pod group of
        ``size`` pods; ``strategy``: the queueing strategy it was requeued with (None: a new entity, or a
        move that has none)."""
        key = (queue, event)
        self.pods[key] += size
        if strategy is None or _QUEUE_OF[strategy] != queue:
            (self.group_entities if group else self.entities)[key] += 1
