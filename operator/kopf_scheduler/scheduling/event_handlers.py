"""Cluster events into the queue and the cache (upstream's ``eventhandlers.go``).

An assigned pod goes to the cache (confirming an assumed one); an unassigned pod whose ``schedulerName``
a profile serves goes to the queue, one nobody serves waits aside until a profile claims its name;
deletes remove a pod from wherever it is. An assumed pod whose deletion starts (or that is deleted) is
rejected if it waits at Permit, else taken off its node at once, and the room it held is announced
(upstream v1.37's ``handleAssumedPodDeletion``). A pod that cannot be read gets a ``FailedScheduling`` report
saying why, and nothing else stops. Nodes, PodDisruptionBudgets and the other watched kinds go to their
stores, and each change moves the pods it may help (the queue's hints decide which).

``EventHandlers`` is the part of ``Scheduler`` that takes these events; it holds no state of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kopf_scheduler.backend.cache import Cache
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.backend.objects.members import GroupMembersIndex
from kopf_scheduler.backend.queue import SchedulingQueue
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.disruption_budgets import BudgetParseError, DisruptionBudget, DisruptionBudgets
from kopf_scheduler.framework.events import OBJECT_EVENTS, Action, Resource
from kopf_scheduler.framework.node_info import NodeInfo, NodeParseError
from kopf_scheduler.framework.objects import (
    DEVICE_TAINT_RULES,
    RESOURCE_SLICES,
    WORKLOAD_POD_GROUPS,
    DeviceTaintRule,
    ObjectKind,
    ObjectParseError,
)
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.slim import kept
from kopf_scheduler.scheduling.schedule_one import REASON_SCHEDULER_ERROR

log = logging.getLogger("kopf_scheduler")


def _same_version(held: Mapping[str, Any], seen: Mapping[str, Any]) -> bool:
    """Whether ``seen`` is the very version of the object already held (same ``resourceVersion``)."""
    version = (seen.get("metadata") or {}).get("resourceVersion")
    return bool(version) and (held.get("metadata") or {}).get("resourceVersion") == version


def _is_assigned(raw: Mapping[str, Any]) -> bool:
    return bool((raw.get("spec") or {}).get("nodeName"))


def _is_terminal(raw: Mapping[str, Any]) -> bool:
    return (raw.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _is_deleting(raw: Mapping[str, Any] | None) -> bool:
    return raw is not None and bool((raw.get("metadata") or {}).get("deletionTimestamp"))


class EventHandlers:
    """Takes watch events into the queue, the cache and the stores (mixed into ``Scheduler``)."""

    client: ClusterClient
    cache: Cache
    queue: SchedulingQueue
    profiles: dict[str, Framework]
    group_members: GroupMembersIndex
    disruption_budgets: DisruptionBudgets
    objects: ClusterObjects
    shadow_all: bool
    #: pending pods whose schedulerName no profile serves (yet): queued when a profile claims it
    _unserved: dict[str, PodInfo]

    def responsible_for(self, pod: PodInfo) -> bool:
        """Whether a profile serves the pod's schedulerName to bind it (a shadow profile does not)."""
        framework = self.profiles.get(pod.scheduler_name)
        return framework is not None and not self._shadows(framework)

    def _shadows(self, framework: Framework) -> bool:
        return framework.shadow or self.shadow_all

    def _judge_shadow(self, pending: PodInfo, bound_node: str) -> None:
        """Another scheduler bound ``pending``, whose schedulerName a shadow profile watches."""
        raise NotImplementedError

    # -- nodes -----------------------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> None:
        self.update_node(node)

    def update_node(self, node: Mapping[str, Any]) -> None:
        current = self.cache.node_info(str((node.get("metadata") or {}).get("name") or ""))
        if current is not None and current.node is not None and _same_version(current.node, node):
            return  # a re-list's copy of what is held (the watch's first list after ours): nothing changed
        try:
            old, new = self.cache.update_node(kept(node))
        except NodeParseError as e:
            name = (node.get("metadata") or {}).get("name")
            log.warning("ignoring node %s: %s", name, e)
            return
        if old is None:
            self.queue.node_added(new)
        else:
            self.queue.node_updated(old, new)

    def delete_node(self, name: str) -> None:
        old = self.cache.remove_node(name)
        if old is not None:
            self.queue.node_deleted(old)

    def node_info(self, name: str) -> NodeInfo | None:
        return self.cache.node_info(name)

    # -- pods ------------------------------------------------------------------------------------------
    def _parse(self, raw: Mapping[str, Any]) -> PodInfo | None:
        try:
            return PodInfo(kept(raw))
        except PodParseError as e:
            ref = PodInfo.reference(raw)
            scheduler = (raw.get("spec") or {}).get("schedulerName") if isinstance(raw, Mapping) else None
            serving = self.profiles.get(scheduler or "default-scheduler")
            if not _is_assigned(raw) and serving is not None and not self._shadows(serving) and ref.name:
                self.client.record_failure(ref, REASON_SCHEDULER_ERROR, f"pod cannot be scheduled: {e}", None)
            log.warning("cannot read pod %s: %s", ref.key, e)
            return None

    def add_pod(self, raw: Mapping[str, Any], parsed: PodInfo | None = None) -> None:
        """``parsed``: ``raw`` already read into a PodInfo by the caller, to save reading it again."""
        self.update_pod(None, raw, parsed)

    def known_pods(self) -> list[PodInfo]:
        """Every pod the scheduler holds: on nodes (assumed included), waiting in the queue, or waiting
        for a profile to serve its scheduler name. Pods in the middle of an attempt are not listed."""
        return [*self.cache.pods(), *(qp.pod for qp in self.queue.pending()), *self._unserved.values()]

    def pod_known(self, uid: str) -> bool:
        """Whether the scheduler holds the pod (on a node or assumed, waiting in the queue, or unserved):
        False once its deletion was seen (an in-flight pod's place in the queue outlives it)."""
        return self.cache.get_pod(uid) is not None or uid in self.queue or uid in self._unserved

    def update_pod(
        self, old_raw: Mapping[str, Any] | None, raw: Mapping[str, Any], parsed: PodInfo | None = None
    ) -> None:
        if _is_assigned(raw):
            known = self.cache.get_pod(str((raw.get("metadata") or {}).get("uid") or ""))
            if known is not None:
                if not self.cache.is_assumed(known.uid):
                    if _same_version(known.raw, raw):
                        return  # a re-list's copy of a bound pod held as it is: nothing to parse or recount
                elif parsed is None:
                    parsed = known.confirmed(kept(raw))  # our binding confirmed: read once already
        pod = parsed if parsed is not None else self._parse(raw)
        if pod is None:
            return
        self.group_members.update(pod)
        if _is_assigned(raw):
            if _is_terminal(raw):
                self.delete_pod(raw)
                self.group_members.update(pod)  # a PodGroup's status counts its finished pods
                return
            self.queue.delete(pod, bound=True)  # it may have been pending with us until now
            pending = self._unserved.pop(pod.uid, None)
            known = self.cache.get_pod(pod.uid)
            if pending is not None and known is None and pod.node_name:
                self._judge_shadow(pending, pod.node_name)  # another scheduler bound it
            if known is None or self.cache.is_assumed(pod.uid):
                self.cache.add_pod(pod)
                self.queue.assigned_pod_added(pod)
            else:
                self.cache.update_pod(known, pod)
                self.queue.assigned_pod_updated(known, pod)
            return
        if self.cache.is_assumed(pod.uid):
            if pod.deletion_timestamp and not _is_deleting(old_raw):
                self._assumed_pod_deleted(pod.uid)
            return  # being bound by us; the assigned version will arrive
        if not self.responsible_for(pod) or pod.deletion_timestamp:
            self.queue.delete(pod)
            if pod.deletion_timestamp:
                self._unserved.pop(pod.uid, None)
            else:
                self._unserved[pod.uid] = pod
            return
        self.cache.pod_group_member_seen(pod)
        queued = self.queue.get(pod.uid)
        if queued is not None and _same_version(queued.pod.raw, raw):
            return  # a re-list's copy of a pending pod held as it is: upstream skips equal resourceVersions
        old = self._parse(old_raw) if old_raw is not None else None
        self.queue.update(old, pod)

    def binding_unconfirmed(self, assumed: PodInfo, current: Mapping[str, Any] | None) -> None:
        """An assumed pod whose binding was answered as done but never seen done, as the API server
        has it now (None: gone). Bound (to any node: the watch is late) counts as that watch event;
        gone as its deletion; still unbound, the pod is forgotten, its room freed, the failure reported
        and the pod queued again."""
        if not self.cache.is_assumed(assumed.uid):
            return  # confirmed or deleted while it was being read
        if current is None or (current.get("metadata") or {}).get("uid") != assumed.uid:
            self.delete_pod(assumed.raw)
            return
        if _is_assigned(current):
            self.update_pod(None, current)
            return
        self.cache.forget_pod(assumed)
        self.queue.assigned_pod_deleted(assumed)
        message = (
            f"binding to {assumed.node_name} was answered as done, but the pod is still unbound "
            f"{self.cache.assumed_ttl:g}s later; scheduling it again"
        )
        log.warning("pod %s: %s", assumed.key, message)
        pod = self._parse(current)
        if pod is not None:
            self.client.record_failure(pod, REASON_SCHEDULER_ERROR, message, None)
        self.update_pod(None, current)

    def delete_pod(self, raw: Mapping[str, Any]) -> None:
        pod = PodInfo.reference(raw)
        self._unserved.pop(pod.uid, None)
        self.group_members.remove(pod.uid)
        self.cache.pod_group_member_gone(pod)
        if not _is_assigned(raw) and self.cache.is_assumed(pod.uid):
            # Its nomination needs no event of its own: the room it held on its node is announced.
            self.queue.delete(pod, bound=True)
            self._assumed_pod_deleted(pod.uid)
            return
        removed = self.cache.remove_pod(pod)
        if removed is not None:
            self.queue.assigned_pod_deleted(removed)
        self.queue.delete(pod)

    def _assumed_pod_deleted(self, uid: str) -> None:
        """An assumed pod is being deleted (``handleAssumedPodDeletion``): rejected if it waits at
        Permit (its binding cycle then forgets it), else removed from the cache now so that its room is
        not held until its binding fails; either way pending pods are told of its room."""
        assumed = self.cache.get_pod(uid)
        if assumed is None:
            return
        rejected = False
        for framework in self.profiles.values():
            waiting = framework.waiting_pods.get(uid)
            if waiting is not None:
                waiting.reject("", "removed")  # RejectWaitingPod's words
                rejected = True
        if not rejected:
            self.cache.remove_pod(assumed)
        self.queue.assigned_pod_deleted(assumed)

    # -- PodDisruptionBudgets (policy/v1) --------------------------------------------------------------------
    def add_pdb(self, obj: Mapping[str, Any]) -> None:
        self.update_pdb(obj)

    def update_pdb(self, obj: Mapping[str, Any]) -> None:
        try:
            self.disruption_budgets.set(DisruptionBudget.parse(obj))
        except BudgetParseError as e:
            name = (obj.get("metadata") or {}).get("name")
            log.warning("ignoring PodDisruptionBudget %s: %s", name, e)

    def delete_pdb(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self.disruption_budgets.delete(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))

    # -- other cluster objects (framework.objects.WATCHED_KINDS) ----------------------------------------
    def update_object(self, kind: ObjectKind[Any], raw: Mapping[str, Any]) -> None:
        """An object of ``kind`` was added or changed: stored, and pods its change may help are requeued."""
        try:
            old, new = self.objects.store(kind).upsert(raw)
        except ObjectParseError as e:
            name = (raw.get("metadata") or {}).get("name") if isinstance(raw, Mapping) else None
            log.warning("ignoring %s %s: %s", kind, name, e)
            return
        action = Action.ADD if old is None else Action.UPDATE
        if kind is WORKLOAD_POD_GROUPS:  # its pods' states and queue entity follow first, as upstream
            if self.cache.pod_groups_enabled:
                self.cache.pod_groups.set_pod_group(new)
            if old is None:
                self.queue.add_pod_group(new)
            else:
                self.queue.update_pod_group(new)
        self.queue.move_all_to_active_or_backoff(OBJECT_EVENTS[kind.resource, action], old, new)
        if kind is DEVICE_TAINT_RULES:
            self._taint_rule_changed(old, new)

    def delete_object(self, kind: ObjectKind[Any], namespace: str, name: str) -> None:
        old = self.objects.store(kind).delete(namespace, name)
        if old is not None:
            if kind is WORKLOAD_POD_GROUPS:
                if self.cache.pod_groups_enabled:
                    self.cache.pod_groups.remove_pod_group(namespace, name)
                self.queue.delete_pod_group(namespace, name)
            self.queue.move_all_to_active_or_backoff(OBJECT_EVENTS[kind.resource, Action.DELETE], old, None)
            if kind is DEVICE_TAINT_RULES:
                self._taint_rule_changed(old, None)

    def _taint_rule_changed(self, old: DeviceTaintRule | None, new: DeviceTaintRule | None) -> None:
        """A DeviceTaintRule's change is, as upstream's ResourceSlice tracker sends it, an update of each
        slice with a device whose taints it changes."""
        if old is not None and new is not None and old.same_effect(new):
            return
        rules = [rule for rule in (old, new) if rule is not None]
        event = OBJECT_EVENTS[Resource.RESOURCE_SLICE, Action.UPDATE]
        for slice_ in self.objects.store(RESOURCE_SLICES).list():
            if any(
                rule.matches(slice_.driver, slice_.pool, device.name)
                for rule in rules
                for device in slice_.devices
            ):
                self.queue.move_all_to_active_or_backoff(event, slice_, slice_)
