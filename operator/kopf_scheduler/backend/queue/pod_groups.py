"""Pod groups as queue entities (kube-scheduler v1.37.2 with ``GenericWorkload`` on, CompositePodGroups off):
``backend/queue/scheduling_queue.go``'s pod group half, ``pod_group_member_pods.go`` and the PodGroup part of
``workload_forest.go``.

A pod naming a PodGroup (``spec.schedulingGroup.podGroupName``) is not queued on its own. It is:

- **incomplete** while its PodGroup has not been seen (no event, no condition: it just waits);
- a **member** of its group's one queue entity (``QueuedPodGroupInfo``) otherwise: the entity moves through
  activeQ, backoffQ and the unschedulable pool like a pod and is popped with all its members, which the pod
  group scheduling cycle then tries together;
- **pending** when it arrives (or fails) while its group's entity is in flight: it joins the group again
  when the attempt is reported (``add_attempted_pod_group_if_needed``).

The entity sorts by the PodGroup's ``spec.priority`` (0 when unset) and its own queue timestamp, which the
first member gives it. Its own rejecting plugins stay empty, as upstream never sets them: a rejected group
waits out its whole backoff with the errors (never popped early from backoffQ), its longest backoff the
queue's times the square root of its size; a success starts its count again. PreEnqueue runs for every
member, and one gated member gates the whole entity. An event moves the entity when it would move any
member (the strongest strategy wins). Members are kept in upstream's order: priority (descending), attempts
(descending), queue timestamp, name.

The entity is stored in the queue's heaps and pool under ``podgroup/<namespace>/<name>`` (its ``pod`` is a
stand-in carrying that uid, the PodGroup's priority and the first member's scheduler name); members are
looked up through their group. The invariants of the module docstring of ``scheduling_queue`` hold for
entities, and a member is in exactly one of: incomplete, pending, an entity, in flight.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kopf_scheduler.backend.queue.change_events import pod_update_events
from kopf_scheduler.backend.queue.incoming import (
    ACTIVE,
    BACKOFF,
    GATED,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE,
)
from kopf_scheduler.backend.queue.profile_events import ProfileEvents, Strategy, requeue_strategy
from kopf_scheduler.framework.events import EVENT_UNSCHEDULED_POD_ADD, ClusterEvent, Resource
from kopf_scheduler.framework.objects.workload_pod_groups import WorkloadPodGroup, scheduling_group
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.status import Code, Status

if TYPE_CHECKING:
    from kopf_scheduler.backend.queue.backoff import BackoffQueue
    from kopf_scheduler.backend.queue.heap import KeyedHeap
    from kopf_scheduler.backend.queue.in_flight import InFlight
    from kopf_scheduler.backend.queue.incoming import IncomingCounts
    from kopf_scheduler.backend.queue.nominator import Nominator
    from kopf_scheduler.backend.queue.unschedulable_pool import UnschedulablePool
    from kopf_scheduler.framework.clock import Clock

#: where a member waits outside an entity (``location``; also the ``counts`` keys upstream's metric uses)
INCOMPLETE = "incomplete"
PENDING = "pending"
#: the ``type`` label of ``scheduler_queued_entities``
POD_TYPE = "pod"
POD_GROUP_TYPE = "podgroup"

GroupKey = tuple[str, str]


def entity_uid(namespace: str, name: str) -> str:
    """The key a group's entity is stored under (upstream's ``fwk.PodGroupKey(...).String()``)."""
    return f"podgroup/{namespace}/{name}"


def _member_order(qp: QueuedPodInfo) -> tuple[int, int, float, str]:
    """``PodGroupMemberPodsOrderingFunc``."""
    return (-qp.pod.priority, -qp.attempts, qp.timestamp, qp.pod.name)


def _stand_in(namespace: str, name: str, priority: int, scheduler_name: str) -> PodInfo:
    return PodInfo(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": entity_uid(namespace, name)},
            "spec": {"priority": priority, "schedulerName": scheduler_name},
        }
    )


@dataclass(slots=True, eq=False)
class QueuedPodGroupInfo(QueuedPodInfo):
    """One PodGroup's queued members as one queue entity (upstream's ``QueuedPodGroupInfo``). ``pod`` is
    the stand-in described in the module docstring; ``attempts``, ``timestamp`` and the rest are the
    entity's own."""

    group: WorkloadPodGroup | None = None
    #: the members, in upstream's order (see the module docstring)
    members: list[QueuedPodInfo] = field(default_factory=list)

    @classmethod
    def for_group(cls, group: WorkloadPodGroup, first: QueuedPodInfo, sequence: int) -> QueuedPodGroupInfo:
        priority = group.priority or 0
        pod = _stand_in(group.namespace, group.name, priority, first.pod.scheduler_name)
        entity = cls(
            pod=pod,
            timestamp=first.timestamp,
            initial_timestamp=first.initial_timestamp,
            sequence=sequence,
            group=group,
        )
        entity.add_member(first)
        return entity

    @property
    def group_key(self) -> GroupKey:
        return (self.pod.namespace, self.pod.name)

    def set_group(self, group: WorkloadPodGroup) -> None:
        self.group = group
        priority = group.priority or 0
        if priority != self.pod.priority:
            self.pod = _stand_in(group.namespace, group.name, priority, self.pod.scheduler_name)

    def add_member(self, qp: QueuedPodInfo) -> None:
        keys = [_member_order(m) for m in self.members]
        self.members.insert(bisect.bisect_left(keys, _member_order(qp)), qp)

    def remove_member(self, uid: str) -> QueuedPodInfo | None:
        for i, member in enumerate(self.members):
            if member.pod.uid == uid:
                return self.members.pop(i)
        return None

    def member(self, uid: str) -> QueuedPodInfo | None:
        return next((m for m in self.members if m.pod.uid == uid), None)

    def unscheduled_pods(self) -> list[PodInfo]:
        """The members' pods in order (upstream's ``UnscheduledPods`` of the leaf group)."""
        return [m.pod for m in self.members]


