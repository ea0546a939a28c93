"""HTTP for scheduler extenders: one pooled aiohttp session shared by every extender of a scheduler, TLS
settings per extender, a time limit per call, and errors worded as Go's ``net/http`` words them (they end
up in FailedScheduling events, where users compare them with kube-scheduler's).

Guards: the session belongs to the event loop that created it and is replaced when used from another
one (``simulate`` runs a loop per run); ``close`` releases it; aiohttp is imported on first use, so
profiles without extenders never load it. The TLS settings are client-go's
``TLSConfigFor`` as kube-scheduler's ``makeTransport`` uses them: ``enableHTTPS`` without a CA skips
verification; a CA given replaces the system roots; ``*Data`` beats ``*File``.

Bounds beyond upstream (a profile is configuration anyone allowed to write one controls):

- every call has a time limit (``Endpoint.timeout``: connecting, sending and reading the whole answer);
- redirects are not followed: a 3xx answer is an error, as any status but 200;
- an answer may be at most ``response_limit`` bytes (decompressed): the larger of
  ``MIN_RESPONSE_LIMIT`` and ``RESPONSE_LIMIT_FACTOR`` times the request (a filter answer lists at most
  the nodes it was sent);
- unless the extender's spec allows it, a connection never goes to a link-local or cloud metadata
  address: the host names of calls are resolved by a resolver that refuses such addresses, so the check
  is on the very addresses connected to (no second lookup to fool), and IP literals are checked before;
- TLS files are read only from the operator's TLS directory (symlinks resolved), and errors about them
  name the field and the path as the profile wrote it, never the OS's words (they land in the profile's
  status); the details go to the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kopf_scheduler.api.bounds import ALLOW_LINK_LOCAL_FLAG, is_link_local_or_metadata
from kopf_scheduler.api.extenders import DEFAULT_HTTP_TIMEOUT, MAX_HTTP_TIMEOUT, ExtenderSpec, TLSConfig

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("kopf_scheduler.extenders")

#: an answer may always be this large (bytes) ...
MIN_RESPONSE_LIMIT = 8 * 1024 * 1024
#: ... or this many times the request it answers, when that is more
RESPONSE_LIMIT_FACTOR = 4


def response_limit(request_size: int) -> int:
    """The most bytes the answer to a request of ``request_size`` bytes may have."""
    return max(MIN_RESPONSE_LIMIT, RESPONSE_LIMIT_FACTOR * request_size)


class ExtenderError(Exception):
    """A failed extender call; the message is what kube-scheduler would report for it."""


class TLSError(ValueError):
    """Unusable TLS settings (``field`` is relative to the extender's ``tlsConfig``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class RefusedAddress(OSError):
    """A call's host is (or resolves to) a link-local or metadata address the extender may not reach."""

    def __init__(self, host: str, address: str) -> None:
        shown = host if host == address else f"{host} ({address})"
        super().__init__(
            f"{shown} is a link-local or cloud metadata address: refused (the operator flag "
            f"{ALLOW_LINK_LOCAL_FLAG} allows it)"
        )


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how one extender is called."""

    url_prefix: str
    #: None: aiohttp's default verification against the system roots (or plain HTTP)
    ssl_context: ssl.SSLContext | None
    server_name: str | None
    timeout: float
    #: the host may be (or resolve to) a link-local or metadata address
    allow_link_local: bool = False

    def url(self, verb: str) -> str:
        return self.url_prefix.rstrip("/") + "/" + verb


@contextlib.contextmanager
def _pem_file(data: bytes, path: str) -> Iterator[str]:
    """``path``, or a private temporary file holding ``data`` when there is data (it wins)."""
    if not data:
        yield path
        return
    fd, name = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield name
    finally:
        os.unlink(name)


def ssl_context(spec: ExtenderSpec) -> ssl.SSLContext | None:
    """The TLS client settings of one extender; None when it has none (defaults apply)."""
    tls = spec.tls
    insecure = bool(tls and tls.insecure)
    has_ca = bool(tls and tls.has_ca)
    if spec.enable_https and not has_ca:
        insecure = True
    has_cert = bool(tls and (tls.cert_data or tls.cert_file or tls.key_data or tls.key_file))
    if not (insecure or has_ca or has_cert or (tls and tls.server_name)):
        return None
    if insecure and has_ca:
        raise TLSError(
            "insecure", "specifying a root certificates file with the insecure flag is not allowed"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif tls is not None and tls.ca_data:
        try:
            context.load_verify_locations(cadata=tls.ca_data.decode(errors="replace"))
        except (ssl.SSLError, ValueError) as e:
            log.warning("extender %s: caData: %s", spec.url_prefix, e)
            raise TLSError("caData", "unable to load root certificates: no valid PEM certificate") from None
    elif tls is not None and tls.ca_file:
        path = _readable(tls, "caFile", tls.ca_file)
        try:
            context.load_verify_locations(cafile=path)
        except (OSError, ssl.SSLError) as e:
            log.warning("extender %s: caFile %s: %s", spec.url_prefix, path, e)
            raise TLSError(
                "caFile", f"unable to load root certificates from {tls.ca_file!r}: {_why(e)}"
            ) from None
    else:
        context.load_default_certs()
    if tls is not None and has_cert:
        has_cert_part = bool(tls.cert_data or tls.cert_file)
        if has_cert_part != bool(tls.key_data or tls.key_file):
            field = "keyFile" if has_cert_part else "certFile"
            raise TLSError(field, "a client certificate needs both a certificate and a key")
        cert_file = "" if tls.cert_data else _readable(tls, "certFile", tls.cert_file)
        key_file = "" if tls.key_data else _readable(tls, "keyFile", tls.key_file)
        try:
            with (
                _pem_file(tls.cert_data, cert_file) as cert_path,
                _pem_file(tls.key_data, key_file) as key_path,
            ):
                context.load_cert_chain(cert_path, key_path)
        except (OSError, ssl.SSLError) as e:
            log.warning("extender %s: client certificate: %s", spec.url_prefix, e)
            field = "certData" if tls.cert_data else "certFile"
            raise TLSError(field, f"unable to load client certificate: {_why(e)}") from None
    return context


def _readable(tls: TLSConfig, field: str, written: str) -> str:
    """The path to read the file a ``*File`` field names; ``TLSError`` when, symlinks resolved, it is not
    in the TLS directory (validation checked the path as written)."""
    path = tls.path_of(written)
    if tls.file_dir is not None:
        root = os.path.realpath(tls.file_dir)
        real = os.path.realpath(path)
        if not real.startswith(root.rstrip(os.sep) + os.sep):
            raise TLSError(field, f"{written!r} is not a file in the extender TLS directory")
    return path


def _why(e: BaseException) -> str:
    """What went wrong with a TLS file, in words that carry no OS detail (no errno, no other paths)."""
    if isinstance(e, ssl.SSLError):
        return "not valid PEM data (or the key does not match the certificate)"
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, PermissionError):
        return "not readable"
    return "cannot be read"


def endpoint(spec: ExtenderSpec) -> Endpoint:
    """Raises ``TLSError`` for unusable TLS settings."""
    server_name = spec.tls.server_name if spec.tls is not None and spec.tls.server_name else None
    # validation keeps timeouts in (0, MAX_HTTP_TIMEOUT]; a spec made in code gets no way around a limit
    timeout = spec.http_timeout if spec.http_timeout and spec.http_timeout > 0 else DEFAULT_HTTP_TIMEOUT
    return Endpoint(
        spec.url_prefix, ssl_context(spec), server_name, min(timeout, MAX_HTTP_TIMEOUT), spec.allow_link_local
    )


def _refuse_literal(url: str, allow_link_local: bool) -> None:
    """``RefusedAddress`` for a URL whose host is a refused IP literal (aiohttp resolves no literal)."""
    if allow_link_local:
        return
    host = urlsplit(url).hostname or ""
    if is_link_local_or_metadata(host):
        raise RefusedAddress(host, host)


def _guarded_resolver() -> aiohttp.abc.AbstractResolver:
    """aiohttp's default resolver, refusing every lookup that yields a link-local or metadata address."""
    import aiohttp

    class GuardedResolver(aiohttp.abc.AbstractResolver):
        def __init__(self) -> None:
            self._inner = aiohttp.DefaultResolver()

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[Any]:
            results = await self._inner.resolve(host, port, family)
            for result in results:
                if is_link_local_or_metadata(str(result["host"])):
                    raise RefusedAddress(host, str(result["host"]))
            return results

        async def close(self) -> None:
            await self._inner.close()

    return GuardedResolver()


def _describe(url: str, exc: BaseException) -> str:
    """``Post "<url>": <cause>`` like Go's ``*url.Error``, with Go's words for the common causes."""
    import aiohttp

    if isinstance(exc, asyncio.TimeoutError):
        cause = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
    elif isinstance(exc, RefusedAddress):
        cause = str(exc)
    elif isinstance(exc, aiohttp.ClientConnectorError) and isinstance(exc.os_error, RefusedAddress):
        cause = str(exc.os_error)
    elif isinstance(exc, aiohttp.ClientConnectorError):
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        os_error = exc.os_error
        if (
            isinstance(os_error, ConnectionRefusedError)
            or getattr(os_error, "errno", None) == errno.ECONNREFUSED
        ):
            cause = f"dial tcp {parts.hostname}:{port}: connect: connection refused"
        else:
            cause = f"dial tcp {parts.hostname}:{port}: {os_error.strerror or os_error}"
    else:
        cause = str(exc) or type(exc).__name__
    return f'Post "{url}": {cause}'


class ExtenderTransport:
    """The scheduler's HTTP client for extenders (``post`` is the only call)."""

    def __init__(self) -> None:
        #: by whether link-local and metadata addresses are allowed: the guarded session and the other
        self._sessions: dict[bool, aiohttp.ClientSession] = {}
        self._resolvers: list[aiohttp.abc.AbstractResolver] = []  # a connector closes only its own
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self, allow_link_local: bool) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # Sessions from a loop that has ended cannot be closed from this one; they are dropped.
            self._sessions, self._resolvers, self._loop = {}, [], loop
        session = self._sessions.get(allow_link_local)
        if session is None or session.closed:
            resolver = None
            if not allow_link_local:
                resolver = _guarded_resolver()
                self._resolvers.append(resolver)
            session = self._sessions[allow_link_local] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, resolver=resolver),
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "kopf-scheduler"},
            )
        return session

    async def post(self, where: Endpoint, verb: str, body: bytes) -> bytes:
        """POSTs ``body`` (JSON) to ``<urlPrefix>/<verb>``; the answer's body when the status is 200.
        Raises ``ExtenderError`` worded as kube-scheduler's ``HTTPExtender.send`` errors."""
        import aiohttp

        url = where.url(verb)
        timeout = aiohttp.ClientTimeout(total=where.timeout)
        limit = response_limit(len(body))
        try:
            _refuse_literal(url, where.allow_link_local)
            async with self._session_for_loop(where.allow_link_local).post(
                url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
                ssl=where.ssl_context if where.ssl_context is not None else True,
                server_hostname=where.server_name,
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    redirect = " (redirects are not followed)" if 300 <= resp.status < 400 else ""
                    raise ExtenderError(
                        f"failed {verb} with extender at URL {url}, code {resp.status}{redirect}"
                    )
                return await _read_at_most(resp, limit, verb, url)
        except ExtenderError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as e:
            raise ExtenderError(_describe(url, e)) from e

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        resolvers, self._resolvers = self._resolvers, []
        for session in sessions.values():
            if not session.closed:
                with contextlib.suppress(RuntimeError):  # its loop is gone: nothing left to release
                    await session.close()
        for resolver in resolvers:
            with contextlib.suppress(RuntimeError):
                await resolver.close()


async def _read_at_most(resp: aiohttp.ClientResponse, limit: int, verb: str, url: str) -> bytes:
    """The answer's body; ``ExtenderError`` as soon as it is known to exceed ``limit`` bytes."""

    def too_large() -> ExtenderError:
        return ExtenderError(
            f"failed {verb} with extender at URL {url}: the answer exceeds {limit} bytes, the most this "
            "call accepts"
        )

    if (
        resp.content_length is not None
        and resp.content_length > limit
        and not resp.headers.get("Content-Encoding")
    ):
        raise too_large()
    body = bytearray()
    async for chunk in resp.content.iter_any():
        body += chunk
        if len(body) > limit:
            raise too_large()
    return bytes(body)
