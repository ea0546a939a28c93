"""Forgetting what the watch never said was deleted.

A watch that starts over lists its objects again, but an object deleted while nobody watched is simply
absent from that list: no DELETED event ever comes, and the scheduler would keep a pod that no longer
exists (its requests still counted on its node), a node that is gone, or a Service whose selector still
spreads pods. (The watches begin where the scheduler's own start-up lists ended, ``handlers.resume``, so
no such gap opens at the start; where a watch could not resume, its first list is followed up here too.)
So, once a listing has been quiet for ``quiet`` seconds, the scheduler lists pods, nodes and every
other kind it watches itself, and drops every object it holds that is neither in that list nor heard of
since the list was asked for. It asks for metadata only, and keeps only names and uids of each page
(``Client.list_metadata``): listing a large cluster while pods arrive must not pause their scheduling.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.objects import ObjectKind, object_key
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.after_quiet import AfterQuiet

log = logging.getLogger(__name__)

#: seconds without listed objects before the listing counts as done
DEFAULT_QUIET = 10.0

ListObjects = Callable[[str], Awaitable[list[dict[str, Any]]]]


class Resync:
    def __init__(
        self,
        scheduler: Scheduler,
        list_objects: ListObjects,
        *,
        quiet: float = DEFAULT_QUIET,
        clock: Callable[[], float] = time.monotonic,
        forget_pod: Callable[[Mapping[str, Any]], object],
        forget_node: Callable[[str], object],
        forget_object: Callable[[ObjectKind[Any], tuple[str, str]], object],
    ) -> None:
        """``forget_pod``, ``forget_node``, ``forget_object``: what drops an object the list no longer
        has (a pod as last seen, a node by name, another kind by its key). The service passes its
        handling of a DELETED event, so both ways an object goes are one; that handling also tells this
        resync (``pod_gone``, ``node_gone``, ``object_gone``)."""
        self.scheduler = scheduler
        self.list_objects = list_objects
        self.forget_pod = forget_pod
        self.forget_node = forget_node
        self.forget_object = forget_object
        self.clock = clock
        #: the last time an event about each pod (by uid) and node (by name) was received
        self._pods_seen: dict[str, float] = {}
        self._nodes_seen: dict[str, float] = {}
        #: the same for the other kinds, by kind and (namespace, name)
        self._objects_seen: dict[ObjectKind[Any], dict[tuple[str, str], float]] = {}
        #: the reconciliation once a listing is quiet (its ``watch``: the operator's supervisor)
        self.after_listing = AfterQuiet(self._reconcile_quietly, quiet=quiet, clock=clock, name="resync")

    # -- what the watches report ------------------------------------------------------------------------
    def pod_seen(self, uid: str, listed: bool) -> None:
        self._pods_seen[uid] = self.clock()
        if listed:
            self.after_listing.signal()

    def pod_gone(self, uid: str) -> None:
        self._pods_seen.pop(uid, None)

    def node_seen(self, name: str, listed: bool) -> None:
        self._nodes_seen[name] = self.clock()
        if listed:
            self.after_listing.signal()

    def node_gone(self, name: str) -> None:
        self._nodes_seen.pop(name, None)

    def object_seen(self, kind: ObjectKind[Any], key: tuple[str, str], listed: bool) -> None:
        self._objects_seen.setdefault(kind, {})[key] = self.clock()
        if listed:
            self.after_listing.signal()

    def object_gone(self, kind: ObjectKind[Any], key: tuple[str, str]) -> None:
        self._objects_seen.get(kind, {}).pop(key, None)

    async def _reconcile_quietly(self) -> None:
        try:
            await self.reconcile()
        except Exception as e:  # the next listing tries again; nothing is dropped on a failed list
            log.warning("resync after a watch listing failed: %s", e)

    # -- the reconciliation -----------------------------------------------------------------------------
    async def reconcile(self) -> tuple[int, int, int]:
        """Lists nodes, pods and the other watched kinds; drops the ones held but neither listed nor heard
        of since the list was asked for. Returns how many pods, nodes and other objects were dropped."""
        asked = self.clock()
        nodes = {str((n.get("metadata") or {}).get("name")) for n in await self.list_objects("/api/v1/nodes")}
        pods = {str((p.get("metadata") or {}).get("uid")) for p in await self.list_objects("/api/v1/pods")}
        gone_nodes = [
            name
            for name in self.scheduler.cache.node_names()
            if name not in nodes and self._nodes_seen.get(name, -math.inf) < asked
        ]
        gone_pods = [
            pod
            for pod in self.scheduler.known_pods()
            if pod.uid not in pods and self._pods_seen.get(pod.uid, -math.inf) < asked
        ]
        for pod in gone_pods:
            self.forget_pod(pod.raw)
        for name in gone_nodes:
            self.forget_node(name)
        gone_objects = 0
        for kind in self.scheduler.objects.kinds:
            gone_objects += await self._reconcile_kind(kind, asked)
        if gone_pods or gone_nodes or gone_objects:
            log.info(
                "resync: dropped %d pods, %d nodes, %d other objects deleted unwatched",
                len(gone_pods),
                len(gone_nodes),
                gone_objects,
            )
        return len(gone_pods), len(gone_nodes), gone_objects

    async def _reconcile_kind(self, kind: ObjectKind[Any], asked: float) -> int:
        listed = set()
        try:
            found = await self.list_objects(kind.list_path)
        except APIError as e:
            if e.status != 404:
                raise
            return 0  # not served (a CRD not applied): nothing of it is held either
        for raw in found:
            with contextlib.suppress(ValueError):  # unreadable: never stored, so nothing to keep
                listed.add(object_key(raw, kind.namespaced))
        seen = self._objects_seen.get(kind, {})
        gone = [
            key
            for key in self.scheduler.objects.store(kind).names()
            if key not in listed and seen.get(key, -math.inf) < asked
        ]
        for key in gone:
            self.forget_object(kind, key)
        return len(gone)

    async def stop(self) -> None:
        await self.after_listing.stop()
