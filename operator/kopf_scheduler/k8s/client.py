"""``KubeClient``: the scheduler's ``ClusterClient`` for a real API server, plus the few reads and
status writes the operator needs at start-up.

``bind``, ``evict`` and ``nominate`` are awaited by the scheduler; ``record_scheduled``,
``record_failure``, ``record_preempted_in_memory`` and ``clear_nominated_node_name`` only enqueue (the
background workers of ``event_recorder`` and ``pod_status`` send), so they never block a scheduling
cycle. They may be called from another thread
too: the work is then handed to the loop. Events name the pod's profile as their reporting controller
when ``scheduler_name_for`` is set (upstream: one recorder per profile, named after its schedulerName).
Everything starts lazily on first use inside the running loop; ``close`` flushes what is pending, with a
deadline.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from kopf_scheduler.framework.client import APIError, PreemptorGroup
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.binding import DEFAULT_CONCURRENCY, Binder
from kopf_scheduler.k8s.connection import ConnectionInfo, load_connection
from kopf_scheduler.k8s.event_recorder import DEFAULT_QUEUE_SIZE, EventRecorder
from kopf_scheduler.k8s.event_recorder import DEFAULT_WORKERS as DEFAULT_EVENT_WORKERS
from kopf_scheduler.k8s.event_series import (
    FLUSH_INTERVAL,
    NORMAL,
    WARNING,
    EventAggregator,
    ObjectRef,
    Occurrence,
    is_qualified_name,
    pod_ref,
)
from kopf_scheduler.k8s.eviction import preempt
from kopf_scheduler.k8s.fence import FencedRest
from kopf_scheduler.k8s.pod_status import PodStatusWriter
from kopf_scheduler.k8s.rest import (
    DEFAULT_TIMEOUT,
    JSON,
    MERGE_PATCH,
    PARTIAL_METADATA,
    STRATEGIC_MERGE_PATCH,
    RestClient,
    resource_path,
)
from kopf_scheduler.k8s.stats import ClientStats
from kopf_scheduler.k8s.timestamps import rfc3339
from kopf_scheduler.k8s.workers import DEFAULT_RETRY_DELAYS

#: what a metadata listing keeps of each object
METADATA_KEYS = ("name", "namespace", "uid")
REPORTING_CONTROLLER = "kopf-scheduler"
REASON_SCHEDULED = "Scheduled"
REASON_FAILED_SCHEDULING = "FailedScheduling"
ACTION_BINDING = "Binding"
ACTION_SCHEDULING = "Scheduling"
REASON_PREEMPTED = "Preempted"
ACTION_PREEMPTING = "Preempting"


def default_reporting_instance() -> str:
    """The pod's name (``$POD_NAME`` from the downward API, else the hostname, which is the pod name)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def parse_resource(resource: str) -> tuple[str, str]:
    """``"v1/pods"`` -> ``("v1", "pods")``; ``"kopf-scheduler.io/v1alpha1/schedulingprofiles"`` ->
    ``("kopf-scheduler.io/v1alpha1", "schedulingprofiles")``."""
    parts = resource.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "v1":
        return "v1", parts[1]
    if len(parts) == 3 and all(parts):
        return f"{parts[0]}/{parts[1]}", parts[2]
    raise ValueError(f"resource {resource!r}: expected 'v1/<plural>' or '<group>/<version>/<plural>'")


