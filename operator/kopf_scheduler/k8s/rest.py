"""The HTTP layer: one shared aiohttp session to the API server, JSON in and out, counted.

``RestClient.request`` never raises for HTTP outcomes: it returns a ``Response`` whose ``status`` is the
HTTP status, or 0 when there was no answer (connection refused, TLS failure, timeout). A 401 rebuilds the
credentials once (rotated token, renewed client certificate) and retries the request; concurrent 401s
share one rebuild. A rebuild that changes the TLS material replaces the session; the old one is closed
when the client closes, so requests still running on it finish.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.k8s.connection import ConfigError, ConnectionInfo
from kopf_scheduler.k8s.stats import ClientStats

logger = logging.getLogger(__name__)

JSON = "application/json"
#: what a metadata-only client asks for: the objects' metadata, nothing else
PARTIAL_METADATA = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
USER_AGENT = "kopf-scheduler"
DEFAULT_TIMEOUT = 10.0
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


def _seconds(header: str | None) -> float | None:
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
    connection per request in flight, and the pool keeps every connection a burst of writes opened (idle
    ones are reused in turn, so none stays idle long enough to be closed): in a churn at 100 pods/s, one
    burst left 110 connections, 30 MiB, open for the rest of the run. With ``TLS_READ_BUFFER`` a
    connection holds about 75 KiB. asyncio has no setting per connection; the class attribute is read by
    each connection it makes."""
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
        self._session: aiohttp.ClientSession | None = None
        self._retired: list[aiohttp.ClientSession] = []
        self._generation = 0
        self._refresh_lock: asyncio.Lock | None = None
        self._closed = False

    @property
    def info(self) -> ConnectionInfo:
        return self._info

    @property
    def server(self) -> str:
        return self._info.server

    def _new_session(self) -> aiohttp.ClientSession:
        ssl_context = self._info.ssl_context()
        if ssl_context is not None:
            small_tls_read_buffers()
        connector = aiohttp.TCPConnector(
            limit=self.connections,
            ssl=ssl_context if ssl_context is not None else True,
            keepalive_timeout=60,
            ttl_dns_cache=300,
        )
        return aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": self.user_agent, "Accept": JSON},
            # JSON from the server is never parsed by aiohttp; no cookies to keep.
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
        )

    def session(self) -> aiohttp.ClientSession:
        """The shared session, created on first use (inside the running event loop)."""
        if self._closed:
            raise RuntimeError("the API client is closed")
        if self._session is None:
            self._session = self._new_session()
        return self._session

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
    ) -> Response:
        data = None if body is None else encode(body)
        generation = self._generation
        response = await self._send(method, path, data, content_type, timeout, params, accept)
        if response.status == 401:
            await self._refresh(generation)
            response = await self._send(method, path, data, content_type, timeout, params, accept)
        return response

    async def _send(
        self,
        method: str,
        path: str,
        data: bytes | None,
        content_type: str,
        timeout: float | None,
        params: Mapping[str, str] | None,
        accept: str = JSON,
    ) -> Response:
        if self._closed:
            return Response(0, error=f"{method} {path}: the API client is closed")
        info = self._info
        headers = info.auth_headers()
        if accept != JSON:
            headers["Accept"] = accept
        if data is not None:
            headers["Content-Type"] = content_type
        try:
            async with self.session().request(
                method,
                info.server + path,
                data=data,
                params=params,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout if timeout is not None else self.timeout),
                server_hostname=info.tls_server_name,
            ) as resp:
                payload = await resp.read()  # read fully: the connection then goes back to the pool
                response = Response(
                    resp.status, payload, retry_after=_seconds(resp.headers.get("Retry-After"))
                )
        except TimeoutError:
            response = Response(0, error=f"{method} {path}: timed out")
        except (aiohttp.ClientError, OSError, ConfigError) as e:
            response = Response(0, error=f"{method} {path}: {type(e).__name__}: {e}")
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
            self._generation += 1
            self.stats.credential_refreshes += 1
            if new.tls_material != old.tls_material and self._session is not None:
                self._retired.append(self._session)
                self._session = None
            logger.info("API credentials reloaded from %s after a 401", new.source or "their source")

    async def close(self) -> None:
        self._closed = True
        sessions = [s for s in (self._session, *self._retired) if s is not None]
        self._session, self._retired = None, []
        for session in sessions:
            await session.close()

    # -- JSON helpers: raise APIError for anything but the expected statuses ------------------------

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None, *, accept: str = JSON
    ) -> Any:
        response = await self.request("GET", path, params=params, accept=accept)
        if response.status != 200:
            raise response.error_for(f"GET {path}")
        return response.json()
