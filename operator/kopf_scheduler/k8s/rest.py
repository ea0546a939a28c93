"""The HTTP layer: one pool of keep-alive connections to the API server (``http_pool``), JSON in and out,
counted.

``RestClient.request`` never raises for HTTP outcomes: it returns a ``Response`` whose ``status`` is the
HTTP status, or 0 when there was no answer (connection refused, TLS failure, timeout). A 401 rebuilds the
credentials once (rotated token, renewed client certificate) and retries the request; concurrent 401s
share one rebuild. ``before_write`` is handed to the pool for each send, the resend after a rebuild
included: the caller's last word comes when the bytes leave (``k8s.fence``); what it raises is not turned
into a ``Response``. A rebuild that changes the TLS material replaces the pool; the old one is closed at
once, its idle connections then and each busy one when its answer is read, so requests still running on
it finish and no old pool outlives them (a changed proxy replaces it too). Connections go through the
connection's proxy when it has one (``k8s.proxy``: tunnels the pool makes). A server URL with a path (an
API server behind a proxy, ``https://proxy/k8s/clusters/c-1``) keeps it in front of every request's path.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.k8s.connection import ConfigError, ConnectionInfo
from kopf_scheduler.k8s.http_pool import HttpPool, NoAnswer
from kopf_scheduler.k8s.stats import ClientStats

logger = logging.getLogger(__name__)

JSON = "application/json"
#: what a metadata-only client asks for: the objects' metadata, nothing else
PARTIAL_METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
USER_AGENT = "kopf-scheduler"
DEFAULT_TIMEOUT = 10.0
#: characters a request path keeps as they are (RFC 3986 path characters, and an escape already made)
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
#: bytes asyncio reads from a TLS socket per call, and keeps as a buffer per connection (its default:
#: 256 KiB). A TLS record carries at most 16 KiB.
TLS_READ_BUFFER = 16 * 1024


def resource_path(
    group_version: str,
    plural: str,
    name: str | None = None,
    *,
    namespace: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/api/v1/namespaces/ns/pods/p/status`` or ``/apis/group/version/plural/name``."""
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    path = f"{root}/namespaces/{namespace}/{plural}" if namespace else f"{root}/{plural}"
    if name:
        path += f"/{name}"
        if subresource:
            path += f"/{subresource}"
    return path


def encode(body: Any) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()


def _seconds(header: bytes | None) -> float | None:
    """``Retry-After`` as seconds: the API server sends a whole number (an HTTP date is not used)."""
    if header is None:
        return None
    try:
        value = float(header)
    except ValueError:
        return None
    return value if value >= 0 else None


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes = b""
    #: why there is no answer (status 0)
    error: str = ""
    #: the ``Retry-After`` header in seconds, when the server sent one
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def message(self) -> str:
        """The ``Status`` message the API server sends with an error, else the body's start."""
        if self.status == 0:
            return self.error or "no answer from the API server"
        try:
            data = json.loads(self.body)
        except ValueError:
            data = None
        if isinstance(data, Mapping) and data.get("message"):
            return str(data["message"])
        return self.body[:300].decode(errors="replace") or f"HTTP {self.status}"

    def error_for(self, what: str) -> APIError:
        return APIError(self.status, f"{what}: {self.message()}")


def small_tls_read_buffers() -> None:
    """Every TLS connection of asyncio holds a read buffer of ``SSLProtocol.max_size`` (256 KiB) for as long
    as it is open, about 300 KiB per connection with OpenSSL's own state. Over HTTP/1.1 the client holds a
    connection per request in flight, so a burst of writes opens many, which stay open until they have
    been idle for the keep-alive time. With ``TLS_READ_BUFFER`` a connection holds about 75 KiB. asyncio
    has no setting per connection; the class attribute is read by each connection it makes."""
    if getattr(asyncio.sslproto.SSLProtocol, "max_size", 0) > TLS_READ_BUFFER:
        asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER


