"""The secure port: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``, ``/flagz`` and ``/statusz`` served as
kube-scheduler serves them on 10259 (a probe copied from kube-scheduler's manifest works unchanged; the two
pages behind the gates ``ComponentFlagz`` and ``ComponentStatusz``, in ``zpages.py``'s formats).

HTTPS (TLS 1.2 or later) with ``--tls-cert-file``/``--tls-private-key-file``, re-read when the files
change (a rotated Secret), or else with a self-signed certificate made at start, as kube-scheduler does
without them (kept in memory: the deployment's root filesystem is read-only). The paths in
``--authorization-always-allow-paths`` (the probes) need no credentials; every other path needs a user the
API server authenticates and authorises (``k8s.delegated_auth``): Prometheus scrapes with its service
account token and a ClusterRole granting ``get`` on the non-resource URL ``/metrics``.
``--insecure-metrics`` serves plain HTTP on 127.0.0.1 without authentication, for development.

The server has a thread, an event loop and an API connection of its own: a scrape, and the reviews it
needs, never wait for the scheduling loop, so a stalled loop stays observable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import errno
import ipaddress
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from kopf_scheduler.k8s.connection import load_cert_chain
from kopf_scheduler.k8s.delegated_auth import DelegatedAuth
from kopf_scheduler.k8s.rest import RestClient
from kopf_scheduler.service import zpages
from kopf_scheduler.service.config import ServingConfig

log = logging.getLogger(__name__)

#: how often the certificate files are checked for a change
RELOAD_INTERVAL = 60.0
#: ``genericapifilters.WithCacheControl``: every answer of kube-scheduler's port carries it
CACHE_CONTROL = "no-cache, private"


class ServingError(Exception):
    """The port cannot be served as configured (a message naming the flag or the port)."""


def self_signed(host: str = "localhost") -> tuple[bytes, bytes]:
    """A certificate (PEM) for ``localhost``, 127.0.0.1, ::1 and this host's name, and its EC P-256 key,
    valid for a year: what kube-scheduler serves when it is given no certificate."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{int(now.timestamp())}")])
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    if socket.gethostname() not in ("", "localhost"):
        names.append(x509.DNSName(socket.gethostname()))
    names += [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class _Certificate:
    """The server's TLS context, with the certificate files re-read when they change."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        if bool(cert_file) != bool(key_file):
            raise ServingError("--tls-cert-file and --tls-private-key-file are given together or not at all")
        self.cert_file, self.key_file = cert_file, key_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._files_stamp()
        if cert_file:
            self._load_files()
        else:
            load_cert_chain(self.context, *self_signed())

    def _files_stamp(self) -> tuple[float, ...]:
        try:
            return tuple(os.stat(p).st_mtime for p in (self.cert_file, self.key_file) if p)
        except OSError:
            return ()

    def _load_files(self) -> None:
        for path in (self.cert_file, self.key_file):
            if not os.path.isfile(path):
                raise ServingError(f"--tls-cert-file/--tls-private-key-file: {path} does not exist")
        try:
            self.context.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as e:
            raise ServingError(f"--tls-cert-file/--tls-private-key-file cannot be loaded: {e}") from None

    def reload_if_changed(self) -> None:
        if not self.cert_file:
            return
        stamp = self._files_stamp()
        if stamp and stamp != self._stamp:
            try:
                self._load_files()
            except ServingError as e:
                log.warning("%s: still serving the previous certificate", e)
                return
            self._stamp = stamp
            log.info("serving certificate reloaded from %s", self.cert_file)


#: the media types kube-scheduler's handler chain writes its refusals in (its ``scheme.Codecs``; protobuf,
#: which it also offers, is not written here)
ERROR_MEDIA_TYPES = ("application/json", "application/yaml")


def _status(code: int, reason: str, message: str, request: web.Request) -> web.Response:
    """A refusal as kube-scheduler's handler chain writes it (``ErrorNegotiated``): the ``v1 Status`` in
    the media type the ``Accept`` header allows (details empty on a 403, absent on a 401; a 403 with
    ``X-Content-Type-Options: nosniff``, as ``RespondWithError`` sets it)."""
    fields: dict[str, object] = {"status": "Failure", "message": message, "reason": reason}
    if code != 401:
        fields["details"] = {}
    fields["code"] = code
    headers = {"X-Content-Type-Options": "nosniff"} if code == 403 else {}
    reply = zpages.error_reply(
        fields, request.headers.get("Accept", ""), _pretty(request), ERROR_MEDIA_TYPES, headers
    )
    return MetricsServer._reply(reply)


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def _pretty(request: web.Request) -> bool:
    """Upstream's ``isPrettyPrint``: a ``pretty`` query parameter (``strconv.ParseBool``) when given, else
    a curl, Wget or browser user agent."""
    if "pretty" in request.query_string:
        value = request.query.get("pretty", "")
        if value:
            return value in _TRUE
    agent = request.headers.get("User-Agent", "")
    return agent.startswith(("curl", "Wget", "Mozilla/5.0"))


class MetricsServer:
    def __init__(
        self,
        config: ServingConfig,
        registry: CollectorRegistry,
        ready: Callable[[], tuple[bool, str]] | None = None,
        make_rest: Callable[[], RestClient] | None = None,
        live: Callable[[], tuple[bool, str]] | None = None,
        pages: zpages.Pages | None = None,
    ) -> None:
        """``make_rest`` builds the client of the reviews (called on the server's thread); needed unless
        ``config.insecure``. ``pages``: ``/flagz`` and ``/statusz``, served where its gates are on."""
        if not config.insecure and make_rest is None:
            raise ServingError("the secure port needs an API connection for TokenReview")
        self.config = config
        self.registry = registry
        self.ready = ready
        #: /healthz and /livez: (healthy, why not); None: always healthy
        self.live = live
        self.pages = pages
        self._flagz_text = ""
        self._paths: list[str] = []
        self._make_rest = make_rest
        self._certificate = None if config.insecure else _Certificate(config.cert_file, config.key_file)
        self._auth: DelegatedAuth | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        local = self.config.insecure or self.config.bind_address in ("0.0.0.0", "::")
        host = "127.0.0.1" if local else self.config.bind_address
        return f"{'http' if self.config.insecure else 'https'}://{host}:{self.config.port}"

    def start(self) -> None:
        """Listens (``ServingError`` when the port is taken) and serves from the server's thread."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def thread_main() -> None:
            asyncio.set_event_loop(loop)
            try:
                runner = loop.run_until_complete(self._listen())
            except BaseException as e:
                started.set_exception(e)
                loop.close()
                return
            started.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._close(runner))
                loop.close()
                self._stopped.set()

        self._thread = threading.Thread(target=thread_main, name="metrics-server", daemon=True)
        self._thread.start()
        try:
            started.result()
        except OSError as e:
            problem = "is in use" if e.errno == errno.EADDRINUSE else "cannot be served"
            raise ServingError(f"metrics port {self.config.port} {problem} ({e})") from None

    async def _listen(self) -> web.AppRunner:
        if not self.config.insecure:
            assert self._make_rest is not None
            self._auth = DelegatedAuth(self._make_rest(), self.config.always_allow_paths)
        middlewares = [self._headers] if self.config.insecure else [self._headers, self._authorise]
        app = web.Application(middlewares=middlewares)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._livez)
        pages = self.pages
        if pages is not None and pages.flagz and pages.flags is not None:
            # upstream caches the text, so its separator stays the same for the process's life
            self._flagz_text = zpages.flagz_text(pages.flags, zpages.random_delimiter())
            app.router.add_get("/flagz", self._flagz)
        if pages is not None and pages.statusz:
            self._paths = sorted(r.resource.canonical for r in app.router.routes() if r.resource is not None)
            app.router.add_get("/statusz", self._statusz)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        address = "127.0.0.1" if self.config.insecure else self.config.bind_address
        ssl_context = None if self._certificate is None else self._certificate.context
        site = web.TCPSite(runner, address, self.config.port, ssl_context=ssl_context, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await self._close(runner)
            raise
        if self._certificate is not None and self._certificate.cert_file:
            asyncio.get_running_loop().create_task(self._reload_certificate(), name="certificate-reload")
        return runner

    async def _close(self, runner: web.AppRunner) -> None:
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()
        await runner.cleanup()
        if self._auth is not None:
            await self._auth.rest.close()

    async def _reload_certificate(self) -> None:
        assert self._certificate is not None
        while True:
            await asyncio.sleep(RELOAD_INTERVAL)
            self._certificate.reload_if_changed()

    @web.middleware
    async def _headers(self, request: web.Request, handler: Callable[..., object]) -> web.StreamResponse:
        """``Cache-Control`` on every answer, and a path not served answered as Go's ``http.NotFound``."""
        try:
            response = await handler(request)  # type: ignore[misc]
        except web.HTTPNotFound:
            response = web.Response(
                status=404,
                text="404 page not found\n",
                headers={"Content-Type": zpages.TEXT, "X-Content-Type-Options": "nosniff"},
            )
        assert isinstance(response, web.StreamResponse)
        response.headers.setdefault("Cache-Control", CACHE_CONTROL)
        return response

    @web.middleware
    async def _authorise(self, request: web.Request, handler: Callable[..., object]) -> web.StreamResponse:
        assert self._auth is not None
        decision = await self._auth.check(request.headers.get("Authorization"), request.path)
        if decision.status == 401:
            return _status(401, "Unauthorized", decision.message, request)
        if decision.status == 403:
            return _status(403, "Forbidden", decision.message, request)
        if not decision.allowed:
            return _status(decision.status, "InternalError", decision.message, request)
        response = await handler(request)  # type: ignore[misc]
        assert isinstance(response, web.StreamResponse)
        return response

    async def _metrics(self, request: web.Request) -> web.Response:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        body = encoder(self.registry)
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _flagz(self, request: web.Request) -> web.Response:
        assert self.pages is not None and self.pages.flags is not None
        flags = self.pages.flags
        return self._reply(
            zpages.answer(
                "flagz",
                request.headers.get("Accept", ""),
                lambda: self._flagz_text,
                lambda version: zpages.flagz_object(version, flags),
                _pretty(request),
            )
        )

    async def _statusz(self, request: web.Request) -> web.Response:
        assert self.pages is not None
        pages, now = self.pages, time.time()
        status = zpages.Status(
            pages.start_time, pages.go_version, pages.binary_version, pages.emulation_version, self._paths
        )
        return self._reply(
            zpages.answer(
                "statusz",
                request.headers.get("Accept", ""),
                lambda: zpages.statusz_text(status, zpages.random_delimiter(), now),
                lambda version: zpages.statusz_object(version, status, now),
                _pretty(request),
            )
        )

    @staticmethod
    def _reply(reply: zpages.Reply) -> web.Response:
        headers = {"Content-Type": reply.content_type, **reply.headers}
        return web.Response(status=reply.status, body=reply.body, headers=headers)

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, why = self.ready() if self.ready is not None else (True, "serving")
        return web.Response(status=200 if ok else 503, text=f"{'ok' if ok else 'not ready'}: {why}\n")

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._health("healthz")

    async def _livez(self, request: web.Request) -> web.Response:
        return self._health("livez")

    def _health(self, endpoint: str) -> web.Response:
        """As kube-scheduler's health endpoints answer: ``ok``, or 500 naming the failed check."""
        ok, why = self.live() if self.live is not None else (True, "")
        if ok:
            return web.Response(status=200, text="ok")
        return web.Response(status=500, text=f"[-]supervisor failed: {why}\n{endpoint} check failed\n")

    def stop(self, timeout: float = 5.0) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(loop.stop)
        self._stopped.wait(timeout)
