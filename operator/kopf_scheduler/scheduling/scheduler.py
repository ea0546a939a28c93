"""The scheduler: owns the queue, the cache, the snapshot and one framework per profile, takes cluster
events in, and runs the scheduling loop.

Event intake follows kube-scheduler's informer handlers: an assigned pod goes to the cache (confirming an
assumed one); an unassigned pod whose ``schedulerName`` a profile serves goes to the queue; deletes remove
it from wherever it is. A pod that cannot be read gets a ``FailedScheduling`` report saying why, and the
loop carries on. Profiles can be replaced between cycles: a cycle in flight finishes with the framework it
started with, and pods the old profile left unschedulable are requeued.

One cycle at a time, each run eagerly, without giving the loop a turn. A cycle of a profile with
extenders never waits for their HTTP answers: it is replayed once they are in, and other profiles' pods
are scheduled meanwhile (``framework.extenders.replay``); the pods of profiles with extenders keep their
order among themselves.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from kopf_scheduler.api.extenders import ignored_resources
from kopf_scheduler.api.profile import PluginSet, ProfileSpec
from kopf_scheduler.backend.cache import Cache, Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.backend.objects.members import GroupMembersIndex
from kopf_scheduler.backend.queue import SchedulingQueue
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.disruption_budgets import BudgetParseError, DisruptionBudget, DisruptionBudgets
from kopf_scheduler.framework.eager import run_eagerly
from kopf_scheduler.framework.events import EVENT_FORCE_ACTIVATE, OBJECT_EVENTS, Action
from kopf_scheduler.framework.extenders import ExtenderTransport
from kopf_scheduler.framework.extenders.replay import (
    CURRENT,
    MAX_REPLAY_ROUNDS,
    ExtenderCallNeeded,
    PendingCall,
    Replay,
)
from kopf_scheduler.framework.node_info import NodeInfo, NodeParseError
from kopf_scheduler.framework.objects import WATCHED_KINDS, ObjectKind, ObjectParseError
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError, QueuedPodInfo
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.runtime.registry import Registry
from kopf_scheduler.framework.slim import slim
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.names import NODE_RESOURCES_FIT, PRIORITY_SORT
from kopf_scheduler.plugins.priority_sort import PrioritySort
from kopf_scheduler.plugins.registry import new_registry
from kopf_scheduler.scheduling.context import Explains
from kopf_scheduler.scheduling.explain import Explainer, Sink
from kopf_scheduler.scheduling.schedule_one import REASON_SCHEDULER_ERROR, now, scheduling_cycle
from kopf_scheduler.scheduling.shadow import SAME as SHADOW_SAME
from kopf_scheduler.scheduling.shadow import ShadowDecision
from kopf_scheduler.scheduling.shadow import judge as judge_shadow

log = logging.getLogger("kopf_scheduler")

#: served by the built-in default profile when no SchedulingProfile claims them.
DEFAULT_SCHEDULER_NAMES = ("default-scheduler", "kopf-scheduler")


def _same_version(held: Mapping[str, Any], seen: Mapping[str, Any]) -> bool:
    """Whether ``seen`` is the very version of the object already held (same ``resourceVersion``)."""
    version = (seen.get("metadata") or {}).get("resourceVersion")
    return bool(version) and (held.get("metadata") or {}).get("resourceVersion") == version


def _is_assigned(raw: Mapping[str, Any]) -> bool:
    return bool((raw.get("spec") or {}).get("nodeName"))


def _is_terminal(raw: Mapping[str, Any]) -> bool:
    return (raw.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _with_extender_ignored_resources(spec: ProfileSpec) -> ProfileSpec:
    """kube-scheduler's ``buildExtenders``: the resources extenders manage with ``ignoredByScheduler``
    become NodeResourcesFit's ``ignoredResources`` (replacing what its args said)."""
    ignored = ignored_resources(spec.extenders)
    if not ignored:
        return spec
    args, path = spec.plugin_config.get(NODE_RESOURCES_FIT, ({}, "spec.extenders"))
    config = dict(spec.plugin_config)
    config[NODE_RESOURCES_FIT] = ({**args, "ignoredResources": ignored}, path)
    return dataclasses.replace(spec, plugin_config=config)


