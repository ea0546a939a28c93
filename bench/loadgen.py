"""The measured phase of a run: create the measured pods, watch them get bound, sample throughput.

One pod watch (all namespaces, from a resourceVersion taken just before the first measured pod is
created) gives every timestamp: a measured pod is *created* when its ADDED event arrives and *bound* at
the first event that shows ``spec.nodeName``; times are taken when the event's line is read, before it is
decoded. Latency is bound minus created. The throughput collector reads the count of bound pods every
second (see ``sampling``).

The same watch makes preemption work without a kubelet: a pod that gets a ``deletionTimestamp`` (a
victim deleted gracefully) is deleted again with grace period 0 at once, for every scheduler alike.

Pods are created either as fast as the API server takes them (``concurrency`` POSTs in flight) or at a
fixed rate (``rate`` pods per second). With a ``lifetime``, each measured pod is deleted (grace period 0)
that many seconds after it is seen bound, so a long run keeps a steady number of pods: the churn a
scheduler's cache and memory must survive. Every request the harness sends is counted by the key the API
server's ``apiserver_request_total`` uses, so it can be subtracted from the server's count.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from bench.apimetrics import Key
from bench.objects import RETRIABLE
from bench.sampling import SAMPLE_INTERVAL, ThroughputCollector
from kopf_scheduler.devcluster import ApiClient


@dataclass
class Measurement:
    pods: int
    #: bound pods that complete the phase (fewer than ``pods`` where not all can fit, e.g. gangs)
    target: int = 0
    created: int = 0
    create_errors: list[str] = field(default_factory=list)
    first_seen: dict[str, float] = field(default_factory=dict)
    bound_at: dict[str, float] = field(default_factory=dict)
    collector: ThroughputCollector = field(default_factory=ThroughputCollector)
    create_started: float = 0.0
    create_finished: float = 0.0
    all_bound: float | None = None
    force_deleted: int = 0
    #: measured pods deleted at the end of their lifetime
    expired: int = 0
    #: "complete", "timeout" or "scheduler exited"
    outcome: str = ""
    requests: Counter[Key] = field(default_factory=Counter)

    @property
    def bound(self) -> int:
        return len(self.bound_at)

    def latencies(self) -> list[float]:
        return [t - self.first_seen[name] for name, t in self.bound_at.items() if name in self.first_seen]

    def overall_throughput(self) -> float | None:
        """Bound pods / (last bind seen - first pod seen): includes ramp-up and tail."""
        if not self.bound_at or not self.first_seen:
            return None
        span = max(self.bound_at.values()) - min(self.first_seen.values())
        return self.bound / span if span > 0 else None


class PodLoad:
    """Creates ``bodies`` in ``namespace`` and watches them until all are bound, or ``target`` of them
    (or the deadline)."""

    def __init__(
        self,
        api: ApiClient,
        namespace: str,
        names: list[str],
        bodies: list[bytes],
        *,
        concurrency: int = 64,
        rate: float | None = None,
        target: int | None = None,
        lifetime: float | None = None,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.names = names
        self.bodies = bodies
        self.concurrency = concurrency
        self.rate = rate
        self.lifetime = lifetime
        self._expiring: set[asyncio.Task[None]] = set()
        self.result = Measurement(pods=len(names), target=len(names) if target is None else target)
        self._done = asyncio.Event()
        self._marker = f'"namespace":"{namespace}"'.encode()
        self._deleting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session(self, connections: int) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=connections, ssl=self.api.ssl_context())
        return aiohttp.ClientSession(
            base_url=self.api.server, connector=connector, headers=self.api.headers()
        )

    async def run(
        self,
        *,
        timeout: float,
        alive: Callable[[], bool],
        on_start: Callable[[], None] = lambda: None,
        on_end: Callable[[], None] = lambda: None,
    ) -> Measurement:
        """The whole measured phase; ``on_start`` is called just before the first pod is created and
        ``on_end`` as soon as every pod is bound (or the phase gives up)."""
        result = self.result
        async with self._session(self.concurrency + 16) as session:
            self._http = session
            async with session.get("/api/v1/pods?limit=1") as resp:
                resp.raise_for_status()
                version = (await resp.json())["metadata"]["resourceVersion"]
            result.requests[("LIST", "", "pods", "")] += 1
            self._loop = asyncio.get_running_loop()
            watch = PodWatchThread(self, version)
            watch.start()
            await asyncio.to_thread(watch.watching.wait, 30)
            if not watch.watching.is_set():
                watch.stop()
                raise RuntimeError(f"the pod watch did not start: {watch.error}")
            sampler = asyncio.create_task(self._sample())
            on_start()
            result.create_started = time.monotonic()
            creator = asyncio.create_task(self._create(session))
            deadline = time.monotonic() + timeout
            try:
                while not self._done.is_set():
                    if watch.error is not None:
                        raise RuntimeError(f"the pod watch failed: {watch.error}")
                    if time.monotonic() > deadline:
                        result.outcome = "timeout"
                        break
                    if not alive():
                        result.outcome = "scheduler exited"
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._done.wait(), 0.5)
                else:
                    result.outcome = "complete"
            finally:
                on_end()
                watch.stop()
                for task in (sampler, creator, *self._expiring):
                    task.cancel()
                await asyncio.gather(sampler, creator, *self._expiring, return_exceptions=True)
                if self._tasks:
                    await asyncio.gather(*self._tasks, return_exceptions=True)
        return result

    # -- creation ------------------------------------------------------------------------------------

    async def _post(self, session: aiohttp.ClientSession, name: str, body: bytes) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        status, text = 0, ""
        for attempt in range(5):
            try:
                async with session.post(path, data=body) as resp:
                    status = resp.status
                    text = (await resp.read()).decode(errors="replace")[:200]
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                status, text = 0, f"{type(e).__name__}: {e}"
            self.result.requests[("POST", "", "pods", "")] += status != 0
            if status == 201:
                self.result.created += 1
                return
            if status not in RETRIABLE:
                break
            await asyncio.sleep(0.1 * 2**attempt)
        self.result.create_errors.append(f"{name}: HTTP {status}: {text}")

    async def _create(self, session: aiohttp.ClientSession) -> None:
        pending = iter(zip(self.names, self.bodies, strict=True))
        if self.rate is None:

            async def worker() -> None:
                for name, body in pending:
                    await self._post(session, name, body)

            await asyncio.gather(*(worker() for _ in range(max(1, min(self.concurrency, len(self.names))))))
        else:
            started = time.monotonic()
            gate = asyncio.Semaphore(self.concurrency)

            async def one(name: str, body: bytes) -> None:
                async with gate:
                    await self._post(session, name, body)

            posts = []
            for i, (name, body) in enumerate(pending):
                delay = started + i / self.rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                posts.append(asyncio.create_task(one(name, body)))
            await asyncio.gather(*posts)
        self.result.create_finished = time.monotonic()

    # -- watching (see PodWatchThread) ---------------------------------------------------------------

    def _on_event(self, line: bytes, seen: float) -> str | None:
        """One watch line, in the watch thread; returns the object's resourceVersion."""
        mine = self._marker in line
        if not mine and b'"deletionTimestamp"' not in line and b'"BOOKMARK"' not in line:
            return None
        event = json.loads(line)
        kind, obj = event.get("type"), event.get("object") or {}
        meta = obj.get("metadata") or {}
        if kind == "ERROR":
            raise RuntimeError(f"pod watch: {obj.get('message')}")
        if kind != "BOOKMARK" and kind != "DELETED":
            if mine and self._observe(meta.get("name", ""), obj, seen) and self.lifetime is not None:
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._expire, meta)
            if meta.get("deletionTimestamp"):
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._force_delete, meta)
        return meta.get("resourceVersion")

    def _observe(self, name: str, pod: dict[str, Any], seen: float) -> bool:
        """Records the pod's times; True when this event is the one that shows it bound."""
        result = self.result
        result.first_seen.setdefault(name, seen)
        if name not in result.bound_at and (pod.get("spec") or {}).get("nodeName"):
            result.bound_at[name] = seen
            if len(result.bound_at) >= result.target:
                result.all_bound = seen
                assert self._loop is not None
                self._loop.call_soon_threadsafe(self._done.set)
            return True
        return False

    def _expire(self, meta: dict[str, Any]) -> None:
        async def later() -> None:
            assert self.lifetime is not None
            await asyncio.sleep(self.lifetime)
            await self._delete(meta["namespace"], meta["name"], meta.get("uid", ""))
            self.result.expired += 1

        task = asyncio.create_task(later())
        self._expiring.add(task)
        task.add_done_callback(self._expiring.discard)

    def _force_delete(self, meta: dict[str, Any]) -> None:
        uid = meta.get("uid", "")
        if uid in self._deleting:
            return
        self._deleting.add(uid)
        task = asyncio.create_task(self._force(meta["namespace"], meta["name"], uid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        body = json.dumps({"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}).encode()
        assert self._http is not None
        async with self._http.delete(f"/api/v1/namespaces/{namespace}/pods/{name}", data=body) as resp:
            await resp.read()
        self.result.requests[("DELETE", "", "pods", "")] += 1

    async def _force(self, namespace: str, name: str, uid: str) -> None:
        await self._delete(namespace, name, uid)
        self.result.force_deleted += 1

    # -- sampling ------------------------------------------------------------------------------------

    async def _sample(self) -> None:
        """Ticks every second on a fixed schedule (a late tick does not shift the next ones)."""
        collector = self.result.collector
        loop = asyncio.get_running_loop()
        start = loop.time()
        k = 0
        while not self._done.is_set():
            k += 1
            await asyncio.sleep(max(0.0, start + k * SAMPLE_INTERVAL - loop.time()))
            if self._done.is_set():
                return  # the collector stops when every pod is scheduled: no partial last interval
            collector.tick(time.monotonic(), len(self.result.bound_at))


class PodWatchThread(threading.Thread):
    """The pod watch, in its own thread with a blocking socket: the API server closes a watch whose
    reader falls behind ("Forcing watcher close due to unresponsiveness"), and an event loop busy
    creating pods would. Lines are timestamped as they are read; the watch resumes from the last
    resourceVersion if the server closes it anyway."""

    def __init__(self, load: PodLoad, version: str) -> None:
        super().__init__(name="pod-watch", daemon=True)
        self.load = load
        self.version = version
        self.watching = threading.Event()
        self.error: str | None = None
        self._stopped = False
        self._sock: socket.socket | None = None

    def run(self) -> None:
        api = self.load.api
        url = urlsplit(api.server)
        headers = {k: v for k, v in api.headers().items() if k != "Content-Type"}
        try:
            while not self._stopped:
                path = (
                    "/api/v1/pods?watch=1&allowWatchBookmarks=true"
                    f"&resourceVersion={self.version}&timeoutSeconds=3600"
                )
                conn = http.client.HTTPSConnection(
                    url.hostname or "127.0.0.1", url.port, context=api.ssl_context()
                )
                try:
                    conn.request("GET", path, headers=headers)
                    resp = conn.getresponse()
                    self._sock = conn.sock
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status}: {resp.read(300)!r}")
                    self.load.result.requests[("WATCH", "", "pods", "")] += 1
                    self.watching.set()
                    for line in resp:
                        seen = time.monotonic()
                        if line.strip():
                            self.version = self.load._on_event(line, seen) or self.version
                finally:
                    conn.close()
        except Exception as e:
            if not self._stopped:
                self.error = f"{type(e).__name__}: {e}"

    def stop(self) -> None:
        self._stopped = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        self.join(timeout=10)
