"""What the scheduling queue counts for the metrics: pods entering each queue, by event.

kube-scheduler v1.37 (``recordIncomingEntitiesMetrics`` in ``backend/queue/scheduling_queue.go``) counts
``scheduler_queue_incoming_pods_total{queue, event}`` each time a pod is added to activeQ or backoffQ,
or enters the unschedulable pool (a pod already there, re-stored, is not counted); the pool's label is
``unschedulable`` for gated pods too. ``scheduler_queue_incoming_entities_total{queue, event, type}``
counts the same additions, but only those of a new pod (no queueing strategy) or where the strategy the
pod was requeued with names another queue than the one it reached (the queue passes the strategy just
decided, so a pod a hint sends where it goes is not counted again: upstream's own behaviour, its
``TestIncomingEntitiesMetrics`` expects it). Without GenericWorkload every entity is a single pod
(``type="pod"``). A ``scheduler_queued_entities{queue, type}`` series exists once some pod has entered
that queue (upstream creates it on the first addition).
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

    __slots__ = ("entered", "entities", "pods")

    def __init__(self) -> None:
        #: (queue, event) -> pods added (``scheduler_queue_incoming_pods_total``)
        self.pods: collections.Counter[tuple[str, str]] = collections.Counter()
        #: (queue, event) -> entities added (``scheduler_queue_incoming_entities_total``, type "pod")
        self.entities: collections.Counter[tuple[str, str]] = collections.Counter()
        #: the queues (active, backoff, unschedulable, gated) some pod has entered
        self.entered: set[str] = set()

    def record(self, queue: str, event: str, strategy: Strategy | None) -> None:
        """A pod was added to ``queue`` because of ``event``; ``strategy``: the queueing strategy it was
        requeued with (None: a new pod, or a move that has none)."""
        key = (queue, event)
        self.pods[key] += 1
        if strategy is None or _QUEUE_OF[strategy] != queue:
            self.entities[key] += 1
