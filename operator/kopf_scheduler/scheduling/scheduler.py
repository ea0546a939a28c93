"""The scheduler: owns the queue, the cache, the snapshot and one framework per profile, and runs the
scheduling loop (upstream's ``scheduler.go``); cluster events come in through ``event_handlers``.

Profiles can be replaced between cycles: a cycle in flight finishes with the framework it started with,
and pods the old profile left unschedulable are requeued.

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
from collections.abc import Callable
from typing import Any

from kopf_scheduler.api.extenders import ignored_resources
from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.api.profile import PluginSet, ProfileSpec
from kopf_scheduler.backend.cache import Cache, Snapshot
from kopf_scheduler.backend.objects import ClusterObjects
from kopf_scheduler.backend.objects.members import GroupMembersIndex
from kopf_scheduler.backend.queue import SchedulingQueue
from kopf_scheduler.backend.queue.pod_groups import QueuedPodGroupInfo
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.disruption_budgets import DisruptionBudgets
from kopf_scheduler.framework.eager import run_eagerly
from kopf_scheduler.framework.events import EVENT_FORCE_ACTIVATE
from kopf_scheduler.framework.extenders import ExtenderTransport
from kopf_scheduler.framework.extenders.replay import (
    CURRENT,
    MAX_REPLAY_ROUNDS,
    ExtenderCallNeeded,
    PendingCall,
    Replay,
)
from kopf_scheduler.framework.objects import WATCHED_KINDS
from kopf_scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.framework.runtime.framework import Framework, profile_replaced_message
from kopf_scheduler.framework.runtime.recorder import Recorder
from kopf_scheduler.framework.runtime.registry import Registry
from kopf_scheduler.framework.status import Code, Status
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.names import NODE_RESOURCES_FIT, PRIORITY_SORT
from kopf_scheduler.plugins.priority_sort import PrioritySort
from kopf_scheduler.plugins.registry import new_registry
from kopf_scheduler.scheduling.context import Explains
from kopf_scheduler.scheduling.event_handlers import EventHandlers
from kopf_scheduler.scheduling.explain import Explainer, Sink
from kopf_scheduler.scheduling.schedule_one import REASON_SCHEDULER_ERROR, now, scheduling_cycle
from kopf_scheduler.scheduling.schedule_pod_group import schedule_pod_group
from kopf_scheduler.scheduling.shadow import SAME as SHADOW_SAME
from kopf_scheduler.scheduling.shadow import ShadowDecision
from kopf_scheduler.scheduling.shadow import judge as judge_shadow

log = logging.getLogger("kopf_scheduler")

#: served by the built-in default profile when no SchedulingProfile claims them.
DEFAULT_SCHEDULER_NAMES = ("default-scheduler", "kopf-scheduler")


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


class Scheduler(EventHandlers):
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
        #: extension-point timings and attempts' outcomes, for whoever subscribes (the metrics)
        self.recorder = Recorder()
        self.queue = SchedulingQueue(
            PrioritySort(),
            self.profiles.get,
            self.clock,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
            recorder=self.recorder,
        )
        self.next_start_node_index = 0
        self.binding_conflicts = 0
        #: explanations of each decision, when asked for (``simulate --explain``)
        self.explainer: Explains | None = Explainer(self, explain) if explain is not None else None
        self._bindings: set[asyncio.Task[None]] = set()
        #: extender answers recorded for the attempts of pods in flight (``schedule_one_async``)
        self._replays: dict[str, Replay] = {}
        #: per profile with extenders: the pod whose attempt waits on extender calls, and the pods of
        #: that profile popped meanwhile, in order behind it
        self._extender_wait: dict[str, str] = {}
        self._behind_extender_wait: dict[str, collections.deque[QueuedPodInfo]] = {}
        #: await extender calls in the cycle instead (``simulate``: one pod after the other, as upstream)
        self.wait_for_extenders = False
        #: pending pods whose schedulerName no profile serves (yet): queued when a profile claims it
        self._unserved: dict[str, PodInfo] = {}
        #: every profile is a shadow (``kopf-scheduler run --shadow``): nothing is bound
        self.shadow_all = False
        #: the verdicts of shadow profiles on other schedulers' bindings (``shadow``)
        self.shadow_hooks: list[Callable[[ShadowDecision], None]] = []
        #: the HTTP client every profile's scheduler extenders share (``close_extenders`` releases it)
        self.extender_transport = ExtenderTransport()
        #: the feature gates every profile's plugins see (the service resolves them before building any)
        self.feature_gates: FeatureGates = DEFAULT_GATES

    def use_pod_groups(self, enabled: bool) -> None:
        """GenericWorkload: the Workload API's pod groups are kept (the cache's pod group states) and
        queued and scheduled as groups; off, their pods are scheduled one by one as any other."""
        self.cache.pod_groups_enabled = enabled
        self.queue.pod_groups_enabled = enabled

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
            feature_gates=self.feature_gates,
        )
        framework.rng = self.rng
        framework.disruption_budgets = self.disruption_budgets
        framework.pod_known = self.pod_known
        framework.group_members = self.group_members
        framework.pod_groups = self.cache.pod_groups
        framework.activate_pods = self.queue.activate
        framework.recorder = self.recorder
        return framework

    def set_profile(self, spec: ProfileSpec) -> Framework:
        """Serves ``spec.scheduler_name`` with this profile from the next cycle on."""
        framework = self.build_profile(spec)
        self.install(framework)
        return framework

    def install(self, framework: Framework) -> None:
        """Serves ``framework.profile_name`` with ``framework``; pods the previous version left
        unschedulable are retried, pods nobody served until now are queued. Pods waiting at Permit in
        the previous version are rejected together: a gang is then placed as a whole by this one."""
        name = framework.profile_name
        previous = self.profiles.get(name)
        self.profiles[name] = framework
        if previous is not None and previous is not framework:
            previous.reject_waiting_pods(profile_replaced_message(name, framework.generation))
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

    # -- the loop --------------------------------------------------------------------------------------
    def schedule_one(self, qp: QueuedPodInfo) -> None:
        """One pod's scheduling cycle, run eagerly; a profile with extenders needs ``schedule_one_async``.
        A pod group's members (GenericWorkload) go through one pod group cycle (``schedule_pod_group``)."""
        if isinstance(qp, QueuedPodGroupInfo):
            for coroutine in run_eagerly(schedule_pod_group(self, self.profiles.get, qp)):
                self._start_binding(coroutine)
            return
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
        is tried again when they are answered, while the loop goes on with other pods. Per profile one
        pod waits at a time; that profile's pods popped meanwhile wait behind it in order, and other
        profiles are not held. An attempt whose extender calls do not settle within
        ``MAX_REPLAY_ROUNDS`` rounds (the cluster kept changing what it asks) fails with an error and
        backoff: the loop never waits for an extender itself."""
        if isinstance(qp, QueuedPodGroupInfo):  # with extenders, its cycle awaits them in the loop
            for coroutine in await schedule_pod_group(self, self.profiles.get, qp):
                self._start_binding(coroutine)
            return
        framework = self.profiles.get(qp.pod.scheduler_name)
        uid = qp.pod.uid
        if framework is None or not framework.extenders or qp.pod.deletion_timestamp:
            if self._replays or self._extender_wait:  # none at all without extenders
                self._end_extender_wait(uid)
            self.schedule_one(qp)
            return
        profile = framework.profile_name
        waiting = self._extender_wait.get(profile)
        if waiting is not None and waiting != uid:
            self._behind_extender_wait.setdefault(profile, collections.deque()).append(qp)
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
            except BaseException:
                self.next_start_node_index = rotation
                raise
            finally:
                CURRENT.reset(token)
            if not calls:
                break
            replay.rounds += 1
            if self.wait_for_extenders:  # ``simulate``: one pod after the other, as upstream decides
                try:
                    await asyncio.gather(*(replay.fetch(call) for call in calls))
                except asyncio.CancelledError:
                    self._give_back(qp)
                    raise
                continue
            if replay.rounds > MAX_REPLAY_ROUNDS:
                self._end_extender_wait(uid)
                self.fail_attempt(
                    qp,
                    f"scheduling failed: the extenders' answers did not settle in {MAX_REPLAY_ROUNDS} "
                    "rounds (the cluster kept changing what the cycle asks them)",
                )
                return
            self._extender_wait[profile] = uid
            self._start_binding(self._call_extenders(qp, replay, calls))
            return
        self._end_extender_wait(uid)
        self._start_binding(binding)

    def _end_extender_wait(self, uid: str) -> None:
        """The attempt of ``uid`` no longer waits on extenders: the pods of its profile behind it go
        next, in order."""
        self._replays.pop(uid, None)
        for profile, waiting in list(self._extender_wait.items()):
            if waiting == uid:
                del self._extender_wait[profile]
                behind = self._behind_extender_wait.pop(profile, collections.deque())
                while behind:
                    self.queue.resume(behind.popleft())

    def fail_attempt(self, qp: QueuedPodInfo, message: str) -> None:
        """Ends ``qp``'s attempt as an error: backoff, and a ``FailedScheduling`` event saying why (to each
        member of a pod group)."""
        if isinstance(qp, QueuedPodGroupInfo):
            for member in qp.members:
                self.fail_attempt(member, message)
            self.queue.add_attempted_pod_group_if_needed(qp, Status(Code.ERROR, (message,)))
            return
        qp.unschedulable_plugins, qp.pending_plugins = set(), set()
        qp.last_failure_was_error = True
        if self.queue.add_unschedulable_if_not_present(qp) is not None:
            self.client.record_failure(qp.pod, REASON_SCHEDULER_ERROR, message, None)

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
                # nothing of the attempt is left behind: the pods of its profile queued behind its
                # extender wait go next
                self._end_extender_wait(qp.pod.uid)
                self.fail_attempt(qp, f"scheduling failed: {e}")
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
