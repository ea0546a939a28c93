"""HTTP for scheduler extenders: one pooled aiohttp session shared by every extender of a scheduler, TLS
settings per extender, a time limit per call, and errors worded as Go's ``net/http`` words them (they end
up in FailedScheduling events, where users compare them with kube-scheduler's).

Guards: the session belongs to the event loop that created it and is replaced when used from another
one (``simulate`` runs a loop per run); ``close`` releases it; aiohttp is imported on first use, so
profiles without extenders never load it. The TLS settings are client-go's
``TLSConfigFor`` as kube-scheduler's ``makeTransport`` uses them: ``enableHTTPS`` without a CA skips
verification; a CA given replaces the system roots; ``*Data`` beats ``*File``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from kopf_scheduler.api.extenders import ExtenderSpec

if TYPE_CHECKING:
    import aiohttp


class ExtenderError(Exception):
    """A failed extender call; the message is what kube-scheduler would report for it."""


class TLSError(ValueError):
    """Unusable TLS settings (``field`` is relative to the extender's ``tlsConfig``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where and how one extender is called."""

    url_prefix: str
    #: None: aiohttp's default verification against the system roots (or plain HTTP)
    ssl_context: ssl.SSLContext | None
    server_name: str | None
    timeout: float | None

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
            raise TLSError("caData", f"unable to load root certificates: {e}") from None
    elif tls is not None and tls.ca_file:
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except (OSError, ssl.SSLError) as e:
            raise TLSError("caFile", f"unable to load root certificates: {e}") from None
    else:
        context.load_default_certs()
    if tls is not None and has_cert:
        has_cert_part = bool(tls.cert_data or tls.cert_file)
        if has_cert_part != bool(tls.key_data or tls.key_file):
            field = "keyFile" if has_cert_part else "certFile"
            raise TLSError(field, "a client certificate needs both a certificate and a key")
        try:
            with (
                _pem_file(tls.cert_data, tls.cert_file) as cert_path,
                _pem_file(tls.key_data, tls.key_file) as key_path,
            ):
                context.load_cert_chain(cert_path, key_path)
        except (OSError, ssl.SSLError) as e:
            field = "certData" if tls.cert_data else "certFile"
            raise TLSError(field, f"unable to load client certificate: {e}") from None
    return context


def endpoint(spec: ExtenderSpec) -> Endpoint:
    """Raises ``TLSError`` for unusable TLS settings."""
    server_name = spec.tls.server_name if spec.tls is not None and spec.tls.server_name else None
    return Endpoint(spec.url_prefix, ssl_context(spec), server_name, spec.http_timeout)


def _describe(url: str, exc: BaseException) -> str:
    """``Post "<url>": <cause>`` like Go's ``*url.Error``, with Go's words for the common causes."""
    import aiohttp

    if isinstance(exc, asyncio.TimeoutError):
        cause = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
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
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            # A session from a loop that has ended cannot be closed from this one; it is dropped.
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "kopf-scheduler"},
            )
            self._loop = loop
        return self._session

    async def post(self, where: Endpoint, verb: str, body: bytes) -> bytes:
        """POSTs ``body`` (JSON) to ``<urlPrefix>/<verb>``; the answer's body when the status is 200.
        Raises ``ExtenderError`` worded as kube-scheduler's ``HTTPExtender.send`` errors."""
        import aiohttp

        url = where.url(verb)
        timeout = aiohttp.ClientTimeout(total=where.timeout)
        try:
            async with self._session_for_loop().post(
                url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
                ssl=where.ssl_context if where.ssl_context is not None else True,
                server_hostname=where.server_name,
            ) as resp:
                if resp.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
                return await resp.read()
        except ExtenderError:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as e:
            raise ExtenderError(_describe(url, e)) from e

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            with contextlib.suppress(RuntimeError):  # its loop is gone: nothing left to release
                await session.close()