#: event-loop rounds given to other tasks between two scheduling cycles, at most
MAX_INTAKE_ROUNDS = 64


class _EmptyRound:
    """The shortest event-loop round seen: what a round costs on this machine when nothing but the
    yielding coroutine runs in it (about a microsecond)."""

    seconds = math.inf


async def yield_to_intake() -> None:
    """Lets watch-event intake, binding cycles and API calls run until nothing else is ready (or for
    ``MAX_INTAKE_ROUNDS`` rounds), so the next cycle sees the cluster as it is now. kube-scheduler's
    informers run beside its scheduling goroutine; here the events (read from the intake process's pipe,
    ``intake_link``, or from Kopf's watches in this process) go into the cache on this thread, and a
    single yield per cycle lets them fall behind while pods are retried against a stale cache (a
    preemptor would preempt again because its victims' deletion has not been read yet).

    On asyncio's loop "nothing else is ready" is its run queue being empty. uvloop (which Kopf's own CLI
    picks when it is installed: ``kopf run -m kopf_scheduler.handlers``) does not show its queue; there a
    round counts as idle when it took no longer than twice the shortest round seen, plus a microsecond
    (a step of a watch event's handling takes tens to hundreds)."""
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    for _ in range(MAX_INTAKE_ROUNDS):
        if ready is not None:
            await asyncio.sleep(0)
            if not ready:
                return
        else:
            started = time.perf_counter()
            await asyncio.sleep(0)
            took = time.perf_counter() - started
            shortest, _EmptyRound.seconds = _EmptyRound.seconds, min(_EmptyRound.seconds, took)
            if took <= 2 * shortest + 1e-6:  # never before a first round was seen
                return