class RestClient:
    """Requests to one API server over a shared connection pool; see the module docstring."""

    def __init__(
        self,
        info: ConnectionInfo,
        *,
        connections: int = 128,
        timeout: float = DEFAULT_TIMEOUT,
        stats: ClientStats | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        self._info = info
        self.connections = connections
        self.timeout = timeout
        self.stats = stats if stats is not None else ClientStats()
        self.user_agent = user_agent
        self._prefix = urlsplit(info.server).path
        self._pool: HttpPool | None = None
        self._retired: list[HttpPool] = []
        self._generation = 0
        self._refresh_lock: asyncio.Lock | None = None
        self._closed = False

    @property
    def info(self) -> ConnectionInfo:
        return self._info

    @property
    def server(self) -> str:
        return self._info.server

    def _new_pool(self) -> HttpPool:
        info = self._info
        url = urlsplit(info.server)
        ssl_context = info.ssl_context()
        if ssl_context is not None:
            small_tls_read_buffers()
        host = url.hostname or ""
        port = url.port or (443 if ssl_context is not None else 80)
        return HttpPool(
            host,
            port,
            ssl_context=ssl_context,
            server_hostname=info.tls_server_name,
            limit=self.connections,
            proxy=info.proxy,
        )

    def pool(self) -> HttpPool:
        """The shared connection pool, created on first use (inside the running event loop)."""
        if self._closed:
            raise RuntimeError("the API client is closed")
        if self._pool is None:
            self._pool = self._new_pool()
        return self._pool

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        timeout: float | None = None,
        params: Mapping[str, str] | None = None,
        accept: str = JSON,
        before_write: Callable[[], None] | None = None,
    ) -> Response:
        """``before_write``: called right before the bytes are written, on every send (see the module)."""
        data = None if body is None else encode(body)
        target = quote(self._prefix + path, safe=_PATH_SAFE)
        if params:
            target += "?" + urlencode(params)
        generation = self._generation
        response = await self._send(method, target, data, content_type, timeout, accept, before_write)
        if response.status == 401:
            await self._refresh(generation)
            response = await self._send(method, target, data, content_type, timeout, accept, before_write)
        return response

    async def _send(
        self,
        method: str,
        target: str,
        data: bytes | None,
        content_type: str,
        timeout: float | None,
        accept: str,
        before_write: Callable[[], None] | None,
    ) -> Response:
        if self._closed:
            return Response(0, error=f"{method} {target}: the API client is closed")
        try:
            pool = self.pool()
            lines = [
                f"{method} {target} HTTP/1.1\r\nHost: {pool.host_header}\r\n"
                f"User-Agent: {self.user_agent}\r\nAccept: {accept}\r\n"
            ]
            lines.extend(f"{name}: {value}\r\n" for name, value in self._info.auth_headers().items())
            if data is None:
                lines.append("\r\n")
                request = "".join(lines).encode()
            else:
                lines.append(f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n")
                request = "".join(lines).encode() + data
            answer = await pool.request(
                method,
                request,
                timeout if timeout is not None else self.timeout,
                before_write=before_write,
            )
            response = Response(
                answer.status, answer.body, retry_after=_seconds(answer.headers.get(b"retry-after"))
            )
        except TimeoutError:
            response = Response(0, error=f"{method} {target}: timed out")
        except (NoAnswer, OSError, ConfigError) as e:
            response = Response(0, error=f"{method} {target}: {type(e).__name__}: {e}")
        self.stats.requests[(method, response.status)] += 1
        return response

    async def _refresh(self, seen_generation: int) -> None:
        if self._refresh_lock is None:
            self._refresh_lock = asyncio.Lock()
        async with self._refresh_lock:
            if self._generation != seen_generation:
                return  # another request already rebuilt the credentials
            old = self._info
            try:
                # may read files or run an exec plugin: off the event loop
                new = await asyncio.to_thread(old.reload)
            except ConfigError as e:
                logger.error("API server answered 401 and the credentials cannot be reloaded: %s", e)
                return
            self._info = new
            self._prefix = urlsplit(new.server).path
            self._generation += 1
            self.stats.credential_refreshes += 1
            if new.tls_material != old.tls_material and self._pool is not None:
                await self._retire(self._pool)
                self._pool = None
            logger.info("API credentials reloaded from %s after a 401", new.source or "their source")

    async def _retire(self, pool: HttpPool) -> None:
        """Closes ``pool`` as it stops being used: its idle connections now, each busy one once its answer
        is read (``HttpPool.close``). Only pools with requests still running are kept, for ``close``:
        rotations never pile old pools up."""
        await pool.close()
        self._retired = [p for p in (*self._retired, pool) if p.open_connections]

    async def close(self) -> None:
        self._closed = True
        pools = [p for p in (self._pool, *self._retired) if p is not None]
        self._pool, self._retired = None, []
        for pool in pools:
            await pool.close()

    # -- JSON helpers: raise APIError for anything but the expected statuses ------------------------

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None, *, accept: str = JSON
    ) -> Any:
        response = await self.request("GET", path, params=params, accept=accept)
        if response.status != 200:
            raise response.error_for(f"GET {path}")
        return response.json()
