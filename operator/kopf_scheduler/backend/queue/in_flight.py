"""Pods in flight (popped, attempt not yet reported) and the cluster events seen meanwhile.

When an attempt fails, only events that arrived after the pod was popped may have changed the verdict,
so each in-flight pod remembers the position of the event log when it was popped; its events are the
tail of the log from there (kube-scheduler keeps the same interleaving in ``inFlightEvents``).

Invariants: events are kept only while some pod is in flight, and only from the oldest in-flight pod's
position on (pods start in pop order, so the first in ``_start`` is the oldest); ``latest`` holds the
newest version of an in-flight pod seen through updates, so a failed pod is requeued as it is now.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, NamedTuple

from kopf_scheduler.framework.events import ClusterEvent
from kopf_scheduler.framework.pod_info import PodInfo

#: trimming the log's head costs a copy; do it in batches
_TRIM_BATCH = 1024


class RecordedEvent(NamedTuple):
    event: ClusterEvent
    old: Any
    new: Any


class InFlight:
    __slots__ = ("_base", "_events", "_latest", "_start")

    def __init__(self) -> None:
        #: uid -> log position when popped, oldest first
        self._start: OrderedDict[str, int] = OrderedDict()
        self._latest: dict[str, PodInfo] = {}
        self._events: list[RecordedEvent] = []
        #: log position of ``_events[0]``
        self._base = 0

    def __contains__(self, uid: object) -> bool:
        return uid in self._start

    def __len__(self) -> int:
        return len(self._start)

    def uids(self) -> list[str]:
        return list(self._start)

    def start(self, pod: PodInfo) -> None:
        self._start[pod.uid] = self._base + len(self._events)
        self._latest[pod.uid] = pod

    def latest(self, uid: str) -> PodInfo | None:
        return self._latest.get(uid)

    def record(self, event: ClusterEvent, old: Any, new: Any) -> bool:
        """Logs an event for the pods in flight; False (and nothing logged) when none is."""
        if not self._start:
            return False
        self._events.append(RecordedEvent(event, old, new))
        return True

    def record_for(self, uid: str, events: list[ClusterEvent], old: Any, new: Any) -> bool:
        """Logs events about one pod if that pod is in flight; False (and nothing logged) when it is not."""
        if uid not in self._start:
            return False
        self._events.extend(RecordedEvent(event, old, new) for event in events)
        return True

    def set_latest(self, pod: PodInfo) -> None:
        """Remembers a newer version of an in-flight pod (the one to requeue if the attempt fails)."""
        if pod.uid in self._start:
            self._latest[pod.uid] = pod

    def events_for(self, uid: str) -> list[RecordedEvent] | None:
        """The events logged since ``uid`` was popped; None when it is not in flight."""
        position = self._start.get(uid)
        if position is None:
            return None
        return self._events[position - self._base :]

    def done(self, uid: str) -> bool:
        if self._start.pop(uid, None) is None:
            return False
        del self._latest[uid]
        if not self._start:
            self._base += len(self._events)
            self._events.clear()
            return True
        oldest = next(iter(self._start.values()))
        stale = oldest - self._base
        if stale >= _TRIM_BATCH or stale > len(self._events) // 2:
            del self._events[:stale]
            self._base = oldest
        return True

    def clear(self) -> None:
        for uid in list(self._start):
            self.done(uid)
