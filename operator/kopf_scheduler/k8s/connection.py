"""Where the API server is and how to authenticate to it: ``ConnectionInfo``, and loading it from a
kubeconfig (``load_kubeconfig``, over the files ``kubeconfig`` reads) or from the pod's service account.

``load_connection`` is the one place credentials are resolved: the scheduler's own client, Kopf's login
in both processes of ``kopf-scheduler run`` (``handlers.login``) and the command line all call it. Its
order: an explicit kubeconfig path (``--kubeconfig``), then ``$KUBECONFIG`` (a path list, merged as
client-go merges it; when none of its files exists, on to the in-cluster service account, as client-go
goes on from an empty configuration), then the in-cluster service account, then ``~/.kube/config``
(controller-runtime's order over client-go's loaders; kube-scheduler's ``BuildConfigFromFlags`` tries
in-cluster before ``$KUBECONFIG``, kubectl ``~/.kube/config`` before in-cluster). The proxy of the
connection (``proxy``: a cluster's ``proxy-url``, else ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``) is
decided at the same time. Bearer tokens read from files (the service account's projected
token, a kubeconfig ``tokenFile``) are re-read every minute, as client-go's cached file token source does,
so a rotated token is picked up without a restart; a 401 makes the client call ``reload()``, which
re-reads everything from the original source (token, CA, client certificates).
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kopf_scheduler.k8s import kubeconfig as kc
from kopf_scheduler.k8s import proxy as proxies
from kopf_scheduler.k8s.kubeconfig import ConfigError
from kopf_scheduler.k8s.proxy import Proxy

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: how long a token read from a file is trusted before the file is read again (client-go: 1 minute).
TOKEN_FILE_REFRESH = 60.0
DEFAULT_KUBECONFIG = Path("~/.kube/config")


class TokenSource(Protocol):
    def token(self) -> str:
        """The current bearer token ('' for none)."""

    def invalidate(self) -> None:
        """Forget any cached token (the server answered 401)."""


@dataclass
class StaticToken:
    value: str = field(repr=False)

    def token(self) -> str:
        return self.value

    def invalidate(self) -> None:
        return None


@dataclass
class FileToken:
    """A token kept in a file that something else rotates (kubelet for projected service-account tokens)."""

    path: Path
    refresh: float = TOKEN_FILE_REFRESH
    now: Callable[[], float] = time.monotonic
    _value: str = field(default="", repr=False)
    _read_at: float | None = field(default=None, repr=False)

    def token(self) -> str:
        now = self.now()
        if self._read_at is None or now - self._read_at >= self.refresh:
            try:
                self._value = self.path.read_text().strip()
            except OSError as e:
                if self._read_at is None:
                    raise ConfigError(f"{self.path}: cannot read token: {e}") from None
                # keep the last good token: the file is being replaced; try again next time
            self._read_at = now
        return self._value

    def invalidate(self) -> None:
        self._read_at = None


@dataclass
class CallableToken:
    """A token produced by code (an exec credential plugin run through the ``kubernetes`` package)."""

    fetch: Callable[[], str]

    def token(self) -> str:
        return self.fetch()

    def invalidate(self) -> None:
        return None


@dataclass
class ConnectionInfo:
    server: str
    ca_data: bytes | None = None  # PEM; None means the system trust store
    insecure: bool = False
    tls_server_name: str | None = None
    client_cert: bytes | None = None  # PEM
    client_key: bytes | None = field(default=None, repr=False)  # PEM
    token: TokenSource | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    default_namespace: str = "default"
    #: where this came from, for messages: ``in-cluster`` or ``kubeconfig <path> (context <name>)``.
    source: str = ""
    #: the proxy every connection goes through (None: direct); see ``k8s.proxy``
    proxy: Proxy | None = None
    reloader: Callable[[], ConnectionInfo] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.server = self.server.rstrip("/")
        if not self.server.startswith(("https://", "http://")):
            raise ConfigError(f"{self.source or 'connection'}: server {self.server!r} is not an http(s) URL")
        credentials = self.token is not None or self.password is not None
        if credentials and self.server.startswith("http://") and not _loopback(self.server):
            raise ConfigError(
                f"{self.source or 'connection'}: server {self.server!r} is plain http: a token or password "
                "would cross the network in clear text (use https, or http only to a loopback address)"
            )

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS settings for connections to the server (None for plain http)."""
        if not self.server.startswith("https://"):
            return None
        # without cadata the system trust store is used
        ctx = ssl.create_default_context(cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert and self.client_key:
            load_cert_chain(ctx, self.client_cert, self.client_key)
        return ctx

    def auth_headers(self) -> dict[str, str]:
        token = self.token.token() if self.token is not None else ""
        if token:
            return {"Authorization": f"Bearer {token}"}
        if self.username is not None and self.password is not None:
            pair = f"{self.username}:{self.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}

    @property
    def tls_material(
        self,
    ) -> tuple[bytes | None, bytes | None, bytes | None, bool, str | None, Proxy | None]:
        """What connections are built from (the SSL context, the proxy): a change means the connection
        pool must be rebuilt."""
        return (
            self.ca_data,
            self.client_cert,
            self.client_key,
            self.insecure,
            self.tls_server_name,
            self.proxy,
        )

    def reload(self) -> ConnectionInfo:
        """Fresh credentials from the original source (after a 401); self when there is no source."""
        if self.token is not None:
            self.token.invalidate()
        return self.reloader() if self.reloader is not None else self


def load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """``ssl`` reads client certificates only from files: write them to private temporary files (in
    memory-backed /dev/shm when there is one) for the moment it takes to load them."""
    shm = Path("/dev/shm")
    directory = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    paths: list[str] = []
    try:
        for data in (cert, key):
            fd, path = tempfile.mkstemp(prefix="kopf-scheduler-", suffix=".pem", dir=directory)
            paths.append(path)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        ctx.load_cert_chain(paths[0], paths[1])
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"client certificate/key cannot be loaded: {e}") from None
    finally:
        for path in paths:
            with contextlib.suppress(OSError):
                os.unlink(path)


