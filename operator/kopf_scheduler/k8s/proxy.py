"""Which proxy a connection to the API server goes through, decided as client-go decides it.

A kubeconfig cluster's ``proxy-url`` wins (client-go's ``parseProxyURL``: http, https or socks5; this
package connects through http and https proxies and refuses socks5 with one line naming the field).
Without one, the environment decides as Go's ``net/http.ProxyFromEnvironment`` (client-go's default
``Proxy`` for every config, the in-cluster one included): ``HTTPS_PROXY`` for an https server,
``HTTP_PROXY`` for an http one (the upper-case name first, then the lower-case one), a value without a
scheme taken as ``http://``, never for ``localhost`` or a loopback address, and not for a host that
``NO_PROXY`` matches (``golang.org/x/net/http/httpproxy``): ``*`` matches every host; ``10.0.0.0/8``
matches addresses in it; ``1.2.3.4`` or ``[::1]:6443`` match that address (on that port);
``example.com`` matches it and its subdomains, ``.example.com`` and ``*.example.com`` only the
subdomains (names match names only, never an address), each optionally with ``:port``.

``tunnel`` makes a connection through one: the proxy is reached in plain TCP (``http://``) or TLS
(``https://``, verified like the API server, as Go does with the transport's TLS settings), then asked to
``CONNECT`` to the API server's host and port (also for an ``http://`` server); the API server's own TLS
runs inside that tunnel. Credentials in the proxy URL go in ``Proxy-Authorization``.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from kopf_scheduler.k8s.kubeconfig import ConfigError

#: the schemes client-go accepts in ``proxy-url`` (and Go in the environment's proxy variables)
CLIENT_GO_SCHEMES = ("http", "https", "socks5")
#: the schemes connected through here
SUPPORTED_SCHEMES = ("http", "https")
_DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080}

P = TypeVar("P", bound=asyncio.Protocol)


class ProxyError(ConnectionError):
    """The proxy could not be reached, refused the tunnel or broke it: the message names the proxy."""


@dataclass(frozen=True)
class Proxy:
    scheme: str
    host: str
    port: int
    #: the ``Proxy-Authorization`` header value of the URL's user and password, if any
    authorization: str | None = field(default=None, repr=False)
    #: where it came from, for messages: ``HTTPS_PROXY`` or ``<file>: clusters[c].cluster.proxy-url``
    source: str = ""
    #: the URL as given (credentials included): what aiohttp (Kopf's client) is handed
    url: str = field(default="", repr=False)

    @property
    def address(self) -> str:
        """``scheme://host:port``, without credentials: safe for logs."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def parse(value: str, where: str, *, guess_scheme: bool = False) -> Proxy:
    """The proxy of URL ``value``; ``where`` names the field in messages. ``guess_scheme``: a value with no
    scheme is ``http://`` (Go's reading of the environment); else a scheme is required (client-go's
    reading of ``proxy-url``)."""
    text = value.strip()
    if guess_scheme and "://" not in text:
        text = "http://" + text
    try:
        url = urllib.parse.urlsplit(text)
        port = url.port
    except ValueError as e:
        raise ConfigError(f"{where}: {value!r} is not a proxy URL: {e}") from None
    scheme = url.scheme.lower()
    if scheme not in CLIENT_GO_SCHEMES:
        raise ConfigError(f"{where}: unsupported scheme {scheme!r}, must be http, https, or socks5")
    if scheme not in SUPPORTED_SCHEMES:
        raise ConfigError(f"{where}: {scheme} proxies are not supported (http and https proxies are)")
    if not url.hostname:
        raise ConfigError(f"{where}: {value!r} names no proxy host")
    authorization = None
    if url.username is not None:
        pair = f"{urllib.parse.unquote(url.username)}:{urllib.parse.unquote(url.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(
        scheme=scheme,
        host=url.hostname,
        port=port or _DEFAULT_PORTS[scheme],
        authorization=authorization,
        source=where,
        url=text,
    )


def _env_any(env: Mapping[str, str], *names: str) -> tuple[str, str]:
    for name in names:
        value = env.get(name)
        if value:
            return name, value
    return "", ""


def from_environment(server: str, env: Mapping[str, str] | None = None) -> Proxy | None:
    """The proxy Go's ``ProxyFromEnvironment`` picks for requests to ``server`` (None: connect directly)."""
    env = os.environ if env is None else env
    url = urllib.parse.urlsplit(server)
    scheme = url.scheme.lower()
    if scheme == "https":
        name, value = _env_any(env, "HTTPS_PROXY", "https_proxy")
    else:
        name, value = _env_any(env, "HTTP_PROXY", "http_proxy")
    if not value:
        return None
    host = (url.hostname or "").lower()
    port = url.port or (443 if scheme == "https" else 80)
    if not use_proxy(host, port, _env_any(env, "NO_PROXY", "no_proxy")[1]):
        return None
    return parse(value, name, guess_scheme=True)


