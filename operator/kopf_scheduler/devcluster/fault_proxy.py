"""A fault-injecting proxy between a client and the dev cluster's API server, for fault tests.

The proxy listens on plain HTTP on the loopback address (``url``; ``kubeconfig()`` writes a kubeconfig
for it with the cluster's token) and forwards every request to the API server over TLS, streaming the
answers (watches included). A ``Fault`` changes what matching requests get:

- ``answer``: the proxy answers ``status`` itself (a ``Status`` body with ``message``, and ``Retry-After``
  when given); the API server never sees the request (a 429 from a busy server, a 503, a webhook's 409);
- ``stored_then_504``: the request is forwarded and stored, then the client gets 504, as from a gateway
  that gave up waiting: the outcome is ambiguous to the client;
- ``stored_then_drop``: forwarded and stored, then the connection is closed with no answer;
- ``delay``: held for ``seconds``, then delivered to the API server, even when the client gave up
  meanwhile (timed out, closed the connection): bytes held in the network still arrive, and a test of
  late writes needs them to. ``delivered`` records each held request as it is sent on (monotonic time,
  method, path);
- ``blackhole``: never forwarded; the connection is held for ``seconds`` and then closed without an
  answer, as when the network drops every packet (streams opened before keep flowing);
- ``watch_expired``: a watch gets what the API server sends when the resourceVersion it resumes from is
  no longer in its history: 200 and one ``ERROR`` event with a 410 ``Expired`` Status.

A Go client sends no credentials to it (client-go's ``clientcmd`` reads a kubeconfig's user only for an
``https://`` server); with ``authorize=True`` the proxy sends a request that carries no ``Authorization``
on with the cluster's token, so kube-scheduler can sit behind it too.

``query`` narrows a fault to requests whose query string it matches (``watch=true``). ``cut_streams``
closes the connections of the requests in flight to a path (a watch's stream breaks, as when a load
balancer drops it), so the client resumes it.

A fault applies to every ``every``-th matching request (1: each), ``times`` times (None: until removed);
the first fault in the list that applies is the one used. ``requests`` records every request the proxy
received: (monotonic time, method, path, the action applied or None). The proxy runs its own event loop
on a thread, so blocking test code can drive it.

    with FaultProxy(cluster) as proxy:
        proxy.add(Fault("POST", r".*/pods/[^/]+/binding", "stored_then_504", times=3))
        KUBECONFIG=proxy.kubeconfig(tmp / "kubeconfig") ...
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import aiohttp
from aiohttp import web

from kopf_scheduler.devcluster import kubeconfig

Action = Literal["answer", "stored_then_504", "stored_then_drop", "delay", "blackhole", "watch_expired"]
#: request headers not passed on (hop-by-hop, or the proxy's own)
_DROPPED = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length"})


@dataclass
class Fault:
    #: the request's method, or "*" for any
    method: str
    #: regular expression the request's path (without the query) must match in full
    path: str
    action: Action
    status: int = 503
    message: str = "injected fault"
    retry_after: int | None = None
    seconds: float = 0.0
    times: int | None = 1
    every: int = 1
    #: regular expression searched in the query string ("": any)
    query: str = ""
    #: requests it has applied to so far
    hits: int = 0
    #: matching requests seen so far (applied to or not)
    seen: int = 0
    _pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.path)

    def matches(self, method: str, path: str, query: str = "") -> bool:
        return (
            self.method in ("*", method)
            and self._pattern.fullmatch(path) is not None
            and (not self.query or re.search(self.query, query) is not None)
        )

    @property
    def spent(self) -> bool:
        return self.times is not None and self.hits >= self.times


class FaultProxy:
    def __init__(self, server: str, ca_file: Path, token: str, *, authorize: bool = False) -> None:
        self.upstream = server
        self.token = token
        self.authorize = authorize
        self.ca_file = ca_file
        self._ssl = ssl.create_default_context(cafile=str(ca_file))
        self._faults: list[Fault] = []
        self.requests: list[tuple[float, str, str, str | None]] = []
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        #: requests being forwarded: (path, the client's connection)
        self._in_flight: set[tuple[str, asyncio.Transport]] = set()
        #: ``delay``'s held requests as they were sent on: (monotonic time, method, path)
        self.delivered: list[tuple[float, str, str]] = []
        #: held requests, kept running when their client goes away
        self._held: set[asyncio.Task[web.StreamResponse]] = set()
        self.url = ""

    @classmethod
    def of(cls, cluster: Any, *, authorize: bool = False) -> FaultProxy:
        """For a running ``DevCluster`` (or anything with ``server``, ``ca_file`` and ``token``)."""
        return cls(cluster.server, cluster.ca_file, cluster.token, authorize=authorize)

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def start(self) -> str:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self.url

    def stop(self) -> None:
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def cut_streams(self, path: str) -> int:
        """Close the connections of the requests in flight whose path matches ``path`` (a regular
        expression, in full); returns how many were cut."""

        def cut() -> int:
            pattern = re.compile(path)
            cut = [(p, t) for p, t in self._in_flight if pattern.fullmatch(p)]
            for _, transport in cut:
                transport.close()
            return len(cut)

        async def on_loop() -> int:
            return cut()

        return asyncio.run_coroutine_threadsafe(on_loop(), self._loop).result(timeout=30)

    def kubeconfig(self, path: Path, token: str | None = None) -> Path:
        """A kubeconfig that reaches the API server through this proxy, as the cluster's admin (or as
        the user of ``token``)."""
        config = kubeconfig.build(
            self.url, self.ca_file.read_bytes(), token or self.token, name="dev-fault-proxy"
        )
        kubeconfig.write(path, config)
        return path

    def _take(self, method: str, path: str, query: str = "") -> Fault | None:
        with self._lock:
            chosen = None
            for fault in self._faults:
                if fault.spent or not fault.matches(method, path, query):
                    continue
                fault.seen += 1
                if chosen is None and fault.seen % fault.every == 0:
                    fault.hits += 1
                    chosen = fault
            self.requests.append((time.monotonic(), method, path, chosen.action if chosen else None))
            return chosen

    async def _start(self) -> str:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=256),
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    async def _stop(self) -> None:
        for task in list(self._held):
            task.cancel()
        for _, transport in list(self._in_flight):  # open streams would hold the shutdown for a minute
            transport.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._take(request.method, request.path, request.query_string)
        body = await request.read()
        if fault is not None and fault.action == "answer":
            return _status_response(fault)
        if fault is not None and fault.action == "watch_expired":
            return _expired_watch(request.query.get("resourceVersion", "0"))
        if fault is not None and fault.action == "delay":
            # on a task of its own: the handler is cancelled when its client goes away, the delivery is not
            held = asyncio.ensure_future(self._deliver_later(request, body, fault))
            self._held.add(held)
            held.add_done_callback(_forget_held(self._held))
            return await asyncio.shield(held)
        if fault is not None and fault.action == "blackhole":
            await asyncio.sleep(fault.seconds)
            if request.transport is not None:
                request.transport.close()
            raise web.HTTPServiceUnavailable()  # never sent: the connection is gone
        return await self._pass_on(request, body, fault)

    async def _deliver_later(self, request: web.Request, body: bytes, fault: Fault) -> web.StreamResponse:
        await asyncio.sleep(fault.seconds)
        self.delivered.append((time.monotonic(), request.method, request.path))
        return await self._pass_on(request, body, fault)

    async def _pass_on(self, request: web.Request, body: bytes, fault: Fault | None) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED}
        if self.authorize and "authorization" not in {k.lower() for k in headers}:
            headers["Authorization"] = f"Bearer {self.token}"
        assert self._session is not None
        if request.transport is not None:
            flight = (request.path, request.transport)
            self._in_flight.add(flight)
            try:
                return await self._forward(request, body, headers, fault)
            finally:
                self._in_flight.discard(flight)
        return await self._forward(request, body, headers, fault)

    async def _forward(
        self, request: web.Request, body: bytes, headers: dict[str, str], fault: Fault | None
    ) -> web.StreamResponse:
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            data=body or None,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        ) as upstream:
            if fault is not None and fault.action in ("stored_then_504", "stored_then_drop"):
                await upstream.read()
                if fault.action == "stored_then_drop":
                    if request.transport is not None:
                        request.transport.close()
                    raise web.HTTPServiceUnavailable()  # never sent: the connection is gone
                return _status_response(fault, 504)
            response = web.StreamResponse(status=upstream.status)
            for name in ("Content-Type", "Content-Encoding", "Retry-After", "Audit-Id"):
                if name in upstream.headers:
                    response.headers[name] = upstream.headers[name]
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


def _forget_held(held: set[asyncio.Task[web.StreamResponse]]) -> Any:
    """A done callback: the task leaves ``held``, and a failure to answer a client that went away (the
    request itself was delivered) is not reported as an exception nobody retrieved."""

    def done(task: asyncio.Task[web.StreamResponse]) -> None:
        held.discard(task)
        if not task.cancelled():
            task.exception()

    return done


def _status_response(fault: Fault, status: int | None = None) -> web.Response:
    code = status if status is not None else fault.status
    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": fault.message, "code": code}
    return web.json_response(body, status=code, headers=headers)


def _expired_watch(resource_version: str) -> web.Response:
    """The API server's answer to a watch from a resourceVersion its history no longer holds."""
    newer = int(resource_version) + 1 if resource_version.isdigit() else 1
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {resource_version} ({newer})",
        "reason": "Expired",
        "code": 410,
    }
    line = json.dumps({"type": "ERROR", "object": status}) + "\n"
    return web.Response(status=200, text=line, content_type="application/json")
