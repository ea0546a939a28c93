"""The scheduling queue: which pending pod the scheduler tries next, and when a rejected pod tries again.

kube-scheduler v1.37 semantics (``backend/queue/scheduling_queue.go``, queueing hints GA,
``SchedulerPopFromBackoffQ`` on; with ``generic_workload`` (``GenericWorkload``, off by default) a pod
group's members are queued as one entity, see ``pod_groups``):

- **activeQ**: a heap in queue-sort order (one QueueSort plugin for all profiles), ties by arrival
  sequence. New pods enter it after their profile's PreEnqueue plugins accept them.
- **backoffQ**: pods waiting out their backoff (see ``backoff``). When the active queue is empty, ``pop``
  takes the head of the rejected-pods heap even before its backoff is over; error pods always wait.
- **unschedulable pool**: pods rejected by plugins, waiting for an event those plugins registered whose
  hint says QUEUE; pods held back by a PreEnqueue plugin ("gated"). A pod that sat in the pool for 5
  minutes since its last attempt, or since its last such flush, is retried anyway (the leftover flush,
  every 30 s): a gated pod then runs PreEnqueue again, as on every wildcard event.
- **in flight**: popped pods whose attempt is not reported yet. Events that arrive meanwhile are kept and
  checked when the attempt fails, so a change that happened during the attempt is not lost.

Invariants: a pod is in at most one of activeQ, backoffQ, the pool and in flight; every pod entering
activeQ or backoffQ (except straight from backoffQ) has passed PreEnqueue; only ``pop`` increments
``attempts``; a pod deleted while in flight is never requeued by its failure report; ``pop`` and the
pushes are O(log n) and never scan a pool (events and the leftover flush scan the unschedulable pool,
as kube-scheduler does, except that an event all of whose matching registrations have keyed hints visits
only the members sharing a key with it: see ``profile_events.KeyedHint``).

The queue counts what the metrics read at scrape time: pods entering each queue by event (``incoming``),
sizes (``counts``), rejecting plugins (``rejectors``); PreEnqueue's duration goes to ``recorder``.

The queue is single-threaded (one asyncio loop): only ``pop`` and ``run`` await.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from kopf_scheduler.backend.queue.backoff import (
    DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF,
    ORDERING_WINDOW,
    BackoffQueue,
    align_to_window,
)
from kopf_scheduler.backend.queue.change_events import node_update_events, pod_update_events
from kopf_scheduler.backend.queue.heap import KeyedHeap, LessKey
from kopf_scheduler.backend.queue.in_flight import InFlight
from kopf_scheduler.backend.queue.incoming import (
    ACTIVE,
    BACKOFF,
    BACKOFF_COMPLETE,
    GATED,
    POP_FROM_BACKOFF_Q,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE,
    IncomingCounts,
)
from kopf_scheduler.backend.queue.nominator import Nominator
from kopf_scheduler.backend.queue.pod_groups import PodGroupQueue, QueuedPodGroupInfo
from kopf_scheduler.backend.queue.profile_events import (
    ProfileEvents,
    QueueProfile,
    Strategy,
    is_wildcard,
    requeue_strategy,
)
from kopf_scheduler.backend.queue.unschedulable_pool import UnschedulablePool
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_NODE_ADD,
    EVENT_NODE_DELETE,
    EVENT_TARGET_POD_UPDATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    ClusterEvent,
    Resource,
)
from kopf_scheduler.framework.interface import QueueSortPlugin
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.status import Code, Status

#: where a pod is (``location``) or went (``add_unschedulable_if_not_present``): ``ACTIVE``, ``BACKOFF``,
#: ``UNSCHEDULABLE``, ``GATED`` (the queues' metric labels) or in flight
IN_FLIGHT = "in_flight"

#: a rejected pod waits at most this long for an event (``DefaultPodMaxInUnschedulablePodsDuration``)
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0
#: period of the leftover flush (kube-scheduler runs it every 30 s)
UNSCHEDULABLE_FLUSH_PERIOD = 30.0
#: period of the backoff flush, aligned to the ordering windows
BACKOFF_FLUSH_PERIOD = ORDERING_WINDOW
#: the plugin name recorded when a PreEnqueue run fails without naming a plugin
PRE_ENQUEUE = "PreEnqueue"

FrameworkLookup = Callable[[str], QueueProfile | None]
PodCheck = Callable[[PodInfo], bool]


class SchedulingQueue(PodGroupQueue):
    """kube-scheduler's ``PriorityQueue`` and pod nominator (see the module docstring; pod groups, with
    ``generic_workload``, in ``pod_groups``)."""

    def __init__(
        self,
        queue_sort: QueueSortPlugin,
        framework_for: FrameworkLookup,
        clock: Clock | None = None,
        *,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
        pop_from_backoff: bool = True,
        recorder: Recorder | None = None,
        generic_workload: bool = False,
    ) -> None:
        self._init_pod_groups(generic_workload)
        self.clock: Clock = clock if clock is not None else RealClock()
        #: where PreEnqueue's duration is reported (the scheduler's recorder)
        self.recorder = recorder if recorder is not None else Recorder()
        #: pods entering each queue, by event, for the metrics
        self.incoming = IncomingCounts()
        self.max_in_unschedulable = max_in_unschedulable
        #: ``SchedulerPopFromBackoffQ``: pop from backoffQ when activeQ is empty, 1 s ordering windows,
        #: PreEnqueue on entering backoffQ rather than on leaving it
        self.pop_from_backoff = pop_from_backoff
        #: pods popped so far (upstream's ``SchedulingCycle``): opportunistic batching reuses a cycle's
        #: results only in the cycle right after it
        self.scheduling_cycle = 0
        self._framework_for = framework_for
        self._profiles: dict[str, ProfileEvents] = {}
        #: grows whenever ``_profiles`` changes: the pool's key index is then stale
        self._profiles_epoch = 0
        self._indexed_epoch = 0
        self._sequence = itertools.count(1)
        self._active: KeyedHeap[QueuedPodInfo] = KeyedHeap()
        self._set_sort(queue_sort)
        self._backoff = BackoffQueue(
            self._active_key, initial_backoff, max_backoff, windowed=pop_from_backoff
        )
        self._pool = UnschedulablePool(self._pool_keys)
        self._in_flight = InFlight()
        #: in-flight pods deleted from the cluster (or bound): their failure report is dropped
        self._gone_in_flight: set[str] = set()
        #: pods gated since they arrived: their SLI clock (``initial_timestamp``) starts once released
        self._never_active: set[str] = set()
        #: when the leftover flush last took each pod still in the pool (upstream's ``FlushTimestamp``),
        #: cleared by the pod's next attempt
        self._flushed_at: dict[str, float] = {}
        self.nominator = Nominator()
        self._waiters: list[asyncio.Future[None]] = []
        #: popped pods whose attempt goes on (``resume``), before any other pod
        self._resumed: collections.deque[QueuedPodInfo] = collections.deque()
        self._closed = False
        self._closed_event = asyncio.Event()

    # -- configuration ---------------------------------------------------------------------------------
    def set_queue_sort(self, plugin: QueueSortPlugin) -> None:
        """Switches the queue-sort plugin (a profile changed) and re-sorts activeQ and backoffQ."""
        self._set_sort(plugin)
        self._active.rekey(self._active_key)
        self._backoff.rekey()

    def set_framework_lookup(self, framework_for: FrameworkLookup) -> None:
        """Switches the profile lookup; registrations are re-read on next use."""
        self._framework_for = framework_for
        self._profiles.clear()
        self._profiles_epoch += 1

    def _set_sort(self, plugin: QueueSortPlugin) -> None:
        self._queue_sort = plugin
        self._less = plugin.less
        self._sort_key: Callable[[QueuedPodInfo], Any] | None = getattr(plugin, "sort_key", None)
        # A plugin that does not override ``sort_key`` has no fast key: compare with ``less``.
        declared = getattr(type(plugin), "sort_key", None)
        self._use_sort_key = callable(self._sort_key) and declared is not QueueSortPlugin.sort_key

    def _active_key(self, qp: QueuedPodInfo) -> Any:
        if self._use_sort_key and self._sort_key is not None:
            key = self._sort_key(qp)
            if key is not None:
                return key
            # Keys of both kinds cannot share a heap: once the plugin declines one, use ``less`` for all.
            self._use_sort_key = False
            self._active.rekey(self._active_key)
            self._backoff.rekey()
        return LessKey(qp, self._less)

    def _profile(self, scheduler_name: str) -> ProfileEvents | None:
        framework = self._framework_for(scheduler_name)
        cached = self._profiles.get(scheduler_name)
        if framework is None:
            if cached is not None:
                del self._profiles[scheduler_name]
                self._profiles_epoch += 1
            return None
        if cached is None or cached.framework is not framework:
            cached = self._profiles[scheduler_name] = ProfileEvents(framework)
            self._profiles_epoch += 1
        return cached

    def _pool_keys(self, qp: QueuedPodInfo) -> frozenset[Hashable] | None:
        profile = self._profile(qp.pod.scheduler_name)
        return None if profile is None or isinstance(qp, QueuedPodGroupInfo) else profile.pod_keys(qp)

    # -- new and changed pods --------------------------------------------------------------------------
    def add(self, pod: PodInfo) -> None:
        """A new pending pod: activeQ if its profile's PreEnqueue plugins accept it, else gated. Its
        nomination is recorded either way (upstream v1.37's ``addPod``)."""
        if self._member_added(pod):
            return
        if pod.uid in self or pod.uid in self._in_flight:
            self.update(None, pod)
            return
        self._add_new(pod)
        self._unscheduled_pod_added(pod)

    def _add_new(self, pod: PodInfo) -> None:
        qp = self._new_queued(pod)
        self.nominator.add(pod)
        if self._move_to_active(qp, EVENT_UNSCHEDULED_POD_ADD.label):
            self._wake()
        else:
            self._never_active.add(pod.uid)

    def update(self, old: PodInfo | None, new: PodInfo) -> None:
        """A pending pod changed (``old``: the previous version, when known).

        In activeQ or backoffQ it is updated in place. In the pool, the update is classified into
        ``TargetPod`` update events and checked against the rejecting (or gating) plugins' hints, which
        may move it. In flight, the events are kept for its failure report. Unknown, it is added.
        """
        uid = new.uid
        if uid in self._gone_in_flight or self._member_updated(old, new):
            return
        if uid in self._in_flight:
            before = old if old is not None else self._in_flight.latest(uid)
            events = (
                pod_update_events(before, new, Resource.TARGET_POD)
                if before is not None
                else [EVENT_TARGET_POD_UPDATE]
            )
            self._in_flight.record_for(uid, events, before, new)
            self._in_flight.set_latest(new)
            self._nominated_node_changed(before, new)
            return
        qp = self._active.get(uid)
        if qp is not None:
            before = old if old is not None else qp.pod
            qp.pod = new
            self._active.push(uid, self._active_key(qp), qp.sequence, qp)
            self.nominator.update(before, new)
            self._nominated_node_changed(before, new)
            return
        qp = self._backoff.get(uid)
        if qp is not None:
            before = old if old is not None else qp.pod
            qp.pod = new
            self._backoff.update(qp)
            self.nominator.update(before, new)
            self._nominated_node_changed(before, new)
            return
        qp = self._pool.get(uid)
        if qp is not None:
            before = old if old is not None else qp.pod
            qp.pod = new
            self._pool.add(qp)  # re-stored: its keys follow the new version
            self.nominator.update(before, new)
            profile = self._profile(new.scheduler_name)
            for event in pod_update_events(before, new, Resource.TARGET_POD):
                strategy = requeue_strategy(profile, qp, event, before, new)
                if self._requeue(qp, strategy, event.label) in (ACTIVE, BACKOFF):
                    break
            self._nominated_node_changed(before, new)
            return
        self._add_new(new)
        self._unscheduled_pod_added(new)
        self._nominated_node_changed(old, new)

    def delete(self, pod: PodInfo, *, bound: bool = False) -> None:
        """A pending pod left: deleted from the cluster, or (``bound``) bound to a node.

        It is removed from every pool and from the nominator; if it is in flight, its failure report
        will be dropped. A deleted pod that held a nomination frees room on that node for pods of equal
        or lower priority, which are re-evaluated as after an assigned pod's deletion.
        """
        uid = pod.uid
        self.nominator.delete(uid)
        self._never_active.discard(uid)
        self._flushed_at.pop(uid, None)
        member = self._member_deleted(pod)
        if not member and self._active.remove(uid) is None and self._backoff.remove(uid) is None:
            self._pool.remove(uid)
        if uid in self._in_flight:
            self._gone_in_flight.add(uid)
        if not bound and pod.nominated_node_name:
            self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None, _at_most_priority(pod))

    def activate(self, pods: Iterable[PodInfo]) -> None:
        """Moves the given pods from backoffQ or the pool to activeQ (PreEnqueue still applies).

        A pod in flight gets a forced-activation event instead, so it is retried at once if it fails.
        """
        woken = False
        for pod in pods:
            uid = self._entity_uid(pod)
            qp = self._pool.get(uid)
            from_backoff = False
            if qp is None:
                qp = self._backoff.remove(uid)
                if qp is None:
                    self._in_flight.record_for(pod.uid, [EVENT_FORCE_ACTIVATE], None, pod)
                    continue
                from_backoff = True
            run_pre_enqueue = not (from_backoff and self.pop_from_backoff)
            if self._move_to_active(qp, EVENT_FORCE_ACTIVATE.label, run_pre_enqueue=run_pre_enqueue):
                woken = True
        if woken:
            self._wake()

    # -- the scheduling loop's side --------------------------------------------------------------------
    def pop_nowait(self) -> QueuedPodInfo | None:
        """The next pod to try, or None when there is none (resumed attempts, activeQ, then backoffQ's
        rejected pods)."""
        while self._resumed:
            resumed = self._resumed.popleft()
            if resumed.pod.uid in self._in_flight:  # its attempt did not end meanwhile (a close)
                return resumed
        while True:
            qp = self._active.pop()
            if qp is None and self.pop_from_backoff:
                qp = self._backoff.pop_rejected()
                if qp is not None:
                    self.incoming.record(ACTIVE, POP_FROM_BACKOFF_Q, None, *self._sized(qp))
            if qp is None:
                return None
            if qp.pod.uid in self._in_flight:
                continue  # tracked twice: keep the attempt in progress, drop this copy
            qp.attempts += 1
            self.scheduling_cycle += 1
            # A new attempt: the previous verdicts no longer explain why the pod waits.
            qp.unschedulable_plugins = set()
            qp.pending_plugins = set()
            qp.last_failure_was_error = False
            if isinstance(qp, QueuedPodGroupInfo):
                return self._group_popped(qp)
            self._in_flight.start(qp.pod)
            return qp

    async def pop(self) -> QueuedPodInfo | None:
        """Waits for the next pod to try; None once the queue is closed and nothing is left."""
        while True:
            qp = self.pop_nowait()
            if qp is not None:
                return qp
            if self._closed:
                return None
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                # Cancelled while waiting: forget the future (a wake-up already dropped the list).
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def resume(self, qp: QueuedPodInfo) -> None:
        """A popped pod whose attempt was put aside (waiting on an extender's answer) is handed out again
        by ``pop`` before any other, as the same attempt (still in flight). Dropped if its attempt ended
        meanwhile (the pod was deleted, the queue closed)."""
        if qp.pod.uid in self._in_flight:
            self._resumed.append(qp)
            self._wake()

    def done(self, uid: str) -> None:
        """The attempt of a popped pod is over (its failure, if any, was reported before)."""
        self._in_flight.done(uid)
        self._gone_in_flight.discard(uid)

    def add_unschedulable_if_not_present(self, qp: QueuedPodInfo) -> str | None:
        """Requeues a pod whose attempt failed; returns where it went (None: dropped or already queued).

        ``qp.unschedulable_plugins``/``pending_plugins`` name the rejecting plugins; an error
        (``last_failure_was_error``, or no plugin recorded) goes through backoff without waiting for an
        event. Otherwise the events seen while the pod was in flight are checked against the rejecting
        plugins' hints: QUEUE requeues it now (backoffQ if still backing off, activeQ if a Pending plugin
        said so or backoff is over), else it waits in the pool. Ends the attempt (``done``).
        """
        group = self._member_key(qp.pod)
        if group is not None:
            return self._member_failed(group, qp)
        uid = qp.pod.uid
        try:
            if uid in self._gone_in_flight or uid in self:
                return None
            latest = self._in_flight.latest(uid)
            if latest is not None:
                qp.pod = latest
            qp.timestamp = self.clock.now()
            self._flushed_at.pop(uid, None)
            qp.was_flushed = False
            if qp.last_failure_was_error or not (qp.unschedulable_plugins or qp.pending_plugins):
                strategy = Strategy.AFTER_BACKOFF
            else:
                strategy = self._in_flight_strategy(qp)
            return self._requeue(qp, strategy, SCHEDULE_ATTEMPT_FAILURE)
        finally:
            self.done(uid)

    def _in_flight_strategy(self, qp: QueuedPodInfo) -> Strategy:
        recorded = self._in_flight.events_for(qp.pod.uid)
        if recorded is None:  # not popped from this queue: retry rather than strand it
            return Strategy.AFTER_BACKOFF
        profile = self._profile(qp.pod.scheduler_name)
        result = Strategy.SKIP
        for event, old, new in recorded:
            strategy = requeue_strategy(profile, qp, event, old, new)
            if strategy is Strategy.IMMEDIATELY:
                return strategy
            if strategy is Strategy.AFTER_BACKOFF:
                result = strategy
                if not qp.pending_plugins:  # only a Pending plugin could still make it IMMEDIATELY
                    return result
        return result

    # -- cluster events --------------------------------------------------------------------------------
    def move_all_to_active_or_backoff(
        self, event: ClusterEvent, old: Any = None, new: Any = None, pre_check: PodCheck | None = None
    ) -> None:
        """Re-evaluates the pool's pods for ``event`` (``old``/``new``: the objects hints receive).

        Only pods passing ``pre_check`` (when given) are considered; a gated pod only for wildcard events
        and events its gating plugin registered. The event is also kept for the pods in flight.
        """
        if not (self._pool or self._in_flight) or not self._interested(event):
            return
        pods = self._candidates(event, old, new) if self._pool else []
        if pre_check is not None:
            pods = [qp for qp in pods if pre_check(qp.pod)]
        self._move_pods(pods, event, old, new)

    def _unscheduled_pod_added(self, pod: PodInfo) -> None:
        """A new pending pod may complete a gang waiting for its members (kube-scheduler v1.37 sends
        ``UnscheduledPodAdd`` only with GenericWorkload on, for its GangScheduling plugin; here it goes
        to the pool whenever a plugin of a known profile registered it, as Coscheduling does)."""
        if not self._pool or not any(
            profile.registered(EVENT_UNSCHEDULED_POD_ADD) for profile in self._profiles.values()
        ):
            return
        uid = pod.uid
        self.move_all_to_active_or_backoff(
            EVENT_UNSCHEDULED_POD_ADD, None, pod, lambda other: other.uid != uid
        )

    def node_added(self, node: NodeInfo) -> None:
        self.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)

    def node_updated(self, old: NodeInfo, new: NodeInfo) -> None:
        """A node changed; ``old`` is its state before the change (a distinct object)."""
        for event in node_update_events(old, new):
            self.move_all_to_active_or_backoff(event, old, new)

    def node_deleted(self, node: NodeInfo) -> None:
        # kube-scheduler emits Node/Delete since v1.32 (PodTopologySpread's domains may shrink).
        self.move_all_to_active_or_backoff(EVENT_NODE_DELETE, node, None)

    def assigned_pod_added(self, pod: PodInfo) -> None:
        self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: PodInfo, new: PodInfo) -> None:
        for event in pod_update_events(old, new, Resource.ASSIGNED_POD):
            self.move_all_to_active_or_backoff(event, old, new)

    def assigned_pod_deleted(self, pod: PodInfo) -> None:
        self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)

    def _interested(self, event: ClusterEvent) -> bool:
        """Whether any known profile registered something ``event`` matches (wildcards always are)."""
        if is_wildcard(event):
            return True
        for name in list(self._profiles):
            profile = self._profile(name)
            if profile is not None and profile.interested(event):
                return True
        return False

    def _candidates(self, event: ClusterEvent, old: Any, new: Any) -> list[QueuedPodInfo]:
        """The pool members ``event`` may move: those sharing a key with it (and those without keys) when
        every profile's registrations it matches have keyed hints, else every member."""
        if is_wildcard(event):
            return self._pool.snapshot()
        if self._indexed_epoch != self._profiles_epoch:
            self._pool.reindex()
            self._indexed_epoch = self._profiles_epoch
        keys: set[Hashable] = set()
        for name in list(self._profiles):
            profile = self._profile(name)
            if profile is None:
                continue
            more = profile.event_keys(event, old, new)
            if more is None:
                return self._pool.snapshot()
            keys.update(more)
        if self._indexed_epoch != self._profiles_epoch:  # a profile changed under the index just now
            return self._pool.snapshot()
        return self._pool.candidates(keys)

    def _move_pods(self, pods: list[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any) -> None:
        woken = False
        profiles: dict[str, ProfileEvents | None] = {}
        for qp in pods:
            name = qp.pod.scheduler_name
            if name in profiles:
                profile = profiles[name]
            else:
                profile = profiles[name] = self._profile(name)
            # Wildcard events (the leftover flush, forced activation) re-run a gated pod's PreEnqueue,
            # so that a pod is not stuck behind an incomplete or wrong registration (upstream v1.37).
            if (
                qp.gated_by
                and not is_wildcard(event)
                and (profile is None or not profile.gating_matches(qp.gated_by, event))
            ):
                continue
            strategy = self._entity_strategy(profile, qp, event, old, new)
            if strategy is Strategy.SKIP:
                continue
            self._pool.remove(qp.pod.uid)
            destination = self._requeue(qp, strategy, event.label, wake=False)
            woken = woken or destination == ACTIVE or (destination == BACKOFF and self.pop_from_backoff)
        self._in_flight.record(event, old, new)
        if woken:
            self._wake()

    # -- periodic flushes ------------------------------------------------------------------------------
    def flush_backoff_completed(self) -> int:
        """Moves pods whose backoff is over to activeQ; returns how many (runs every second)."""
        moved = 0
        for qp in self._backoff.pop_completed(self.clock.now()):
            # With pop-from-backoff, PreEnqueue ran when the pod entered backoffQ.
            if self._move_to_active(qp, BACKOFF_COMPLETE, run_pre_enqueue=not self.pop_from_backoff):
                moved += 1
        if moved:
            self._wake()
        return moved

    def flush_unschedulable_leftover(self) -> int:
        """Retries pods that sat in the pool over ``max_in_unschedulable`` since their last attempt or
        their last flush, whichever is later (gated pods included); returns how many left the pool."""
        now = self.clock.now()
        limit = self.max_in_unschedulable
        flushed_at = self._flushed_at
        stale = [
            qp
            for qp in self._pool
            if now - max(qp.timestamp, flushed_at.get(qp.pod.uid, qp.timestamp)) > limit
        ]
        if not stale:
            return 0
        for qp in stale:
            flushed_at[qp.pod.uid] = now
            qp.was_flushed = True
        before = len(self._pool)
        self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
        return before - len(self._pool)

    def flush_due(self) -> int:
        """Both flushes once (for simulations that drive the clock themselves)."""
        return self.flush_backoff_completed() + self.flush_unschedulable_leftover()

    def next_backoff_expiry(self) -> float | None:
        """The clock reading at which ``flush_backoff_completed`` will next move a pod; None if none waits.

        With ordering windows this is the end of the earliest expiry's window.
        """
        return self._backoff.next_completion()

    async def run(self) -> None:
        """Runs the backoff flush (every second, aligned to the windows) and the leftover flush (every
        30 s) on the queue's clock until ``close``."""
        if self._closed:
            return
        tasks = [asyncio.create_task(self._backoff_loop()), asyncio.create_task(self._leftover_loop())]
        try:
            await self._closed_event.wait()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _backoff_loop(self) -> None:
        clock = self.clock
        period = BACKOFF_FLUSH_PERIOD
        tick = self._next_tick(clock.now())
        while not self._closed:
            await clock.sleep(tick - clock.now())
            if self._closed:
                return
            self.flush_backoff_completed()
            tick += period
            now = clock.now()
            if tick <= now:  # the clock jumped past ticks: resume at the next boundary, like a ticker
                tick = self._next_tick(now)

    def _next_tick(self, now: float) -> float:
        # Flushing right at window boundaries moves whole windows without added latency.
        if self.pop_from_backoff:
            return align_to_window(now + BACKOFF_FLUSH_PERIOD)
        return now + BACKOFF_FLUSH_PERIOD

    async def _leftover_loop(self) -> None:
        while not self._closed:
            self.flush_unschedulable_leftover()
            await self.clock.sleep(UNSCHEDULABLE_FLUSH_PERIOD)

    def close(self) -> None:
        """Stops ``run`` and wakes ``pop`` waiters (they get None once nothing is left)."""
        self._closed = True
        self._in_flight.clear()
        self._closed_event.set()
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- nominator (the framework's PodNominator) ------------------------------------------------------
    def add_nominated_pod(self, pod: PodInfo, node_name: str | None = None) -> None:
        """Nominates ``pod`` to ``node_name`` (None: its ``status.nominatedNodeName``; "": clears)."""
        self.nominator.add(pod, node_name)

    def delete_nominated_pod_if_exists(self, pod: PodInfo) -> None:
        self.nominator.delete(pod.uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.nominator.pods_on(node_name)

    def nominated_node_of(self, pod: PodInfo) -> str:
        return self.nominator.node_of(pod.uid) or pod.nominated_node_name

    def nominated_node_names(self) -> frozenset[str]:
        """Nodes that have nominated pods (filters must account for them there)."""
        return self.nominator.node_names()

    # -- introspection ---------------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Pending pods by queue, as ``scheduler_pending_pods`` labels them (the first four, every one a
        single pod, are also ``scheduler_queued_entities``). kube-scheduler v1.37 also counts pod-group
        members waiting for their PodGroup (``incomplete``) or for their group's attempt to end
        (``pending``): none without GenericWorkload (off), but the series exist."""
        gated = self._pool.gated_count
        incomplete, pending = self._group_counts()
        if self.pod_groups_enabled:  # a pod group's members are pods of its entity's queue
            return {**self._pod_counts(), "incomplete": incomplete, "pending": pending}
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._pool) - gated,
            GATED: gated,
            "incomplete": incomplete,
            "pending": pending,
        }

    def rejectors(self) -> dict[tuple[str, str], int]:
        """(plugin, profile) -> the waiting pods that plugin rejected in their last attempt, or gated
        (``scheduler_unschedulable_pods``): upstream counts a pod's rejecting plugins from its failure (or
        its gating) until it is popped or deleted."""
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for qp in self.pending():
            if qp.unschedulable_plugins or qp.pending_plugins:
                profile = qp.pod.scheduler_name
                for plugin in qp.unschedulable_plugins | qp.pending_plugins:
                    counts[(plugin, profile)] += 1
        return counts

    def __contains__(self, uid: object) -> bool:
        """Whether the pod waits in the queue (activeQ, backoffQ or the pool; not in flight), also as a
        pod group's member (in its entity, or waiting for its PodGroup or its group's attempt)."""
        if uid in self._active or uid in self._backoff or uid in self._pool:
            return True
        return (
            self.pod_groups_enabled and isinstance(uid, str) and self._member_location_by_uid(uid) is not None
        )

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._pool)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._active.get(uid) or self._backoff.get(uid) or self._pool.get(uid)

    def location(self, uid: str) -> str | None:
        """Where the pod is: ``active``, ``backoff``, ``unschedulable``, ``gated``, ``in_flight`` or None."""
        member = self._member_location_by_uid(uid)
        if member is not None:
            return member
        if uid in self._active:
            return ACTIVE
        if uid in self._backoff:
            return BACKOFF
        qp = self._pool.get(uid)
        if qp is not None:
            return GATED if qp.gated_by else UNSCHEDULABLE
        if uid in self._in_flight:
            return IN_FLIGHT
        return None

    def pending(self) -> list[QueuedPodInfo]:
        """Every waiting pod: activeQ, backoffQ, then the pool (in no particular order within each); then
        pod group members waiting outside their group's entity."""
        return self._expand([*self._active, *self._backoff, *self._pool])

    def in_flight(self) -> list[str]:
        """Uids of the pods popped and not done yet, oldest first."""
        return self._in_flight.uids()

    # -- moving pods between pools ---------------------------------------------------------------------
    def _new_queued(self, pod: PodInfo) -> QueuedPodInfo:
        now = self.clock.now()
        return QueuedPodInfo(pod=pod, timestamp=now, initial_timestamp=now, sequence=next(self._sequence))

    def _run_pre_enqueue(self, qp: QueuedPodInfo) -> None:
        """Runs the pod's PreEnqueue plugins; a rejection gates it and counts its plugin as a rejector."""
        if isinstance(qp, QueuedPodGroupInfo):
            self._run_group_pre_enqueue(qp)
            return
        profile = self._profile(qp.pod.scheduler_name)
        if profile is None:  # not a profile of ours: the caller decides; nothing gates it here
            qp.gated_by = ""
            return
        started = time.perf_counter()
        try:
            status = profile.framework.run_pre_enqueue(qp.pod)
        except Exception as e:  # a framework should report failures as statuses; do not lose the pod
            status = Status(Code.ERROR, (str(e),))
        # upstream's runPreEnqueuePluginsForPod reports its outer status, which nothing assigns: Success
        self.recorder.observe(PRE_ENQUEUE, None, qp.pod.scheduler_name, started)
        if status is None or status.is_success:
            qp.gated_by = ""
            return
        plugin = status.plugin or PRE_ENQUEUE
        qp.gated_by = plugin
        qp.unschedulable_plugins.add(plugin)

    def _move_to_active(
        self, qp: QueuedPodInfo, event: str, strategy: Strategy | None = None, *, run_pre_enqueue: bool = True
    ) -> bool:
        """activeQ, unless PreEnqueue gates the pod (then the pool). True when it reached activeQ.
        ``event`` and ``strategy`` (the one it is requeued with, if any) are what the metrics count."""
        if run_pre_enqueue:
            self._run_pre_enqueue(qp)
        uid = qp.pod.uid
        if qp.gated_by:
            qp.was_flushed = False
            if uid not in self._active and uid not in self._backoff:
                self._to_pool(qp, event, strategy)
            return False
        self._pool.remove(uid)
        self._backoff.remove(uid)
        if self._never_active and uid in self._never_active:
            # Time spent gated is not scheduling latency (kube-scheduler starts the SLI clock here).
            self._never_active.discard(uid)
            qp.initial_timestamp = self.clock.now()
        self._active.push(uid, self._active_key(qp), qp.sequence, qp)
        incoming = self.incoming
        incoming.record(ACTIVE, event, strategy, *self._sized(qp))
        self._entered(qp).add(ACTIVE)
        return True

    def _move_to_backoff(self, qp: QueuedPodInfo, event: str, strategy: Strategy) -> bool:
        """backoffQ, unless PreEnqueue gates the pod (then the pool). True when it reached backoffQ."""
        if self.pop_from_backoff:
            # Pods popped straight from backoffQ skip PreEnqueue, so it runs on the way in.
            self._run_pre_enqueue(qp)
            if qp.gated_by:
                qp.was_flushed = False
                self._to_pool(qp, event, strategy)
                return False
        self._pool.remove(qp.pod.uid)
        self._backoff.add(qp)
        incoming = self.incoming
        incoming.record(BACKOFF, event, strategy, *self._sized(qp))
        self._entered(qp).add(BACKOFF)
        return True

    def _to_pool(self, qp: QueuedPodInfo, event: str, strategy: Strategy | None) -> None:
        """Stores the pod in the unschedulable pool; one not there before counts as entering it."""
        incoming = self.incoming
        if qp.pod.uid not in self._pool:
            incoming.record(UNSCHEDULABLE, event, strategy, *self._sized(qp))
        self._entered(qp).add(GATED if qp.gated_by else UNSCHEDULABLE)
        self._pool.add(qp)

    def _requeue(self, qp: QueuedPodInfo, strategy: Strategy, event: str, *, wake: bool = True) -> str:
        """Sends a rejected pod where ``strategy`` says because of ``event`` (its label); returns where it
        went."""
        if strategy is Strategy.SKIP:
            self._to_pool(qp, event, strategy)
            return GATED if qp.gated_by else UNSCHEDULABLE
        if strategy is Strategy.AFTER_BACKOFF and self._backoff.is_backing_off(qp, self.clock.now()):
            if not self._move_to_backoff(qp, event, strategy):
                return GATED
            if wake and self.pop_from_backoff and self._backoff.has_rejected():
                self._wake()
            return BACKOFF
        if not self._move_to_active(qp, event, strategy):
            return GATED
        if wake:
            self._wake()
        return ACTIVE

    def _nominated_node_changed(self, old: PodInfo | None, new: PodInfo) -> None:
        # A nomination that moved frees its old node for pods of equal or lower priority.
        if old is not None and old.nominated_node_name and old.nominated_node_name != new.nominated_node_name:
            self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, old, None, _at_most_priority(old))

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _at_most_priority(pod: PodInfo) -> PodCheck:
    priority = pod.priority
    return lambda other: other.priority <= priority
