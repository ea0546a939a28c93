"""HTTP/1.1 to one API server over a pool of keep-alive connections.

Built for the scheduler's hot path (a binding and an event per pod): the request is written as bytes
in one call, and the answer is parsed by llhttp (through httptools) as it arrives, with no per-request
objects beyond the answer itself. It costs about half the CPU per request of a general-purpose client.

- At most ``limit`` requests are in flight; more wait for a free slot, within their timeout.
- The idle connection used last is reused first, so a quiet period needs few connections; one idle
  for ``keepalive`` seconds is closed (the API server closes its side after 90 s).
- Answers are not compressed: no ``Accept-Encoding`` is sent, so the API server spends no CPU
  compressing a large list and the scheduler none inflating it.
- A request on a reused connection that the server had already closed (no byte of an answer came) is
  sent once more on a new connection when the method is idempotent; for POST and PATCH the caller
  decides, since the server may have acted on it.
- An answer cut short, a malformed answer, a refused connection or a TLS failure raise ``NoAnswer`` (or
  the ``OSError`` behind it); the timeout raises ``TimeoutError``. The connection is then closed.
- Through a proxy, each connection is a ``CONNECT`` tunnel (``k8s.proxy.tunnel``); what goes wrong with the
  proxy raises ``ProxyError`` (a ``ConnectionError``, naming the proxy).
- ``before_write``, when given, is called on a ready connection (a slot held, a reused one picked or a
  new one connected, its TLS handshake done) right before the request's bytes are written, with no
  ``await`` in between, and again before each resend. What it raises ends the request unsent: the
  connection, untouched, goes back to the idle ones and the slot is freed. The fence uses it
  (``k8s.fence``): a write that waited for a slot or a handshake is judged when it leaves, not before.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

import httptools

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.k8s.proxy import Proxy, tunnel

#: methods that may be sent again when a kept-alive connection turns out to be closed
IDEMPOTENT = frozenset({"GET", "PUT", "DELETE", "OPTIONS"})
DEFAULT_KEEPALIVE = 60.0


class NoAnswer(ConnectionError):
    """The server closed the connection, or sent something that is not an HTTP answer."""

    def __init__(self, message: str, *, nothing_received: bool = False) -> None:
        super().__init__(message)
        #: no byte of an answer arrived: a kept-alive connection the server had closed
        self.nothing_received = nothing_received


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    #: header names in lower case
    headers: dict[bytes, bytes]
    body: bytes


class _NoCallbacks:
    """What a closed connection's parser calls back: nothing (see ``_Connection.connection_lost``)."""


#: the parser of every closed connection
_CLOSED_PARSER = httptools.HttpResponseParser(_NoCallbacks())


class _Connection(asyncio.Protocol):
    """One connection: a request at a time, its answer fed to llhttp as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        #: the last answer let the connection stay open
        self.keep_alive = False
        self.last_used = 0.0
        self._received = False
        self._headers_done = False
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(NoAnswer(f"malformed answer: {e}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        try:
            self._lost(exc)
        finally:
            # The parser calls back into this connection, a reference cycle: once broken, a closed
            # connection (its TLS state included) is freed at once, not by a full collection, which
            # never comes for one frozen while it was open (``service.gc_freeze``).
            self.parser = _CLOSED_PARSER

    def _lost(self, exc: Exception | None) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        headers = self._headers
        if self._headers_done and b"content-length" not in headers and b"transfer-encoding" not in headers:
            self.on_message_complete()  # an answer that ends with the connection: neither a length nor chunks
            return
        reason = f": {exc}" if exc else ""
        what = "closed the connection" if not self._received else "closed the connection mid-answer"
        self._fail(NoAnswer(f"the server {what}{reason}", nothing_received=not self._received))

    # -- httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        answer = Answer(self.parser.get_status_code(), self._headers, body)
        self.keep_alive = self.parser.should_keep_alive()  # read before the parser moves on
        self._headers, self._body, self._headers_done = {}, [], False
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)

    # -- used by the pool

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None
        self._received = False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def _fail(self, error: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


class HttpPool:
    """Keep-alive connections to ``host:port`` (TLS when ``ssl_context`` is given); see the module."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        limit: int = 128,
        keepalive: float = DEFAULT_KEEPALIVE,
        clock: Clock | None = None,
        proxy: Proxy | None = None,
    ) -> None:
        """``clock``: what measures a connection's idle time (tests pass a ``VirtualClock``); ``proxy``:
        what every connection tunnels through (see the module)."""
        if limit < 1:
            raise ValueError(f"limit: must be at least 1, not {limit}")
        self.host, self.port = host, port
        self.ssl_context = ssl_context
        self.server_hostname = (server_hostname or host) if ssl_context is not None else None
        self.limit = limit
        self.keepalive = keepalive
        self.proxy = proxy
        self._now = clock.now if clock is not None else time.monotonic
        host_header = f"[{host}]" if ":" in host else host
        default_port = 443 if ssl_context is not None else 80
        self.host_header = host_header if port == default_port else f"{host_header}:{port}"
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    @property
    def open_connections(self) -> int:
        return len(self._busy) + sum(1 for c in self._idle if not c.closed)

    async def request(
        self, method: str, request: bytes, timeout: float, *, before_write: Callable[[], None] | None = None
    ) -> Answer:
        """Sends ``request`` (a whole HTTP/1.1 request as bytes) and returns the answer within ``timeout``
        seconds, waiting for a free slot included. ``before_write``: see the module docstring."""
        if self._closed:
            raise NoAnswer("the connection pool is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limit)
        async with asyncio.timeout(timeout), self._slots:
            conn = self._reuse()
            if conn is not None:
                try:
                    return await self._exchange(conn, request, before_write)
                except NoAnswer as e:
                    if not (e.nothing_received and method in IDEMPOTENT):
                        raise
            return await self._exchange(await self._connect(), request, before_write)

    def _reuse(self) -> _Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if not conn.closed and self._now() - conn.last_used < self.keepalive:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        if self.proxy is not None:
            return await tunnel(
                self.proxy,
                self.host,
                self.port,
                _Connection,
                ssl_context=self.ssl_context,
                server_hostname=self.server_hostname,
            )
        _, conn = await loop.create_connection(
            _Connection,
            self.host,
            self.port,
            ssl=self.ssl_context,
            server_hostname=self.server_hostname,
        )
        return conn

    async def _exchange(
        self, conn: _Connection, request: bytes, before_write: Callable[[], None] | None
    ) -> Answer:
        if before_write is not None:
            try:
                before_write()  # no await from here to the write: judged as the bytes leave
            except BaseException:
                if self._closed:
                    conn.close()
                else:
                    self._release(conn)  # nothing was written on it: as good as before
                raise
        self._busy.add(conn)
        try:
            answer = await conn.send(request)
        except BaseException:  # cancelled, timed out or failed: the answer's state is unknown
            conn.close()
            raise
        finally:
            self._busy.discard(conn)
        if conn.closed or not conn.keep_alive or self._closed:
            conn.close()
        else:
            self._release(conn)
        return answer

    def _release(self, conn: _Connection) -> None:
        now = self._now()
        conn.last_used = now
        idle = self._idle
        # the connection idle longest sits first: close those past their keep-alive
        while idle and (idle[0].closed or now - idle[0].last_used >= self.keepalive):
            idle.pop(0).close()
        idle.append(conn)

    async def close(self) -> None:
        """Closes idle connections now and busy ones when their answer is read."""
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._idle = []
