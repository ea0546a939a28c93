"""The backoff queue: pods that must wait before their next attempt (kube-scheduler's ``backoffQ``).

Backoff after the n-th attempt is ``initial * 2**(n-1)`` capped at ``maximum`` (1 s and 10 s by default:
1, 2, 4, 8, 10, 10, ... s), counted from the pod's queue timestamp (the time of its last failure); a pod
never attempted owes no backoff. As in kube-scheduler v1.33+ (``SchedulerPopFromBackoffQ``, on by
default), expiries are truncated to 1-second ordering windows:

- a pod completes its backoff only once the clock has left the window its expiry falls in, so a whole
  window is flushed to the active queue at once, at the window boundary;
- pods rejected by plugins live in one heap ordered by window, then by the queue-sort order (so the
  scheduler may pop from it when the active queue is empty and still honour priority); pods that failed
  with an error live in a second heap ordered by window only, and are never popped early.

Invariants: a pod is in at most one of the two heaps; the heap a pod is in is decided on entry from its
failure kind; keys never change while a pod waits (they depend on the timestamp and attempts, which
change only when the pod leaves the queue).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from kopf_scheduler.backend.queue.heap import KeyedHeap
from kopf_scheduler.framework.pod_info import QueuedPodInfo

DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
#: the width of an ordering window, and the period of the flush to the active queue.
ORDERING_WINDOW = 1.0


def backoff_duration(
    attempts: int, initial: float = DEFAULT_INITIAL_BACKOFF, maximum: float = DEFAULT_MAX_BACKOFF
) -> float:
    """Seconds a pod waits after ``attempts`` scheduling attempts."""
    if attempts <= 0:
        return 0.0
    # Compare before shifting so that huge attempt counts cannot overflow into a float infinity.
    if attempts - 1 >= 63 or initial * (1 << (attempts - 1)) > maximum:
        return maximum
    return float(initial * (1 << (attempts - 1)))


def align_to_window(t: float, window: float = ORDERING_WINDOW) -> float:
    """The start of the ordering window ``t`` falls in."""
    return math.floor(t / window) * window


class BackoffQueue:
    """Two heaps of backing-off pods keyed by uid; see the module docstring for the ordering rules."""

    __slots__ = ("_errors", "_rejected", "active_key", "initial", "maximum", "windowed")

    def __init__(
        self,
        active_key: Callable[[QueuedPodInfo], Any],
        initial: float = DEFAULT_INITIAL_BACKOFF,
        maximum: float = DEFAULT_MAX_BACKOFF,
        windowed: bool = True,
    ) -> None:
        #: the active queue's sort key: breaks ties inside a window of the rejected-pods heap.
        self.active_key = active_key
        self.initial = initial
        self.maximum = maximum
        #: ordering windows and popping early come together in kube-scheduler (``SchedulerPopFromBackoffQ``).
        self.windowed = windowed
        self._rejected: KeyedHeap[QueuedPodInfo] = KeyedHeap()
        self._errors: KeyedHeap[QueuedPodInfo] = KeyedHeap()

    # -- timing ----------------------------------------------------------------------------------------
    def expiry(self, qp: QueuedPodInfo) -> float:
        """When the pod's backoff ends (aligned to its window when windows are on); -inf if none is owed."""
        if qp.attempts <= 0:
            return -math.inf
        maximum = self.maximum
        members = getattr(qp, "members", None)  # a pod group: its longest backoff grows with its size
        if members is not None and len(members) > 1:
            maximum *= math.sqrt(len(members))
        end = qp.timestamp + backoff_duration(qp.attempts, self.initial, maximum)
        return align_to_window(end) if self.windowed else end

    def is_backing_off(self, qp: QueuedPodInfo, now: float) -> bool:
        expiry = self.expiry(qp)
        if self.windowed:
            # Still backing off while the clock is inside (or before) the expiry's window.
            return expiry >= align_to_window(now)
        return expiry > now

    def completion_time(self, expiry: float) -> float:
        """The earliest clock reading at which a pod with this expiry counts as done."""
        return expiry + ORDERING_WINDOW if self.windowed else expiry

    def next_completion(self) -> float | None:
        """When the earliest waiting pod completes its backoff; None when nothing waits."""
        times = [self.completion_time(heap.peek_key()[0]) for heap in (self._rejected, self._errors) if heap]
        return min(times) if times else None

    # -- membership ------------------------------------------------------------------------------------
    @staticmethod
    def is_error(qp: QueuedPodInfo) -> bool:
        """Errors (and failures no plugin claimed) wait in the error heap, as kube-scheduler decides it."""
        return qp.last_failure_was_error or not (qp.unschedulable_plugins or qp.pending_plugins)

    def _key(self, qp: QueuedPodInfo) -> tuple[Any, ...]:
        return (self.expiry(qp), self.active_key(qp)) if self.windowed else (self.expiry(qp),)

    def add(self, qp: QueuedPodInfo) -> None:
        uid = qp.pod.uid
        if self.is_error(qp):
            self._rejected.remove(uid)
            self._errors.push(uid, (self.expiry(qp),), qp.sequence, qp)
        else:
            self._errors.remove(uid)
            self._rejected.push(uid, self._key(qp), qp.sequence, qp)

    def update(self, qp: QueuedPodInfo) -> None:
        """Re-positions a pod whose PodInfo changed in place (the queue-sort key may have changed)."""
        uid = qp.pod.uid
        if uid in self._rejected:
            self._rejected.push(uid, self._key(qp), qp.sequence, qp)

    def remove(self, uid: str) -> QueuedPodInfo | None:
        qp = self._rejected.remove(uid)
        return qp if qp is not None else self._errors.remove(uid)

    def get(self, uid: str) -> QueuedPodInfo | None:
        qp = self._rejected.get(uid)
        return qp if qp is not None else self._errors.get(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._rejected or uid in self._errors

    def __len__(self) -> int:
        return len(self._rejected) + len(self._errors)

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        yield from self._rejected
        yield from self._errors

    def rekey(self) -> None:
        """The active queue's ordering changed: re-sort the rejected-pods heap."""
        self._rejected.rekey(self._key)

    # -- leaving ---------------------------------------------------------------------------------------
    def pop_completed(self, now: float) -> list[QueuedPodInfo]:
        """Removes and returns every pod whose backoff is over, rejected pods first, each heap in order."""
        out: list[QueuedPodInfo] = []
        for heap in (self._rejected, self._errors):
            while heap:
                head = heap.peek()
                if head is None or self.is_backing_off(head, now):
                    break
                heap.pop()
                out.append(head)
        return out

    def pop_rejected(self) -> QueuedPodInfo | None:
        """The head of the rejected-pods heap, backoff over or not (popping when the active queue is empty).

        Pods that failed with an error are never taken early: their backoff protects the API server.
        """
        return self._rejected.pop()

    def has_rejected(self) -> bool:
        return bool(self._rejected)
