"""The scheduling queue (kube-scheduler's ``backend/queue``): activeQ, backoffQ, the unschedulable pool,
pods in flight and nominated pods. ``SchedulingQueue`` is the entry point; the other modules are its parts.

This package knows neither the cache nor Kopf nor the API client: it sees pods as ``PodInfo``, nodes as
``NodeInfo`` and profiles through the ``QueueProfile`` protocol.
"""

from kopf_scheduler.backend.queue.backoff import (
    DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF,
    ORDERING_WINDOW,
    backoff_duration,
)
from kopf_scheduler.backend.queue.change_events import node_update_events, pod_update_events
from kopf_scheduler.backend.queue.nominator import Nominator
from kopf_scheduler.backend.queue.profile_events import QueueProfile, Strategy
from kopf_scheduler.backend.queue.scheduling_queue import (
    ACTIVE,
    BACKOFF,
    BACKOFF_FLUSH_PERIOD,
    DEFAULT_MAX_IN_UNSCHEDULABLE,
    GATED,
    IN_FLIGHT,
    UNSCHEDULABLE,
    UNSCHEDULABLE_FLUSH_PERIOD,
    SchedulingQueue,
)

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "BACKOFF_FLUSH_PERIOD",
    "DEFAULT_INITIAL_BACKOFF",
    "DEFAULT_MAX_BACKOFF",
    "DEFAULT_MAX_IN_UNSCHEDULABLE",
    "GATED",
    "IN_FLIGHT",
    "ORDERING_WINDOW",
    "UNSCHEDULABLE",
    "UNSCHEDULABLE_FLUSH_PERIOD",
    "Nominator",
    "QueueProfile",
    "SchedulingQueue",
    "Strategy",
    "backoff_duration",
    "node_update_events",
    "pod_update_events",
]
