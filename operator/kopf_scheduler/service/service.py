"""The scheduler as a service in a cluster: connects to the API server, fills the cache from the initial
lists, serves SchedulingProfiles, exports metrics, and runs the scheduling loop while it holds the
leader Lease. Kopf's handlers (``handlers/``) only forward watch events here.

Guards: no scheduling decision before the initial lists of nodes and pods are in the cache; the loop runs
only while this instance leads (a standby keeps its cache warm and takes over when the Lease expires).
Losing the Lease stops the loop and cancels every write in flight, then the process exits (code 1); no
binding, preemption or pod status write is sent without the Lease (``k8s.fence``). A graceful stop lets
the bindings in flight finish (bounded by ``stop_timeout``) before the Lease is released. A background
task that dies stops the operator too (``supervision``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.feature_gates import FeatureGateError
from kopf_scheduler.api.schema import GROUP, KIND, PLURAL, VERSION
from kopf_scheduler.framework import pod_requests
from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import (
    POD_GROUPS,
    ObjectKind,
    ObjectParseError,
    object_key,
    watched_kinds,
)
from kopf_scheduler.k8s import KubeClient, LeaderElector, LeadershipLost, RestClient, load_connection
from kopf_scheduler.k8s.leader_thread import LeaderThread
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service import zpages
from kopf_scheduler.service.binding_confirmation import BindingConfirmation
from kopf_scheduler.service.config import ServiceConfig
from kopf_scheduler.service.config_file import load_profiles
from kopf_scheduler.service.feature_gates import resolve_feature_gates
from kopf_scheduler.service.gc_freeze import HeapSettler, collector_paused
from kopf_scheduler.service.intake_link import NODES, PDBS, PODS, channel
from kopf_scheduler.service.malloc_trim import MallocTrim
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.service.podgroup_status import PodGroupStatusKeeper
from kopf_scheduler.service.profiles import ProfileManager
from kopf_scheduler.service.resync import Resync
from kopf_scheduler.service.secure_port import MetricsServer, ServingError
from kopf_scheduler.service.supervision import Supervisor

log = logging.getLogger("kopf_scheduler")

#: objects of the initial lists taken in between two turns of the event loop
LIST_TURN = 100
#: objects per page of the initial lists of nodes and pods. At 150,000 pods, pages of 500 kept the
#: scheduler waiting for kube-apiserver v1.37.2 through 9.6 s of its 29 s of lists; the same pods, listed
#: and decoded alone, took 13.5-19.5 s in pages of 500 and 11.1 s in pages of 5,000. A page is about 7 MB
#: of JSON.
START_PAGE = 5000
#: the resync's listing: objects per page and seconds between pages (a page decodes in about a
#: millisecond; 6,000 pods and 5,000 nodes take 2-3 s, spread so that pods arriving meanwhile go through)
RESYNC_PAGE = 100
RESYNC_PAUSE = 0.02


class SchedulerService:
    def __init__(
        self,
        config: ServiceConfig,
        *,
        client: KubeClient | None = None,
        supervisor: Supervisor | None = None,
        lease_rest: Callable[[], RestClient] | None = None,
        review_rest: Callable[[], RestClient] | None = None,
    ) -> None:
        """``lease_rest``: builds the API client of leader election, which runs on a thread of its own
        (``k8s.leader_thread``); ``review_rest``: the client of the metrics server's TokenReviews and
        SubjectAccessReviews (its own thread too); default: another connection with the same credentials."""
        self.config = config
        self.client = client or KubeClient(
            load_connection(config.kubeconfig), bind_concurrency=config.bind_concurrency
        )
        self._lease_rest = lease_rest or (lambda: RestClient(self.client.rest.info, connections=2))
        self._review_rest = review_rest or (
            lambda: RestClient(self.client.rest.info, connections=4, timeout=5.0)
        )
        self.metrics_server: MetricsServer | None = None
        #: watches the background tasks; a failure stops the operator (``supervision``)
        self.supervisor = supervisor or Supervisor()
        self.scheduler = Scheduler(
            self.client,
            percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
            initial_backoff=config.initial_backoff,
            max_backoff=config.max_backoff,
            confirm_timeout=max(0.0, config.confirm_timeout),
        )
        self.confirmation = BindingConfirmation(
            self.scheduler,
            lambda pod: self.client.get("v1/pods", pod.name, namespace=pod.namespace),
            interval=min(5.0, max(0.5, config.confirm_timeout / 2)),
        )
        self.client.scheduler_name_for = lambda pod: pod.scheduler_name
        if config.shadow:  # judges, never writes: no Lease, no profile status, every pod write fenced off
            self.config.leader_elect = False
            self.scheduler.shadow_all = True
            self.client.fence = lambda: False
        self.client.supervise(lambda task: self.supervisor.watch(task))
        self.metrics = SchedulerMetrics()
        self.metrics.attach(self.scheduler)
        self.metrics.attach_operator(
            leading=lambda: self.leading.is_set(),
            profiles=lambda: self.profiles.accepted_counts(),
            binds=lambda: self.client.stats.binds,
        )
        self.profiles = ProfileManager(
            self.scheduler,
            self._write_profile_status,
            config.default_scheduler_name,
            config.profile_bounds,
            warn=self._warn_profile,
        )
        self.synced = asyncio.Event()
        #: the resourceVersion of each start-up list, by the channel of its watch (``intake_link``): the
        #: watches go on from these instead of listing everything once more (``handlers.resume``)
        self.listed_at: dict[str, str] = {}
        self.leading = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self.heap = HeapSettler()
        self.heap.watch = lambda task: self.supervisor.watch(task)
        # the C allocator's free pages go back (a credential reload left a few MiB of them resident)
        self.trim = MallocTrim()
        # small pages: decoding one is a short pause of the loop, not a long one
        self.resync = Resync(
            self.scheduler,
            lambda path: self.client.list_metadata(path, page_size=RESYNC_PAGE, pause=RESYNC_PAUSE),
            forget_pod=self.pod_deleted,
            forget_node=self.node_deleted,
            forget_object=self.object_deleted,
        )
        self.resync.after_listing.watch = lambda task: self.supervisor.watch(task, forever=False)
        self.podgroups = PodGroupStatusKeeper(
            self.scheduler, self._write_pod_group_status, active=self.leading.is_set
        )
        self.podgroups.watch = lambda task: self.supervisor.watch(task, forever=False)
        self.scheduler.group_members.on_change = self.podgroups.touch
        self._loop_task: asyncio.Task[None] | None = None
        self._leader_task: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------------------
    async def start(self, watch: Callable[[], Awaitable[None]] | None = None) -> None:
        """Serves metrics and /readyz, loads the initial lists, starts the watches (``watch``, when they
        are not Kopf's in this process), then campaigns for the Lease (or leads at once without leader
        election). A metrics port in use, or a feature gate refused, is a failure (the operator stops)."""
        try:
            self.scheduler.feature_gates = await resolve_feature_gates(
                self.config.feature_gates,
                self.config.emulated_version,
                lambda: self.client.get_object("/version"),
            )
        except FeatureGateError as e:
            self.supervisor.fail(str(e))
            return
        # kinds behind a gate that is off are neither listed nor watched (DeviceTaintRules, PodGroups)
        self.scheduler.objects.feed_only(watched_kinds(self.scheduler.feature_gates.enabled))
        # GenericWorkload: the Workload API's gangs kept, queued and scheduled as groups
        self.scheduler.use_pod_groups(self.scheduler.feature_gates.enabled("GenericWorkload"))
        # kube-scheduler's default plugin set depends on the gates (NodeDeclaredFeatures joins with its own)
        self.scheduler.defaults = default_plugins(self.scheduler.feature_gates)
        # pods' requests with status (InPlacePodLevelResourcesVerticalScaling), read from here on
        pod_requests.use_feature_gates(self.scheduler.feature_gates)
        # the metrics upstream registers only with their gate on (GenericWorkload's, binding conditions')
        self.metrics.register_gated(self.scheduler.feature_gates.enabled)
        if self.config.metrics.port:
            try:
                server = MetricsServer(
                    self.config.metrics,
                    self.metrics.registry,
                    ready=self.readiness,
                    make_rest=self._review_rest,
                    live=self.liveness,
                    pages=zpages.pages_for(self.scheduler.feature_gates),
                )
                server.start()
            except ServingError as e:
                self.supervisor.fail(str(e))
                return
            self.metrics_server = server
        try:
            if self.config.config_file:  # checked by ``run``; read here as the gates now stand
                self.profiles.file_profiles = load_profiles(
                    self.config.config_file, self.config.profile_bounds, set(self.scheduler.registry.names())
                )
            await self.profiles.reconcile()
        except (ProfileError, UsageError) as e:
            if not self.config.config_file:
                raise
            self.supervisor.fail(f"--config {self.config.config_file}: {e}")
            return
        await self._initial_sync()
        if watch is not None:
            await watch()
        flush = asyncio.create_task(self.scheduler.queue.run(), name="queue-flush")
        self._tasks.append(self.supervisor.watch(flush))
        if self.config.confirm_timeout > 0:
            confirm = asyncio.create_task(self.confirmation.run(), name="binding-confirmation")
            self._tasks.append(self.supervisor.watch(confirm))
        if self.config.leader_elect:
            config = self.config
            elector = LeaderThread(
                self._lease_rest,
                lambda rest: LeaderElector(
                    rest,
                    namespace=config.lease_namespace,
                    name=config.lease_name,
                    identity=config.identity,
                    lease_duration=config.lease_duration,
                    renew_deadline=config.renew_deadline,
                    retry_period=config.retry_period,
                ),
            )
            # every binding, preemption and pod status write checks the Lease first (``k8s.fence``)
            self.client.fence = lambda: elector.is_leader
            self._leader_task = asyncio.create_task(self._lead(elector), name="leader-election")
            self.supervisor.watch(self._leader_task)
        else:
            await self._started_leading()

    async def _initial_sync(self) -> None:
        """Lists profiles, PDBs, the other watched kinds, nodes and pods before the first decision (watch
        events then only update)."""
        await self.profiles.load(await self.client.list_objects(f"/apis/{GROUP}/{VERSION}/{PLURAL}"))
        for pdb in await self.client.list_objects(
            "/apis/policy/v1/poddisruptionbudgets", at_version=self._listed(PDBS)
        ):
            self.scheduler.update_pdb(pdb)
        for kind in self.scheduler.objects.kinds:
            for obj in await self._list_kind(kind):
                self.scheduler.update_object(kind, obj)
        with collector_paused():  # what the lists make lives on: frozen once in (``HeapSettler``)
            nodes, pods = await self._list_nodes_and_pods()
        serving = self.profiles.serving()
        log.info("initial lists: %d nodes, %d pods, profiles serving %s", nodes, pods, serving)
        # the first snapshot copies every node: made now, not in the first pod's cycle
        self.scheduler.cache.update_snapshot(self.scheduler.snapshot)
        self.heap.start(collect=False)  # the lists were loaded and frozen without garbage to collect
        self.trim.start()
        self.synced.set()

    async def _list_nodes_and_pods(self) -> tuple[int, int]:
        """Nodes, then pods, into the scheduler; how many of each. A page at a time: the scheduler keeps
        them without their managed fields, so the lists as sent (most of their size) are never all held
        at once. The next page is on its way meanwhile (``list_pages``); a turn of the event loop every
        ``LIST_TURN`` objects reads what has arrived of it, so the API server is not held up by a full
        socket while a page is taken in."""
        counts = []
        for path, name, add in (
            ("/api/v1/nodes", NODES, self.scheduler.add_node),
            ("/api/v1/pods", PODS, self.scheduler.add_pod),
        ):
            count = 0
            async for page in self.client.list_pages(
                path, page_size=START_PAGE, at_version=self._listed(name)
            ):
                for start in range(0, len(page), LIST_TURN):
                    for obj in page[start : start + LIST_TURN]:
                        add(obj)
                    await asyncio.sleep(0)
                count += len(page)
            counts.append(count)
        return counts[0], counts[1]

    def _listed(self, name: str) -> Callable[[str], None]:
        """Keeps the resourceVersion of the start-up list of channel ``name`` (none when it has none)."""

        def keep(version: str) -> None:
            if version:
                self.listed_at[name] = version

        return keep

    async def _list_kind(self, kind: ObjectKind[Any]) -> list[dict[str, Any]]:
        """The objects of ``kind``; none when the API server does not serve it (a CRD not applied)."""
        try:
            return await self.client.list_objects(kind.list_path, at_version=self._listed(channel(kind)))
        except APIError as e:
            if e.status != 404:
                raise
            log.warning("the API server does not serve %s (is its CRD applied?): none known", kind.list_path)
            return []

    async def _lead(self, elector: LeaderThread) -> None:
        """Waits for the Lease and leads; losing it ends the process (exit code 1), as kube-scheduler does:
        the writes in flight were cancelled by ``_stopped_leading`` and a restart campaigns afresh."""
        try:
            await elector.run(self._started_leading, self._stopped_leading)
        except LeadershipLost as e:
            self.supervisor.release(asyncio.current_task())  # reported here, not as a task ending
            self.supervisor.fail(f"leader election: lost the lease as {self.config.identity} ({e})")

    async def _started_leading(self) -> None:
        log.info("leading as %s: scheduling starts", self.config.identity)
        self.leading.set()
        self._loop_task = asyncio.create_task(self.scheduler.run(), name="scheduling-loop")
        self.supervisor.watch(self._loop_task)
        self.podgroups.touch_all()  # a standby kept no PodGroup status current

    async def _stopped_leading(self) -> None:
        """Leading ended (the Lease lost, or a stop cancelled the elector), before the Lease is released:
        the loop stops and every write still in flight (bindings, preemption) is cancelled, its pod
        forgotten. After a graceful stop the bindings have finished already (``stop``)."""
        # Also called for a standby that never led, and after ``stop`` stopped the loop: only a leader
        # that still believes it leads has lost the lease.
        if self.leading.is_set():
            log.warning("lost the lease as %s: scheduling stops", self.config.identity)
        await self._stop_loop()
        cancelled = await self.scheduler.cancel_bindings()
        if cancelled:
            log.warning(
                "cancelled %d bindings and preemptions in flight: their pods are forgotten", cancelled
            )

    async def _stop_loop(self) -> None:
        self.leading.clear()
        if self._loop_task is not None:
            self.supervisor.release(self._loop_task)
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._loop_task
            self._loop_task = None

    async def stop(self) -> None:
        """Graceful stop: the loop stops, the bindings in flight finish (for at most ``stop_timeout``
        seconds, then they are cancelled), and only then is the Lease released, so a standby never leads
        while this instance still binds."""
        self.supervisor.stopping = True
        if self.leading.is_set():
            log.info("stopping as %s: scheduling stops, the lease is released", self.config.identity)
        await self._stop_loop()
        self.scheduler.close()
        cancelled = await self.scheduler.finish_bindings(self.config.stop_timeout)
        if cancelled:
            log.warning(
                "%d bindings still in flight after %s s: cancelled, their pods forgotten",
                cancelled,
                self.config.stop_timeout,
            )
        if self._leader_task is not None:  # releases the Lease
            self._leader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._leader_task
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.resync.stop()  # before the client closes: it may be listing
        await self.podgroups.stop()
        await self.scheduler.close_extenders()
        await self.client.close()
        await self.heap.stop()
        await self.trim.stop()
        if self.metrics_server is not None:
            await asyncio.to_thread(self.metrics_server.stop)

    def liveness(self) -> tuple[bool, str]:
        """Alive until a background task failed (the secure port's /healthz and /livez). Called from the
        metrics server's thread: reads only."""
        return self.supervisor.healthy, self.supervisor.failure

    def readiness(self) -> tuple[bool, str]:
        """Ready when the initial lists are loaded and this instance leads or stands by (campaigns for
        the Lease), and no background task failed. Called from the metrics server's thread: reads only."""
        if not self.supervisor.healthy:
            return False, self.supervisor.failure
        if not self.synced.is_set():
            return False, "initial lists not loaded yet"
        if self.leading.is_set():
            return True, "leading"
        if self._leader_task is not None and not self._leader_task.done():
            return True, "standing by"
        return False, "neither leading nor campaigning for the lease"

    # -- watch events (from the handlers) --------------------------------------------------------------
    # ``kind`` None: the object comes from a (re-)listing of the watch, which ``resync`` follows up on.
    def node_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if kind == "DELETED":
            self.node_deleted(name)
        else:
            self.resync.node_seen(name, listed=kind is None)
            self.scheduler.update_node(obj)

    def node_deleted(self, name: str) -> None:
        """A node that is gone, by its DELETED event or by the resync's list."""
        self.resync.node_gone(name)
        self.scheduler.delete_node(name)

    def pod_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self.pod_deleted(obj)
        else:
            self.resync.pod_seen(str((obj.get("metadata") or {}).get("uid") or ""), listed=kind is None)
            self.scheduler.update_pod(None, obj)

    def pod_deleted(self, obj: Mapping[str, Any]) -> None:
        """A pod that is gone, by its DELETED event or by the resync's list: the scheduler, the resync and
        what the client kept to write about it (events, status) forget it."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        self.resync.pod_gone(uid)
        self.scheduler.delete_pod(obj)
        self.client.pod_deleted(uid)

    def object_event(self, kind: ObjectKind[Any], event: str | None, obj: Mapping[str, Any]) -> None:
        """A watch event of one of the other kinds the scheduler reads (``framework.objects``); one of a
        kind not fed (its gate off: only ``kopf run -m kopf_scheduler.handlers`` watches it) is ignored."""
        if kind not in self.scheduler.objects.kinds:
            return
        try:
            key = object_key(obj, kind.namespaced)
        except ObjectParseError as e:
            log.warning("ignoring a %s event: %s", kind, e)
            return
        if event == "DELETED":
            self.object_deleted(kind, key)
        else:
            self.resync.object_seen(kind, key, listed=event is None)
            self.scheduler.update_object(kind, obj)
            if kind is POD_GROUPS:
                self.podgroups.touch(key)

    def object_deleted(self, kind: ObjectKind[Any], key: tuple[str, str]) -> None:
        """An object of the other kinds that is gone, by its DELETED event or by the resync's list."""
        self.resync.object_gone(kind, key)
        self.scheduler.delete_object(kind, *key)

    def pdb_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        if kind == "DELETED":
            self.scheduler.delete_pdb(obj)
        else:
            self.scheduler.update_pdb(obj)

    async def profile_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        await self.profiles.on_event(kind, obj)

    async def _write_profile_status(self, name: str, status: dict[str, Any]) -> None:
        if self.config.shadow:
            return
        await self.client.patch_status(f"/apis/{GROUP}/{VERSION}/{PLURAL}/{name}", status)

    def _warn_profile(self, obj: Mapping[str, Any], reason: str, message: str) -> bool:
        """A refused SchedulingProfile's Warning event, from the leader only (one event, not one per
        replica)."""
        if self.config.shadow or not self.leading.is_set():
            return False
        self.client.record_warning(f"{GROUP}/{VERSION}", KIND, obj, reason, "Validating", message)
        return True

    async def _write_pod_group_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        if self.config.shadow:
            return
        await self.client.patch_status(POD_GROUPS.object_path(namespace, name), status)

    def health(self) -> dict[str, Any]:
        return {
            "healthy": self.supervisor.healthy,
            "failure": self.supervisor.failure,
            "synced": self.synced.is_set(),
            "leading": self.leading.is_set(),
            "profiles": self.profiles.serving(),
            "queue": self.scheduler.queue.counts(),
            "nodes": self.scheduler.cache.node_count(),
        }