class Scheduler:
    def __init__(
        self,
        client: ClusterClient,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        registry: Registry | None = None,
        defaults: dict[str, PluginSet] | None = None,
        percentage_of_nodes_to_score: int = 0,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        explain: Sink | None = None,
        confirm_timeout: float = 0.0,
    ) -> None:
        """``confirm_timeout``: seconds after a successful binding within which its watch event should
        arrive; a pod still unconfirmed then is listed by ``cache.overdue_assumed_pods`` for a re-read
        (``binding_confirmation``). 0: it waits for ever, as upstream's assumed pods do."""
        self.client = client
        self.clock = clock or RealClock()
        self.rng = rng or random.Random()
        self.registry = registry or new_registry()
        self.defaults = defaults if defaults is not None else default_plugins()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.profiles: dict[str, Framework] = {}
        self.cache = Cache(self.clock, assumed_ttl=confirm_timeout)
        self.snapshot = Snapshot()
        #: PodDisruptionBudgets, read by preemption through every profile's handle
        self.disruption_budgets = DisruptionBudgets()
        #: Namespaces, Services, controllers, ...: read by plugins through ``handle.objects``
        self.objects = ClusterObjects(WATCHED_KINDS)
        #: the pods of each PodGroup (pod-group label), read by Coscheduling and the PodGroup status
        self.group_members = GroupMembersIndex()
        self.queue = SchedulingQueue(
            PrioritySort(),
            self.profiles.get,
            self.clock,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
        )
        self.next_start_node_index = 0
        self.binding_conflicts = 0
        #: explanations of each decision, when asked for (``simulate --explain``)
        self.explainer: Explains | None = Explainer(self, explain) if explain is not None else None
        self._bindings: set[asyncio.Task[None]] = set()
        #: extender answers recorded for the attempts of pods in flight (``schedule_one_async``)
        self._replays: dict[str, Replay] = {}
        #: the pod whose attempt waits on extender calls, and the pods of extender profiles behind it
        self._extender_wait: str | None = None
        self._behind_extender_wait: collections.deque[QueuedPodInfo] = collections.deque()
        #: await extender calls in the cycle instead (``simulate``: one pod after the other, as upstream)
        self.wait_for_extenders = False
        #: pending pods whose schedulerName no profile serves (yet): queued when a profile claims it
        self._unserved: dict[str, PodInfo] = {}
        #: extension-point timings and attempts' outcomes, for whoever subscribes (the metrics)
        self.recorder = Recorder()
        #: every profile is a shadow (``kopf-scheduler run --shadow``): nothing is bound
        self.shadow_all = False
        #: the verdicts of shadow profiles on other schedulers' bindings (``shadow``)
        self.shadow_hooks: list[Callable[[ShadowDecision], None]] = []
        #: the HTTP client every profile's scheduler extenders share (``close_extenders`` releases it)
        self.extender_transport = ExtenderTransport()

    # -- profiles --------------------------------------------------------------------------------------
    def build_profile(self, spec: ProfileSpec) -> Framework:
        """Builds (validates) a profile without serving it; raises ``ProfileError``."""
        framework = build_framework(
            _with_extender_ignored_resources(spec),
            self.registry,
            self.defaults,
            self.client,
            clock=self.clock,
            nominator=self.queue,
            extender_transport=self.extender_transport,
            objects=self.objects,
        )
        framework.rng = self.rng
        framework.disruption_budgets = self.disruption_budgets
        framework.pod_known = self.pod_known
        framework.group_members = self.group_members
        framework.activate_pods = self.queue.activate
        return framework

    def set_profile(self, spec: ProfileSpec) -> Framework:
        """Serves ``spec.scheduler_name`` with this profile from the next cycle on."""
        framework = self.build_profile(spec)
        self.install(framework)
        return framework

    def install(self, framework: Framework) -> None:
        """Serves ``framework.profile_name`` with ``framework``; pods the previous version left
        unschedulable are retried, pods nobody served until now are queued."""
        name = framework.profile_name
        previous = self.profiles.get(name)
        self.profiles[name] = framework
        self._choose_queue_sort()
        if previous is not None:
            self.queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE, None, None)
        if self._shadows(framework):  # it binds nothing: its pods wait for another scheduler
            self._leave_queue(name)
            return
        for uid, pod in list(self._unserved.items()):
            if pod.scheduler_name == name:
                del self._unserved[uid]
                self.queue.add(pod)

    def remove_profile(self, scheduler_name: str) -> None:
        """Stops serving ``scheduler_name``: its pending pods leave the queue until a profile claims it."""
        if self.profiles.pop(scheduler_name, None) is None:
            return
        self._choose_queue_sort()
        self._leave_queue(scheduler_name)

    def _leave_queue(self, scheduler_name: str) -> None:
        """The pending pods of ``scheduler_name`` leave the queue, until a profile binds for it again."""
        for qp in self.queue.pending():
            if qp.pod.scheduler_name == scheduler_name:
                self._unserved[qp.pod.uid] = qp.pod
                self.queue.delete(qp.pod)

    def _choose_queue_sort(self) -> None:
        """One queue-sort plugin orders the pods of every profile (upstream refuses profiles that name
        different ones). Profiles here are separate resources that come and go, so the choice is made
        here and does not depend on which was installed last: a queue sort other than PrioritySort wins
        (Coscheduling keeps a gang's pods together and sorts other pods by priority too), the one of the
        profile served longest among several."""
        frameworks = list(self.profiles.values())
        chosen = next((f for f in frameworks if f.queue_sort.name != PRIORITY_SORT), None)
        if chosen is None and frameworks:
            chosen = frameworks[0]
        if chosen is None:
            return
        others = {f.queue_sort.name for f in frameworks} - {PRIORITY_SORT, chosen.queue_sort.name}
        if others:
            log.warning(
                "profiles name different queue sort plugins (%s); %s of profile %s orders every pod",
                ", ".join(sorted(others)),
                chosen.queue_sort.name,
                chosen.profile_name,
            )
        self.queue.set_queue_sort(chosen.queue_sort)

    def use_default_profiles(self, names: tuple[str, ...] = DEFAULT_SCHEDULER_NAMES) -> None:
        for name in names:
            self.set_profile(ProfileSpec(scheduler_name=name))

    def responsible_for(self, pod: PodInfo) -> bool:
        """Whether a profile serves the pod's schedulerName to bind it (a shadow profile does not)."""
        framework = self.profiles.get(pod.scheduler_name)
        return framework is not None and not self._shadows(framework)

    def _shadows(self, framework: Framework) -> bool:
        return framework.shadow or self.shadow_all

    def _judge_shadow(self, pending: PodInfo, bound_node: str) -> None:
        """Another scheduler bound ``pending``, whose schedulerName a shadow profile watches: its verdict,
        against the cache before that binding (``shadow``)."""
        framework = self.profiles.get(pending.scheduler_name)
        if framework is None or not self._shadows(framework):
            return
        decision = judge_shadow(self, framework, pending, bound_node)
        if decision is None:
            return
        if decision.result != SHADOW_SAME:
            log.info("%s", decision.describe())
        for hook in self.shadow_hooks:
            hook(decision)

    # -- nodes -----------------------------------------------------------------------------------------
    def add_node(self, node: Mapping[str, Any]) -> None:
        self.update_node(node)

    def update_node(self, node: Mapping[str, Any]) -> None:
        current = self.cache.node_info(str((node.get("metadata") or {}).get("name") or ""))
        if current is not None and current.node is not None and _same_version(current.node, node):
            return  # a re-list's copy of what is held (the watch's first list after ours): nothing changed
        try:
            old, new = self.cache.update_node(slim(node))
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
            return PodInfo(slim(raw))
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
                    parsed = known.confirmed(slim(raw))  # our binding confirmed: read once already
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
        if not self.responsible_for(pod) or pod.deletion_timestamp:
            self.queue.delete(pod)
            if pod.deletion_timestamp:
                self._unserved.pop(pod.uid, None)
            else:
                self._unserved[pod.uid] = pod
            return
        if self.cache.is_assumed(pod.uid):
            return  # being bound by us; the assigned version will arrive
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
        removed = self.cache.remove_pod(pod)
        if removed is not None:
            self.queue.assigned_pod_deleted(removed)
        self.queue.delete(pod)
        for framework in self.profiles.values():
            waiting = framework.waiting_pods.get(pod.uid)
            if waiting is not None:
                waiting.reject("", "removed")  # RejectWaitingPod's words

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
        self.queue.move_all_to_active_or_backoff(OBJECT_EVENTS[kind.resource, action], old, new)

    def delete_object(self, kind: ObjectKind[Any], namespace: str, name: str) -> None:
        old = self.objects.store(kind).delete(namespace, name)
        if old is not None:
            self.queue.move_all_to_active_or_backoff(OBJECT_EVENTS[kind.resource, Action.DELETE], old, None)

    # -- the loop --------------------------------------------------------------------------------------
    def schedule_one(self, qp: QueuedPodInfo) -> None:
        """One pod's scheduling cycle, run eagerly; a profile with extenders needs ``schedule_one_async``."""
        framework = self.profiles.get(qp.pod.scheduler_name)
        if framework is None or qp.pod.deletion_timestamp:
            if framework is None and not qp.pod.deletion_timestamp:
                self._unserved[qp.pod.uid] = qp.pod  # its profile went away while it was queued
            self.queue.done(qp.pod.uid)
            return
        if framework.extenders:
            raise RuntimeError(f"profile {framework.profile_name!r} has extenders: use schedule_one_async")
        self._start_binding(run_eagerly(scheduling_cycle(self, framework, qp, now())))

    async def schedule_one_async(self, qp: QueuedPodInfo) -> None:
        """One pod's scheduling cycle; for a profile with extenders, replayed with the extenders' answers
        (``framework.extenders.replay``): the calls it still needs are made in the background and the pod
        is tried again when they are answered, while the loop goes on with other pods. One pod of the
        profiles with extenders waits at a time; the others popped meanwhile wait behind it in order."""
        framework = self.profiles.get(qp.pod.scheduler_name)
        uid = qp.pod.uid
        if framework is None or not framework.extenders or qp.pod.deletion_timestamp:
            if self._replays or self._extender_wait is not None:  # none at all without extenders
                self._end_extender_wait(uid)
            self.schedule_one(qp)
            return
        if self._extender_wait is not None and self._extender_wait != uid:
            self._behind_extender_wait.append(qp)
            return
        replay = self._replays.get(uid)
        if replay is None:
            replay = self._replays[uid] = Replay(now(), self.next_start_node_index)
        while True:
            token = CURRENT.set(replay)
            binding: Any = None
            calls: list[PendingCall] = []
            # every try of the attempt filters from the same start node, so that it asks the same
            # nodes; one that ends waiting leaves the rotation where it was
            rotation, self.next_start_node_index = self.next_start_node_index, replay.start_node_index
            try:
                binding = run_eagerly(scheduling_cycle(self, framework, qp, replay.started))
            except ExtenderCallNeeded as needed:
                calls = needed.calls
                self.next_start_node_index = rotation
            finally:
                CURRENT.reset(token)
            if not calls:
                break
            replay.rounds += 1
            # the cluster changing under each try could keep changing what it asks: after a few
            # rounds the attempt waits for its answers in the cycle, as upstream always does
            if not self.wait_for_extenders and replay.rounds <= MAX_REPLAY_ROUNDS:
                self._extender_wait = uid
                self._start_binding(self._call_extenders(qp, replay, calls))
                return
            try:
                await asyncio.gather(*(replay.fetch(call) for call in calls))
            except asyncio.CancelledError:
                self._give_back(qp)
                raise
        self._end_extender_wait(uid)
        self._start_binding(binding)

    def _end_extender_wait(self, uid: str) -> None:
        """The attempt of ``uid`` no longer waits on extenders: the pods behind it go next, in order."""
        self._replays.pop(uid, None)
        if self._extender_wait == uid:
            self._extender_wait = None
            while self._behind_extender_wait:
                self.queue.resume(self._behind_extender_wait.popleft())

    async def _call_extenders(self, qp: QueuedPodInfo, replay: Replay, calls: list[PendingCall]) -> None:
        """Makes a replayed cycle's extender calls, then hands the pod back to the loop. Cancelled (the
        Lease lost, a stop): the pod goes back to the queue with backoff, nothing was assumed."""
        try:
            await asyncio.gather(*(replay.fetch(call) for call in calls))
        except asyncio.CancelledError:
            self._give_back(qp)
            raise
        self.queue.resume(qp)

    def _give_back(self, qp: QueuedPodInfo) -> None:
        """Stopped while its extender calls were in flight (before anything was assumed): the pod goes
        back to the queue, to be tried again with backoff."""
        self._end_extender_wait(qp.pod.uid)
        qp.unschedulable_plugins, qp.pending_plugins = set(), set()
        qp.last_failure_was_error = True
        self.queue.add_unschedulable_if_not_present(qp)

    def _start_binding(self, binding: Any) -> None:
        if binding is not None:
            task = asyncio.ensure_future(binding)
            self._bindings.add(task)
            task.add_done_callback(self._bindings.discard)

    async def run(self) -> None:
        """Pops and schedules pods until the queue is closed."""
        while True:
            qp = await self.queue.pop()
            if qp is None:
                return
            try:
                await self.schedule_one_async(qp)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a bug costs this pod one attempt, not the loop
                log.exception("scheduling %s failed", qp.pod.key)
                qp.unschedulable_plugins, qp.pending_plugins = set(), set()
                qp.last_failure_was_error = True
                if self.queue.add_unschedulable_if_not_present(qp) is not None:
                    self.client.record_failure(
                        qp.pod, REASON_SCHEDULER_ERROR, f"scheduling failed: {e}", None
                    )
            await yield_to_intake()

    async def close_extenders(self) -> None:
        """Releases the extenders' HTTP connections."""
        await self.extender_transport.close()

    async def wait_for_bindings(self) -> None:
        while self._bindings:
            await asyncio.gather(*list(self._bindings), return_exceptions=True)

    async def finish_bindings(self, timeout: float) -> int:
        """Waits up to ``timeout`` seconds for the binding cycles in flight, then cancels the rest
        (``cancel_bindings``); returns how many were cancelled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._bindings and (left := deadline - loop.time()) > 0:
            await asyncio.wait(list(self._bindings), timeout=left)
        return await self.cancel_bindings()

    async def cancel_bindings(self) -> int:
        """Cancels every binding cycle in flight (and the API calls after a preemption) and waits for
        them to end; a pod not bound yet is unreserved and forgotten. Returns how many were cancelled."""
        tasks = list(self._bindings)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        return len(tasks)

    def in_flight_bindings(self) -> int:
        return len(self._bindings)

    def close(self) -> None:
        self.queue.close()