def is_in_cluster(env: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> bool:
    env = os.environ if env is None else env
    return (
        bool(env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT"))
        and (sa_dir / "token").is_file()
    )


def in_cluster(env: Mapping[str, str] | None = None, sa_dir: Path = SERVICE_ACCOUNT_DIR) -> ConnectionInfo:
    """The pod's service account: ``$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``, its CA, its
    (rotating) token and its namespace."""
    env = dict(os.environ if env is None else env)
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    token_file = sa_dir / "token"
    if not token_file.is_file():
        raise ConfigError(f"in-cluster: {token_file} does not exist")
    ca_file = sa_dir / "ca.crt"
    try:
        ca_data = ca_file.read_bytes()
    except OSError as e:
        raise ConfigError(f"in-cluster: {ca_file}: {e}") from None
    try:
        namespace = (sa_dir / "namespace").read_text().strip() or "default"
    except OSError:
        namespace = "default"
    token = FileToken(token_file)
    token.token()  # fail now, not at the first request, when it cannot be read
    server = f"https://{host}:{port}"
    return ConnectionInfo(
        server=server,
        ca_data=ca_data,
        token=token,
        default_namespace=namespace,
        source="in-cluster",
        # client-go's in-cluster config leaves the proxy to the environment, as every config does
        proxy=proxies.from_environment(server, env),
        reloader=lambda: in_cluster(env, sa_dir),
    )


def load_kubeconfig(
    paths: str | Path | Sequence[str | Path],
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ConnectionInfo:
    """The connection of ``context`` (default: the current context) in the merged kubeconfig files;
    ``env``: where ``HTTPS_PROXY`` and the like are read when the cluster has no ``proxy-url``."""
    env = os.environ if env is None else env
    path_list = kc.split_paths(paths)
    found = kc.find_context(path_list, context=context)
    user, cluster = found.user, found.cluster
    where_c, where_u = f"clusters[{found.cluster_name}].cluster", f"users[{found.user_name}].user"

    token: TokenSource | None = None
    cert = key = None
    username = password = None
    if user is not None:
        cert = kc.file_or_data(user, "client-certificate", "client-certificate-data", where_u)
        key = kc.file_or_data(user, "client-key", "client-key-data", where_u)
        if (cert is None) != (key is None):
            raise ConfigError(
                f"{user.origin}: {where_u}: a client certificate needs its key (and vice versa)"
            )
        if user.body.get("token"):
            token = StaticToken(str(user.body["token"]))
        elif user.body.get("tokenFile"):
            token_path = user.base / Path(str(user.body["tokenFile"])).expanduser()
            token = FileToken(token_path)
            token.token()
        elif user.body.get("exec") or user.body.get("auth-provider"):
            fetch, plugin_cert, plugin_key = kc.plugin_credentials(found, user)
            token = CallableToken(fetch) if fetch is not None else None
            cert, key = cert or plugin_cert, key or plugin_key
        if user.body.get("username") is not None and user.body.get("password") is not None:
            username, password = str(user.body["username"]), str(user.body["password"])

    proxy_url = cluster.body.get("proxy-url")
    proxy: Proxy | None
    if proxy_url:
        proxy = proxies.parse(str(proxy_url), f"{cluster.origin}: {where_c}.proxy-url")
    else:
        proxy = proxies.from_environment(found.server, env)
    return ConnectionInfo(
        server=found.server,
        ca_data=kc.file_or_data(cluster, "certificate-authority", "certificate-authority-data", where_c),
        insecure=bool(cluster.body.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.body.get("tls-server-name") or None,
        client_cert=cert,
        client_key=key,
        token=token,
        username=username,
        password=password,
        default_namespace=str(found.context.body.get("namespace") or "default"),
        source=f"kubeconfig {found.files} (context {found.name})",
        proxy=proxy,
        reloader=lambda: load_kubeconfig(path_list, context=context, env=env),
    )


def load_connection(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    sa_dir: Path = SERVICE_ACCOUNT_DIR,
) -> ConnectionInfo:
    """The one credential resolver (see the module): an explicit kubeconfig, else ``$KUBECONFIG``, else
    the in-cluster service account, else ``~/.kube/config``; ``context`` picks a kubeconfig context."""
    env = os.environ if env is None else env
    if kubeconfig is not None and str(kubeconfig):
        return load_kubeconfig(kubeconfig, context=context, env=env)
    listed = env.get("KUBECONFIG") or ""
    if listed:
        paths = kc.split_paths(listed)
        if any(p.expanduser().exists() for p in paths):
            return load_kubeconfig(paths, context=context, env=env)
        if not is_in_cluster(env, sa_dir):  # client-go: an empty configuration, then in-cluster
            raise ConfigError(f"$KUBECONFIG: none of its files exists: {listed}")
    if is_in_cluster(env, sa_dir):
        if context:
            raise ConfigError(f"context {context!r}: no kubeconfig to find it in (in-cluster has none)")
        return in_cluster(env, sa_dir)
    default = DEFAULT_KUBECONFIG.expanduser()
    if default.is_file():
        return load_kubeconfig(default, context=context, env=env)
    raise ConfigError(
        "no cluster configuration: pass --kubeconfig, set KUBECONFIG, run in a cluster, write ~/.kube/config"
    )


__all__ = [
    "CallableToken",
    "ConfigError",
    "ConnectionInfo",
    "FileToken",
    "StaticToken",
    "TokenSource",
    "in_cluster",
    "is_in_cluster",
    "load_connection",
    "load_kubeconfig",
]


def _loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