class KubeClient:
    def __init__(
        self,
        connection: ConnectionInfo | RestClient,
        *,
        bind_concurrency: int = DEFAULT_CONCURRENCY,
        request_timeout: float = DEFAULT_TIMEOUT,
        reporting_controller: str = REPORTING_CONTROLLER,
        reporting_instance: str | None = None,
        event_queue_size: int = DEFAULT_QUEUE_SIZE,
        event_workers: int = DEFAULT_EVENT_WORKERS,
        status_workers: int = 4,
        series_flush_interval: float = FLUSH_INTERVAL,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if isinstance(connection, ConnectionInfo):
            # room for every binding plus the event and status workers and a few reads
            connections = bind_concurrency + event_workers + status_workers + 8
            self.rest = RestClient(connection, connections=connections, timeout=request_timeout)
        else:  # a RestClient, or anything with its methods (a test's fake API server)
            self.rest = connection
        self.clock = clock if clock is not None else RealClock()
        #: whether the scheduler's writes may be sent now (the service sets the leader elector's
        #: ``is_leader``); None: always
        self.fence: Callable[[], bool] | None = None
        # bindings, preemption, pod status and the plugins' writes (volumes, claims) go through the
        # fence; events, the Lease and the operator's profile and PodGroup status do not (``k8s.fence``)
        self.writes = cast(RestClient, FencedRest(lambda: self.rest, self._may_write))
        self.binder = Binder(self.writes, concurrency=bind_concurrency)
        aggregator = EventAggregator(
            self.clock,
            reporting_controller,
            reporting_instance or default_reporting_instance(),
            flush_interval=series_flush_interval,
            wall=wall,
        )
        self.events = EventRecorder(
            self.rest, aggregator, self.clock, queue_size=event_queue_size, workers=event_workers,
            retry_delays=retry_delays,
        )  # fmt: skip
        self.pod_status = PodStatusWriter(
            self.writes, self.clock, workers=status_workers, retry_delays=retry_delays, wall=wall
        )
        self.wall = wall
        self.retry_delays = tuple(retry_delays)
        #: the profile (schedulerName) a pod is scheduled by: its events name it as reporting controller
        self.scheduler_name_for: Callable[[PodInfo], str] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def from_environment(
        cls, kubeconfig: str | Path | None = None, *, context: str | None = None, **options: Any
    ) -> KubeClient:
        """Connect as ``load_connection`` finds: a kubeconfig, ``$KUBECONFIG``, in-cluster, ``~/.kube``."""
        return cls(load_connection(kubeconfig, context=context), **options)

    @property
    def stats(self) -> ClientStats:
        return self.rest.stats

    @property
    def connection(self) -> ConnectionInfo:
        return self.rest.info

    # -- ClusterClient -------------------------------------------------------------------------------

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        self._loop = asyncio.get_running_loop()
        await self.binder.bind(pod, node_name)

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        self._in_loop(self._record_scheduled, pod, node_name)

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        self._in_loop(self._record_failure, pod, reason, message, nominated_node_name)

    async def nominate(self, pod: PodInfo, node_name: str) -> None:
        self._loop = asyncio.get_running_loop()
        await self.pod_status.nominate(pod, node_name)

    def record_preempted_in_memory(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        by = f"pod {preemptor.uid}" if group is None else f"podgroup {group.uid}"
        note = f"Preempted by {by} on node {node_name} (in kube-scheduler memory)."
        self._in_loop(self._record_preempted, victim, preemptor, note, group)

    def record_event(self, pod: PodInfo, kind: str, reason: str, action: str, note: str) -> None:
        """An event of a plugin about ``pod`` from its profile's recorder (DynamicResources' Normal
        ``BindingConditionsPending``, action ``Scheduling``)."""
        occurrence = Occurrence(
            pod_ref(pod), kind, reason, action, note, reporting_controller=self._controller_for(pod)
        )
        self._in_loop(self.events.record, occurrence)

    def _record_preempted(
        self, victim: PodInfo, preemptor: PodInfo, note: str, group: PreemptorGroup | None = None
    ) -> None:
        # kube-scheduler v1.37.2 names a preempting PodGroup as the related object, but not a preempting
        # pod: its recorder cannot make a reference of the pod's wrapper (podExecutorPreemptor, a type its
        # scheme does not know) and leaves ``related`` out
        related = None if group is None else _pod_group_ref(group)
        self.events.record(
            Occurrence(
                pod_ref(victim), NORMAL, REASON_PREEMPTED, ACTION_PREEMPTING, note,
                related=related, reporting_controller=self._controller_for(preemptor),
            )
        )  # fmt: skip

    async def evict(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        """``DisruptionTarget`` condition, DELETE, then the ``Preempted`` event (see ``eviction``)."""
        self._loop = asyncio.get_running_loop()
        kind = "pod" if group is None else "podgroup"
        if not await preempt(
            self.writes, victim, preemptor, self.clock, rfc3339(self.wall()), self.retry_delays, kind
        ):
            return  # already gone
        by = f"pod {preemptor.uid}" if group is None else f"podgroup {group.uid}"
        self._record_preempted(victim, preemptor, f"Preempted by {by} on node {node_name}", group)

    def pod_deleted(self, uid: str) -> None:
        """The pod ``uid`` is gone: what is kept to aggregate its events and to patch its status goes."""
        self.events.object_deleted(uid)
        self.pod_status.forget(uid)

    def clear_nominated_node_name(self, pod: PodInfo) -> None:
        self._in_loop(self.pod_status.clear_nominated_node_name, pod)

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT ``obj`` (without ``managedFields``: left out, the API server keeps its own) to ``path``;
        an ``APIError`` carries the API server's message as is."""
        self._loop = asyncio.get_running_loop()
        meta = obj.get("metadata")
        if isinstance(meta, Mapping) and "managedFields" in meta:
            obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
        response = await self.writes.request("PUT", path, obj)
        if response.status != 200:
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def patch_object(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        response = await self.writes.request("PATCH", path, patch, content_type=STRATEGIC_MERGE_PATCH)
        if response.status != 200:
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        response = await self.writes.request("POST", path, obj)
        if response.status not in (200, 201):
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def delete_object(self, path: str) -> None:
        self._loop = asyncio.get_running_loop()
        response = await self.writes.request("DELETE", path)
        if response.status not in (200, 202):
            raise APIError(response.status, response.message())

    def supervise(self, watch: Callable[[asyncio.Task[None]], object]) -> None:
        """Hand every background task of the event and status writers to ``watch`` as it starts."""
        self.events.pool.watch = watch
        self.pod_status.pool.watch = watch

    def _may_write(self) -> bool:
        return self.fence is None or self.fence()

    def _controller_for(self, pod: PodInfo) -> str:
        """The pod's profile name when known and valid as a reporting controller, else the default."""
        if self.scheduler_name_for is None:
            return ""
        name = self.scheduler_name_for(pod)
        return name if name and is_qualified_name(name) else ""

    def _record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        self.pod_status.forget(pod.uid)
        note = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        self.events.record(
            Occurrence(pod_ref(pod), NORMAL, REASON_SCHEDULED, ACTION_BINDING, note,
                       reporting_controller=self._controller_for(pod))
        )  # fmt: skip

    def _record_failure(self, pod: PodInfo, reason: str, message: str, nominated: str | None) -> None:
        self.events.record(
            Occurrence(pod_ref(pod), WARNING, REASON_FAILED_SCHEDULING, ACTION_SCHEDULING, message,
                       reporting_controller=self._controller_for(pod))
        )  # fmt: skip
        self.pod_status.record_failure(pod, reason, message, nominated)

    def record_warning(
        self, api_version: str, kind: str, obj: Mapping[str, Any], reason: str, action: str, note: str
    ) -> None:
        """A Warning event about ``obj`` (any kind: a refused SchedulingProfile), aggregated into a
        series and written as pods' events are; a cluster-scoped object's event lives in ``default``."""
        meta = obj.get("metadata") or {}
        regarding = ObjectRef(
            kind=kind,
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            api_version=api_version,
            resource_version=str(meta.get("resourceVersion") or ""),
        )
        self._in_loop(self.events.record, Occurrence(regarding, WARNING, reason, action, note))

    def _in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None:
            self._loop = running
        elif self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(fn, *args)  # called from another thread
            return
        fn(*args)

    # -- for the operator: start-up reads and the SchedulingProfile status ---------------------------

    async def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        """The object as JSON, or None when it does not exist; ``APIError`` otherwise."""
        group_version, plural = parse_resource(resource)
        return await self.get_object(resource_path(group_version, plural, name, namespace=namespace))

    async def get_object(self, path: str) -> dict[str, Any] | None:
        """``get`` by API path (``/api/v1/namespaces/ns/pods/p``)."""
        self._loop = asyncio.get_running_loop()
        response = await self.rest.request("GET", path)
        if response.status == 404:
            return None
        if response.status != 200:
            raise response.error_for(f"GET {path}")
        data = response.json()
        return data if isinstance(data, dict) else None

    async def list(
        self,
        resource: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> list[dict[str, Any]]:
        """Every object (following ``continue`` tokens), each with ``apiVersion`` and ``kind`` set."""
        group_version, plural = parse_resource(resource)
        path = resource_path(group_version, plural, namespace=namespace)
        return await self.list_objects(
            path, label_selector=label_selector, field_selector=field_selector, page_size=page_size
        )

    async def list_objects(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        at_version: Callable[[str], object] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """``list`` by collection path (``/api/v1/pods``, ``/apis/group/version/plural``); ``at_version``
        as for ``list_pages``."""
        items: builtins.list[dict[str, Any]] = []
        async for page in self.list_pages(
            path,
            label_selector=label_selector,
            field_selector=field_selector,
            page_size=page_size,
            at_version=at_version,
        ):
            items.extend(page)
        return items

    async def list_pages(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        accept: str = JSON,
        pause: float = 0.0,
        at_version: Callable[[str], object] | None = None,
    ) -> AsyncIterator[builtins.list[dict[str, Any]]]:
        """``list_objects`` a page at a time: a caller that keeps only what it needs of each object never
        holds the whole collection as the API server sent it (50,000 pods with their managed fields).
        ``accept``: the representation asked for (``PARTIAL_METADATA``: metadata only); ``pause``: seconds
        to wait between pages, so that a background listing spreads its cost (on the event loop and on the
        API server) instead of taking it all at once. ``at_version``: called once, before the first page is
        yielded, with the list's resourceVersion (every page of a list is of that one version), from which
        a watch goes on without a gap.

        Without ``pause``, the next page is asked for as soon as a page arrives, before the caller takes
        it: the API server encodes page k+1 while the caller works through page k (two processes, not one
        after the other). At most one request is ahead; a caller that stops early cancels it."""
        self._loop = asyncio.get_running_loop()
        params: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        ahead: asyncio.Task[Any] | None = None
        try:
            while True:
                if ahead is not None:
                    data, ahead = await ahead, None
                else:
                    data = await self.rest.get_json(path, params, accept=accept)
                api_version = str(data.get("apiVersion") or "")
                kind = str(data.get("kind") or "").removesuffix("List")
                items: builtins.list[dict[str, Any]] = data.get("items") or []
                for item in items:
                    item.setdefault("apiVersion", api_version)
                    item.setdefault("kind", kind)
                token = (data.get("metadata") or {}).get("continue")
                if at_version is not None:
                    at_version(str((data.get("metadata") or {}).get("resourceVersion") or ""))
                    at_version = None
                del data
                if token:
                    params = {**params, "continue": token}
                    if pause > 0:
                        yield items
                        await asyncio.sleep(pause)
                        continue
                    ahead = asyncio.ensure_future(self.rest.get_json(path, params, accept=accept))
                yield items
                if not token:
                    return
        finally:
            if ahead is not None and not ahead.done():
                ahead.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await ahead

    async def list_metadata(
        self, path: str, *, page_size: int = 500, pause: float = 0.0
    ) -> builtins.list[dict[str, Any]]:
        """The name, namespace and uid of every object of a collection, as ``{"metadata": {...}}``. The
        API server sends metadata only (``PartialObjectMetadataList``) and each page is cut down to those
        three before the next is asked for, so listing a large cluster leaves few objects alive: a list
        of every pod costs the event loop short pauses and gives the garbage collector little to walk.
        ``pause`` as for ``list_pages``."""
        out: builtins.list[dict[str, Any]] = []
        async for page in self.list_pages(path, page_size=page_size, accept=PARTIAL_METADATA, pause=pause):
            for item in page:
                meta = item.get("metadata") or {}
                out.append({"metadata": {k: meta[k] for k in METADATA_KEYS if k in meta}})
        return out

    async def patch_status(
        self,
        target: str,
        name_or_status: str | Mapping[str, Any],
        status: Mapping[str, Any] | None = None,
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """JSON-merge-patch the ``status`` subresource and return the updated object (custom resources
        accept no strategic merge, so a list such as ``conditions`` is replaced whole). Either
        ``patch_status("group/version/plural", name, status)`` or ``patch_status(object_path, status)``
        with ``object_path`` like ``/apis/group/version/plural/name``."""
        self._loop = asyncio.get_running_loop()
        if target.startswith("/"):
            if not isinstance(name_or_status, Mapping) or status is not None:
                raise TypeError("patch_status(object_path, status)")
            path, body = f"{target.rstrip('/')}/status", name_or_status
        else:
            if not isinstance(name_or_status, str) or status is None:
                raise TypeError("patch_status(resource, name, status)")
            group_version, plural = parse_resource(target)
            path = resource_path(
                group_version, plural, name_or_status, namespace=namespace, subresource="status"
            )
            body = status
        response = await self.rest.request("PATCH", path, {"status": dict(body)}, content_type=MERGE_PATCH)
        if response.status != 200:
            raise response.error_for(f"PATCH {path}")
        data = response.json()
        return data if isinstance(data, dict) else {}

    # -- lifecycle -----------------------------------------------------------------------------------

    async def close(self, timeout: float = 5.0) -> bool:
        """Send what is pending (events, series counts, status patches) within ``timeout`` seconds, then
        close the connections; True when nothing was left unsent."""
        deadline = time.monotonic() + timeout
        events_done = await self.events.close(timeout)
        status_done = await self.pod_status.close(max(0.0, deadline - time.monotonic()))
        await self.rest.close()
        return events_done and status_done

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _pod_group_ref(group: PreemptorGroup) -> ObjectRef:
    return ObjectRef(
        kind="PodGroup",
        namespace=group.namespace,
        name=group.name,
        uid=group.uid,
        api_version="scheduling.k8s.io/v1beta1",
    )
