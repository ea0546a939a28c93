"""The pods of each PodGroup: every pod the scheduler hears of that carries the pod-group label, by
namespace and group, whatever its scheduler, bound or pending, finished ones included (the PodGroup status
counts them; the Coscheduling plugin skips them, as kube-scheduler's pod informer never holds them).

Written by the scheduler's pod intake only (watch events, start-up lists, resync, ``simulate``); read by
plugins through the framework handle (``GroupMembers``) and by the PodGroup status keeper. A pod whose
label changes moves to its new group; ``members`` returns the same tuple until the group changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kopf_scheduler.framework.objects.podgroups import pod_group_name
from kopf_scheduler.framework.pod_info import PodInfo

_Group = tuple[str, str]


class GroupMembersIndex:
    __slots__ = ("_groups", "_listed", "_of", "generation", "on_change")

    def __init__(self) -> None:
        self._groups: dict[_Group, dict[str, PodInfo]] = {}
        self._of: dict[str, _Group] = {}  # pod uid -> its group
        self._listed: dict[_Group, tuple[PodInfo, ...]] = {}
        #: grows with every change to any group
        self.generation = 0
        #: called with (namespace, group) after a change to that group (the PodGroup status keeper)
        self.on_change: Callable[[_Group], None] | None = None

    def update(self, pod: PodInfo) -> _Group | None:
        """Records the latest version of ``pod``; returns its group (None: it has none, and had none)."""
        name = pod_group_name(pod)
        before = self._of.get(pod.uid)
        if not name:
            if before is not None:
                self.remove(pod.uid)
            return before
        group = (pod.namespace, name)
        if before is not None and before != group:
            self.remove(pod.uid)
        self._groups.setdefault(group, {})[pod.uid] = pod
        self._of[pod.uid] = group
        self._changed(group)
        return group

    def remove(self, uid: str) -> _Group | None:
        """Forgets the pod; returns the group it was in."""
        group = self._of.pop(uid, None)
        if group is None:
            return None
        pods = self._groups.get(group)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._groups[group]
        self._changed(group)
        return group

    def _changed(self, group: _Group) -> None:
        self.generation += 1
        self._listed.pop(group, None)
        if self.on_change is not None:
            self.on_change(group)

    def members(self, namespace: str, group: str) -> Sequence[PodInfo]:
        """The group's pods; the same tuple until the group changes. A group without pods is not kept:
        asking for the groups of a churn (each named once, gone once deleted) must not pile them up."""
        key = (namespace, group)
        found = self._listed.get(key)
        if found is None:
            pods = self._groups.get(key)
            if not pods:
                return ()
            found = self._listed[key] = tuple(pods.values())
        return found

    def groups(self) -> list[_Group]:
        """Every (namespace, group name) with at least one pod."""
        return list(self._groups)

    def __len__(self) -> int:
        return len(self._of)
