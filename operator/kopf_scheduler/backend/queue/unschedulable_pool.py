"""The unschedulable pool: pods that wait for a cluster event (kube-scheduler v1.37's
``unschedulableEntities``, formerly ``unschedulablePods``; pods only, as pod groups need the GenericWorkload
gate, off).

It holds two kinds of pods, told apart by ``QueuedPodInfo.gated_by``: pods a plugin rejected in a
scheduling attempt, and pods a PreEnqueue plugin keeps out of the active queue ("gated"). Both leave only
through the scheduling queue, on an event the rejecting (or gating) plugin registered, on the pod's own
update, or (rejected pods only) after sitting here longer than the leftover timeout.

The pool also indexes its members by the keys ``keys_of`` gives them (the queue's keyed hints, see
``profile_events``), so an event with keys finds the members it may concern without visiting the rest;
a member without keys (None) is always a candidate.

Invariant: the gated count equals the number of members whose ``gated_by`` was set when they were last
stored, and the index holds their keys as of then; callers re-store a member (``add``) whenever they
change its ``gated_by``, pod, or rejecting plugins, and call ``reindex`` when ``keys_of`` changes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator

from kopf_scheduler.framework.pod_info import QueuedPodInfo

KeysOf = Callable[[QueuedPodInfo], frozenset[Hashable] | None]


def _no_keys(qp: QueuedPodInfo) -> None:
    return None


class UnschedulablePool:
    __slots__ = ("_by_key", "_gated", "_keys", "_pods", "_unkeyed", "keys_of")

    def __init__(self, keys_of: KeysOf = _no_keys) -> None:
        self._pods: dict[str, QueuedPodInfo] = {}
        #: uids of the members stored while gated
        self._gated: set[str] = set()
        self.keys_of = keys_of
        #: member uid -> its keys (members with keys only), and key -> the uids having it
        self._keys: dict[str, frozenset[Hashable]] = {}
        self._by_key: dict[Hashable, set[str]] = {}
        #: members without keys: candidates for every event
        self._unkeyed: set[str] = set()

    def add(self, qp: QueuedPodInfo) -> None:
        """Adds or re-stores a pod (the gated bookkeeping and the index follow its current state)."""
        uid = qp.pod.uid
        self._pods[uid] = qp
        if qp.gated_by:
            self._gated.add(uid)
        else:
            self._gated.discard(uid)
        self._index(uid, qp)

    def remove(self, uid: str) -> QueuedPodInfo | None:
        self._gated.discard(uid)
        self._unindex(uid)
        return self._pods.pop(uid, None)

    # -- the key index ---------------------------------------------------------------------------------
    def _index(self, uid: str, qp: QueuedPodInfo) -> None:
        keys = self.keys_of(qp)
        if keys is not None and self._keys.get(uid) == keys:
            return
        self._unindex(uid)
        if keys is None:
            self._unkeyed.add(uid)
            return
        self._keys[uid] = keys
        by_key = self._by_key
        for key in keys:
            found = by_key.get(key)
            if found is None:
                by_key[key] = {uid}
            else:
                found.add(uid)

    def _unindex(self, uid: str) -> None:
        self._unkeyed.discard(uid)
        keys = self._keys.pop(uid, None)
        if not keys:
            return
        by_key = self._by_key
        for key in keys:
            found = by_key.get(key)
            if found is not None:
                found.discard(uid)
                if not found:
                    del by_key[key]

    def reindex(self) -> None:
        """Asks ``keys_of`` again for every member."""
        self._keys.clear()
        self._by_key.clear()
        self._unkeyed.clear()
        for uid, qp in self._pods.items():
            self._index(uid, qp)

    def candidates(self, keys: Iterable[Hashable]) -> list[QueuedPodInfo]:
        """The members having one of ``keys`` or no keys at all, in pool order."""
        uids = set(self._unkeyed)
        by_key = self._by_key
        for key in keys:
            found = by_key.get(key)
            if found:
                uids |= found
        if len(uids) <= 1:
            return [self._pods[uid] for uid in uids]
        return [qp for uid, qp in self._pods.items() if uid in uids]

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._pods

    def __len__(self) -> int:
        return len(self._pods)

    def __iter__(self) -> Iterator[QueuedPodInfo]:
        return iter(self._pods.values())

    def snapshot(self) -> list[QueuedPodInfo]:
        """The members as a list, safe to iterate while moving pods out."""
        return list(self._pods.values())

    @property
    def gated_count(self) -> int:
        return len(self._gated)