class MemberPods:
    """Members waiting outside an entity, by group then uid (upstream's ``podGroupMemberPods``)."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[GroupKey, dict[str, QueuedPodInfo]] = {}

    def add(self, key: GroupKey, qp: QueuedPodInfo) -> None:
        self._groups.setdefault(key, {})[qp.pod.uid] = qp

    def get(self, key: GroupKey, uid: str) -> QueuedPodInfo | None:
        return self._groups.get(key, {}).get(uid)

    def delete(self, key: GroupKey, uid: str) -> QueuedPodInfo | None:
        pods = self._groups.get(key)
        if pods is None:
            return None
        qp = pods.pop(uid, None)
        if not pods:
            del self._groups[key]
        return qp

    def clear(self, key: GroupKey) -> list[QueuedPodInfo]:
        return list(self._groups.pop(key, {}).values())

    def __len__(self) -> int:
        return sum(len(pods) for pods in self._groups.values())

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        for pods in self._groups.values():
            yield from pods.values()


def _group_key(pod: PodInfo) -> GroupKey | None:
    name = scheduling_group(pod)
    return None if name is None else (pod.namespace, name)


class PodGroupQueue:
    """The pod group half of ``SchedulingQueue`` (a base class of it): inert unless ``generic_workload``
    was given to the queue. The queue calls the ``_member_*`` hooks first in its pod paths; each returns
    False (nothing done) for a pod that is not a member or with the gate off."""

    if TYPE_CHECKING:
        clock: Clock
        incoming: IncomingCounts
        nominator: Nominator
        scheduling_cycle: int
        pop_from_backoff: bool
        _active: KeyedHeap[QueuedPodInfo]
        _backoff: BackoffQueue
        _pool: UnschedulablePool
        _in_flight: InFlight
        _gone_in_flight: set[str]
        _flushed_at: dict[str, float]
        _sequence: Iterator[int]

        def _new_queued(self, pod: PodInfo) -> QueuedPodInfo: ...
        def _profile(self, scheduler_name: str) -> ProfileEvents | None: ...
        def _run_pre_enqueue(self, qp: QueuedPodInfo) -> None: ...
        def _move_to_active(
            self,
            qp: QueuedPodInfo,
            event: str,
            strategy: Strategy | None = None,
            *,
            run_pre_enqueue: bool = True,
        ) -> bool: ...
        def _move_to_backoff(self, qp: QueuedPodInfo, event: str, strategy: Strategy) -> bool: ...
        def _requeue(
            self, qp: QueuedPodInfo, strategy: Strategy, event: str, *, wake: bool = True
        ) -> str: ...
        def _wake(self) -> None: ...
        def _unscheduled_pod_added(self, pod: PodInfo) -> None: ...
        def done(self, uid: str) -> None: ...

    def _init_pod_groups(self, enabled: bool) -> None:
        #: ``GenericWorkload``: members are queued through their groups
        self.pod_groups_enabled = enabled
        #: the PodGroups seen (upstream's workload forest, without CompositePodGroups)
        self._pg_objects: dict[GroupKey, WorkloadPodGroup] = {}
        self._pg_incomplete = MemberPods()
        self._pg_pending = MemberPods()
        #: the groups whose entity was popped and whose attempt is not reported yet (upstream's last popped
        #: entity: its cycle reports before the next pop; here a group waiting on preemption's evictions is
        #: reported later, while others are tried)
        self._pg_in_flight: set[GroupKey] = set()
        #: member uid -> its group, for lookups by uid alone (entries of pods gone only from the queue may
        #: linger until their deletion: a lookup then finds nothing)
        self._pg_uids: dict[str, GroupKey] = {}

    def _member_key(self, pod: PodInfo) -> GroupKey | None:
        return _group_key(pod) if self.pod_groups_enabled else None

    # -- PodGroup objects ------------------------------------------------------------------------------
    def add_pod_group(self, group: WorkloadPodGroup) -> None:
        """A PodGroup was seen: its incomplete members join the queue (``AddPodGroup``)."""
        if not self.pod_groups_enabled:
            return
        key = (group.namespace, group.name)
        self._pg_objects[key] = group
        entity = self._find_entity(key)
        if entity is not None:
            entity.set_group(group)
        for qp in self._pg_incomplete.clear(key):
            self._add_member(key, qp)

    def update_pod_group(self, group: WorkloadPodGroup) -> None:
        """A PodGroup changed (``UpdatePodGroup``)."""
        if not self.pod_groups_enabled:
            return
        key = (group.namespace, group.name)
        if key not in self._pg_objects:
            self.add_pod_group(group)
            return
        self._pg_objects[key] = group
        entity = self._find_entity(key)
        if entity is not None:
            entity.set_group(group)

    def delete_pod_group(self, namespace: str, name: str) -> None:
        """A PodGroup went: its queued members become incomplete (``DeletePodGroup``)."""
        if not self.pod_groups_enabled:
            return
        key = (namespace, name)
        if self._pg_objects.pop(key, None) is None:
            return
        entity, _ = self._take_entity(key)
        if entity is None:
            if key in self._pg_in_flight:
                for qp in self._pg_pending.clear(key):
                    self._pg_incomplete.add(key, qp)
            return
        for qp in entity.members:
            self._pg_incomplete.add(key, qp)

    def pod_group(self, namespace: str, name: str) -> WorkloadPodGroup | None:
        return self._pg_objects.get((namespace, name))

    # -- the scheduling loop's side --------------------------------------------------------------------
    def _group_popped(self, entity: QueuedPodGroupInfo) -> QueuedPodGroupInfo:
        """``pop`` took an entity (its own attempts and verdicts are already updated): every member starts
        an attempt."""
        for member in entity.members:
            member.attempts += 1
            member.unschedulable_plugins = set()
            member.pending_plugins = set()
            member.last_failure_was_error = False
            self._in_flight.start(member.pod)
        self._pg_in_flight.add(entity.group_key)
        return entity

    def add_attempted_pod_group_if_needed(
        self, entity: QueuedPodGroupInfo, status: Status | None
    ) -> str | None:
        """Reports a popped group's attempt (``AddAttemptedPodGroupIfNeeded``), after its failed members
        were reported one by one (``add_unschedulable_if_not_present``, which keeps them pending). The
        pending members, if any, form the entity again: to activeQ when ``status`` is a success (keeping
        the old timestamp when some member of this attempt failed, so it comes next), else to backoffQ
        while backing off, or activeQ. Returns where it went; None when no member is left to try."""
        key = entity.group_key
        uid = entity.pod.uid
        if uid in self._active or uid in self._backoff or uid in self._pool:
            return None
        self._pg_in_flight.discard(key)
        pending = self._pg_pending.clear(key)
        if not pending:
            return None
        attempted = {m.pod.uid for m in entity.members}
        had_failures = any(qp.pod.uid in attempted for qp in pending)
        group = self._pg_objects.get(key)
        if group is None:  # the PodGroup went meanwhile (upstream moves them on its deletion already)
            for qp in pending:
                self._pg_incomplete.add(key, qp)
            return INCOMPLETE
        entity.members = []
        entity.set_group(group)
        for qp in pending:
            entity.add_member(qp)
        success = status is None or status.is_success
        now = self.clock.now()
        if success:
            entity.last_failure_was_error = False
            entity.attempts = 0  # upstream resets the group's unschedulable and error counts
        else:
            entity.last_failure_was_error = status is not None and status.code is Code.ERROR
        if not (success and had_failures):
            entity.timestamp = now
        entity.was_flushed = False
        self._flushed_at.pop(uid, None)
        if not success and self._backoff.is_backing_off(entity, now):
            if not self._move_to_backoff(entity, SCHEDULE_ATTEMPT_FAILURE, Strategy.AFTER_BACKOFF):
                return GATED
            if self.pop_from_backoff:
                self._wake()
            return BACKOFF
        if not self._move_to_active(entity, SCHEDULE_ATTEMPT_FAILURE):
            return GATED
        self._wake()
        return ACTIVE

    # -- hooks of the queue's pod paths ----------------------------------------------------------------
    def _member_added(self, pod: PodInfo) -> bool:
        key = self._member_key(pod)
        if key is None:
            return False
        if self._member_location(key, pod.uid) is not None or pod.uid in self._in_flight:
            self._member_updated(None, pod)
            return True
        qp = self._new_queued(pod)
        self.nominator.add(pod)
        self._add_member(key, qp)
        self._unscheduled_pod_added(pod)
        return True

    def _member_updated(self, old: PodInfo | None, new: PodInfo) -> bool:
        """``Update`` of a member not in flight (the queue records in-flight updates itself)."""
        key = self._member_key(new)
        if key is None or new.uid in self._in_flight or new.uid in self._gone_in_flight:
            return False
        if key not in self._pg_objects:
            qp = self._pg_incomplete.get(key, new.uid)
            if qp is None:  # a pod seen for the first time (the queue's ``update`` adds unknown pods)
                return self._member_added(new)
            self.nominator.update(old if old is not None else qp.pod, new)
            qp.pod = new
            return True
        entity = self._find_entity(key)
        member = None if entity is None else entity.member(new.uid)
        if entity is not None and member is not None:
            before = old if old is not None else member.pod
            member.pod = new
            self.nominator.update(before, new)
            if entity.pod.uid in self._pool:
                self._requeue_on_update(entity, before, new)
            return True
        qp = self._pg_pending.get(key, new.uid)
        if qp is not None:
            self.nominator.update(old if old is not None else qp.pod, new)
            qp.pod = new
            return True
        added = self._new_queued(new)
        self.nominator.add(new)
        self._add_member(key, added)
        self._unscheduled_pod_added(new)
        return True

    def _requeue_on_update(self, entity: QueuedPodGroupInfo, old: PodInfo, new: PodInfo) -> None:
        profile = self._profile(entity.pod.scheduler_name)
        for event in pod_update_events(old, new, Resource.TARGET_POD):
            strategy = self._entity_strategy(profile, entity, event, old, new)
            if self._requeue(entity, strategy, event.label) in (ACTIVE, BACKOFF):
                break

    def _member_deleted(self, pod: PodInfo) -> bool:
        """``Delete`` of a member: out of whatever holds it; an entity left empty is dropped."""
        key = self._member_key(pod)
        if key is None:
            return False
        self._pg_uids.pop(pod.uid, None)
        if key not in self._pg_objects:
            self._pg_incomplete.delete(key, pod.uid)
            return True
        entity, strategy = self._take_entity(key)
        if entity is None:
            self._pg_pending.delete(key, pod.uid)
            return True
        entity.remove_member(pod.uid)
        if entity.members:
            self._requeue(entity, strategy, EVENT_UNSCHEDULED_POD_ADD.label)
        return True

    def _member_failed(self, key: GroupKey, qp: QueuedPodInfo) -> str | None:
        """``add_unschedulable_if_not_present`` for a member of group ``key``: its attempt ends and it
        rejoins its group (pending while the group's attempt is being reported)."""
        uid = qp.pod.uid
        gone = uid in self._gone_in_flight
        latest = self._in_flight.latest(uid)
        if latest is not None:
            qp.pod = latest
        qp.timestamp = self.clock.now()
        self._flushed_at.pop(uid, None)
        qp.was_flushed = False
        self.done(uid)
        if gone:
            return None
        self._add_member(key, qp)
        return self.member_location(qp.pod)

    def _entity_uid(self, pod: PodInfo) -> str:
        """The key ``activate`` looks a pod up by: its group's entity for a member of a seen group."""
        key = self._member_key(pod)
        if key is None or key not in self._pg_objects:
            return pod.uid
        return entity_uid(*key)

    def _entity_strategy(
        self, profile: ProfileEvents | None, qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
    ) -> Strategy:
        """``requeue_strategy`` of a pod, or of an entity: the strongest of its members'
        (``isEntityWorthRequeuing``)."""
        if not isinstance(qp, QueuedPodGroupInfo):
            return requeue_strategy(profile, qp, event, old, new)
        best = Strategy.SKIP
        for member in qp.members:
            strategy = requeue_strategy(self._profile(member.pod.scheduler_name), member, event, old, new)
            if strategy is Strategy.IMMEDIATELY:
                return strategy
            if strategy is Strategy.AFTER_BACKOFF:
                best = strategy
        return best

    def _run_group_pre_enqueue(self, entity: QueuedPodGroupInfo) -> None:
        """PreEnqueue of every member; one gated member gates the entity (the last one's plugin)."""
        gated_by = ""
        for member in entity.members:
            self._run_pre_enqueue(member)
            if member.gated_by:
                gated_by = member.gated_by
        entity.gated_by = gated_by

    # -- introspection ---------------------------------------------------------------------------------
    def member_location(self, pod: PodInfo) -> str | None:
        """Where a member is: ``incomplete``, ``pending``, its entity's queue, ``in_flight`` or None."""
        key = self._member_key(pod)
        if key is None:
            return None
        return self._member_location(key, pod.uid)

    def _member_location_by_uid(self, uid: str) -> str | None:
        """``location`` of a member not in flight, found by its uid alone."""
        if not self.pod_groups_enabled or uid in self._in_flight:
            return None
        key = self._pg_uids.get(uid)
        return None if key is None else self._member_location(key, uid)

    def _member_location(self, key: GroupKey, uid: str) -> str | None:
        if self._pg_incomplete.get(key, uid) is not None:
            return INCOMPLETE
        if self._pg_pending.get(key, uid) is not None:
            return PENDING
        entity = self._find_entity(key)
        if entity is None or entity.member(uid) is None:
            return None
        if entity.pod.uid in self._active:
            return ACTIVE
        if entity.pod.uid in self._backoff:
            return BACKOFF
        return GATED if entity.gated_by else UNSCHEDULABLE

    def _group_counts(self) -> tuple[int, int]:
        return len(self._pg_incomplete), len(self._pg_pending)

    @staticmethod
    def _sized(qp: QueuedPodInfo) -> tuple[int, bool]:
        """What an entity counts for the metrics: (its pods, whether it is a pod group)."""
        if isinstance(qp, QueuedPodGroupInfo):
            return len(qp.members), True
        return 1, False

    def _entered(self, qp: QueuedPodInfo) -> set[str]:
        """The set of queues entered by entities of ``qp``'s type (``incoming``)."""
        incoming = self.incoming
        return incoming.entered_groups if isinstance(qp, QueuedPodGroupInfo) else incoming.entered

    def _pod_counts(self) -> dict[str, int]:
        """Pods in activeQ, backoffQ, the pool and gated, members of the entities there counted."""
        counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
        for where, entities in ((ACTIVE, self._active), (BACKOFF, self._backoff)):
            counts[where] = sum(self._sized(qp)[0] for qp in entities)
        for qp in self._pool:
            counts[GATED if qp.gated_by else UNSCHEDULABLE] += self._sized(qp)[0]
        return counts

    def entity_counts(self) -> dict[tuple[str, str], int]:
        """(queue, ``pod`` or ``podgroup``) -> the entities of that type there
        (``scheduler_queued_entities``)."""
        counts: dict[tuple[str, str], int] = {}
        places: list[tuple[str, Iterable[QueuedPodInfo]]] = [(ACTIVE, self._active), (BACKOFF, self._backoff)]
        for where, entities in places:
            for qp in entities:
                key = (where, POD_GROUP_TYPE if isinstance(qp, QueuedPodGroupInfo) else POD_TYPE)
                counts[key] = counts.get(key, 0) + 1
        for qp in self._pool:
            where = GATED if qp.gated_by else UNSCHEDULABLE
            key = (where, POD_GROUP_TYPE if isinstance(qp, QueuedPodGroupInfo) else POD_TYPE)
            counts[key] = counts.get(key, 0) + 1
        return counts

    def _expand(self, queued: Iterable[QueuedPodInfo]) -> list[QueuedPodInfo]:
        """Entities replaced by their members, then the members waiting outside entities."""
        if not self.pod_groups_enabled:
            return list(queued)
        out: list[QueuedPodInfo] = []
        for qp in queued:
            if isinstance(qp, QueuedPodGroupInfo):
                out.extend(qp.members)
            else:
                out.append(qp)
        out.extend(self._pg_incomplete)
        out.extend(self._pg_pending)
        return out

    # -- internals -------------------------------------------------------------------------------------
    def _find_entity(self, key: GroupKey) -> QueuedPodGroupInfo | None:
        uid = entity_uid(*key)
        qp = self._active.get(uid) or self._backoff.get(uid) or self._pool.get(uid)
        return qp if isinstance(qp, QueuedPodGroupInfo) else None

    def _take_entity(self, key: GroupKey) -> tuple[QueuedPodGroupInfo | None, Strategy]:
        """Removes a group's entity from wherever it waits (``deleteFromAnyQueue``), with the strategy that
        puts it back there."""
        uid = entity_uid(*key)
        taken: list[tuple[Callable[[str], QueuedPodInfo | None], Strategy]] = [
            (self._active.remove, Strategy.IMMEDIATELY),
            (self._backoff.remove, Strategy.AFTER_BACKOFF),
            (self._pool.remove, Strategy.SKIP),
        ]
        for remove, strategy in taken:
            qp = remove(uid)
            if isinstance(qp, QueuedPodGroupInfo):
                return qp, strategy
        return None, Strategy.SKIP

    def _add_member(self, key: GroupKey, qp: QueuedPodInfo) -> None:
        """``addPodGroupMember``: incomplete without a PodGroup; else into its entity wherever it waits
        (which stays there), pending while the entity is in flight, or a new entity for activeQ."""
        self._pg_uids[qp.pod.uid] = key
        group = self._pg_objects.get(key)
        if group is None:
            self._pg_incomplete.add(key, qp)
            return
        entity, strategy = self._take_entity(key)
        if entity is not None:
            entity.add_member(qp)
            self._requeue(entity, strategy, EVENT_UNSCHEDULED_POD_ADD.label)
            return
        if key in self._pg_in_flight:
            self._pg_pending.add(key, qp)
            return
        entity = QueuedPodGroupInfo.for_group(group, qp, next(self._sequence))
        if self._move_to_active(entity, EVENT_UNSCHEDULED_POD_ADD.label):
            self._wake()


__all__ = [
    "INCOMPLETE",
    "PENDING",
    "MemberPods",
    "PodGroupQueue",
    "QueuedPodGroupInfo",
    "entity_uid",
]