def use_proxy(host: str, port: int, no_proxy: str) -> bool:
    """Whether a request to ``host:port`` goes through the environment's proxy under ``no_proxy``
    (``httpproxy.config.useProxy``: never for localhost and loopback addresses)."""
    host = host.strip().lower().strip("[]")
    if not host:
        return True
    if host == "localhost":
        return False
    ip = _ip(host)
    if ip is not None and ip.is_loopback:
        return False
    for entry in no_proxy.split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return False
        if _matches(entry, host, str(port), ip):
            return False
    return True


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _split_host_port(entry: str) -> tuple[str, str] | None:
    """Go's ``net.SplitHostPort``: ``host:port`` or ``[v6]:port``; None when ``entry`` is not of that form."""
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0 or entry[close + 1 : close + 2] != ":":
            return None
        return entry[1:close], entry[close + 2 :]
    if entry.count(":") != 1:
        return None
    host, port = entry.split(":")
    return host, port


def _matches(
    entry: str, host: str, port: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None
) -> bool:
    if "/" in entry:  # a CIDR matches IP hosts only; an entry that is not one matches nothing
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
        return ip is not None and ip in network
    split = _split_host_port(entry)
    entry_host, entry_port = split if split is not None else (entry, "")
    if not entry_host:
        return False  # ":80": no host part, ignored as Go ignores it
    entry_ip = _ip(entry_host)
    if entry_ip is not None:
        return ip is not None and ip == entry_ip and entry_port in ("", port)
    if ip is not None:
        return False  # a name matches names only
    if entry_host.startswith("*."):
        entry_host = entry_host[1:]
    match_host = not entry_host.startswith(".")
    if match_host:
        entry_host = "." + entry_host
    if host.endswith(entry_host) or (match_host and host == entry_host[1:]):
        return entry_port in ("", port)
    return False


class _ConnectAnswer(asyncio.Protocol):
    """A proxy's answer to ``CONNECT``: its head, up to the empty line."""

    MAX_HEAD = 64 * 1024

    def __init__(self) -> None:
        self.head: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._buffer = b""

    def data_received(self, data: bytes) -> None:
        if self.head.done():
            return
        self._buffer += data
        head, found, rest = self._buffer.partition(b"\r\n\r\n")
        if found and rest:  # the server speaks only after the client has
            self.head.set_exception(ProxyError("the proxy sent bytes after its answer to CONNECT"))
        elif found:
            self.head.set_result(head)
        elif len(self._buffer) > self.MAX_HEAD:
            self.head.set_exception(ProxyError("the proxy's answer to CONNECT has no end"))

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head.done():
            reason = f": {exc}" if exc else ""
            self.head.set_exception(
                ProxyError(f"the proxy closed the connection before answering CONNECT{reason}")
            )


async def tunnel(
    proxy: Proxy,
    host: str,
    port: int,
    protocol_factory: Callable[[], P],
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
) -> P:
    """A connection to ``host:port`` through ``proxy``'s ``CONNECT`` tunnel, speaking ``protocol_factory``'s
    protocol (over TLS with ``ssl_context``, verifying ``server_hostname``). Only a 200 opens the tunnel,
    as in Go. An https proxy is verified with ``ssl_context`` (the server's TLS settings), as Go's
    transport verifies it with its TLS config, or with the system's CAs for an http server."""
    loop = asyncio.get_running_loop()
    proxy_ssl = None
    if proxy.scheme == "https":
        proxy_ssl = ssl_context or ssl.create_default_context()
    try:
        transport, answer = await loop.create_connection(
            _ConnectAnswer,
            proxy.host,
            proxy.port,
            ssl=proxy_ssl,
            server_hostname=proxy.host if proxy_ssl is not None else None,
        )
    except OSError as e:  # say it was the proxy that could not be reached, not the server
        raise ProxyError(f"proxy {proxy.address} ({proxy.source}): {e}") from e
    try:
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        lines = [f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n"]
        if proxy.authorization:
            lines.append(f"Proxy-Authorization: {proxy.authorization}\r\n")
        lines.append("\r\n")
        transport.write("".join(lines).encode())
        try:
            head = await answer.head
        except ProxyError as e:
            raise ProxyError(f"proxy {proxy.address}: {e}") from None
        status_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or parts[1] != "200":
            raise ProxyError(f"proxy {proxy.address} refused CONNECT {target}: {status_line}")
        protocol = protocol_factory()
        if ssl_context is None:
            transport.set_protocol(protocol)
            protocol.connection_made(transport)
            return protocol
        tls = await loop.start_tls(transport, protocol, ssl_context, server_hostname=server_hostname)
        if tls is None:  # pragma: no cover - only when the transport closed during the handshake
            raise ProxyError(f"proxy {proxy.address}: the tunnel closed during the TLS handshake")
        protocol.connection_made(tls)
        return protocol
    except BaseException:
        transport.abort()
        raise
