"""Proxies to the API server: which one a connection takes (a kubeconfig ``proxy-url``, else Go's reading
of ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``), what is refused with one line naming the field, and
requests through a local ``CONNECT`` proxy (plain and TLS servers, proxy credentials, a refusal)."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from tunnel import splice

from kopf_scheduler.devcluster import pki
from kopf_scheduler.k8s.connection import ConfigError, ConnectionInfo, load_connection, load_kubeconfig
from kopf_scheduler.k8s.proxy import from_environment, parse, use_proxy
from kopf_scheduler.k8s.rest import RestClient


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "proxied"),
    [
        ("api.example.com", 443, "", True),
        ("localhost", 443, "", False),
        ("127.0.0.1", 6443, "", False),
        ("::1", 6443, "", False),
        ("api.example.com", 443, "*", False),
        ("api.example.com", 443, "example.com", False),
        ("example.com", 443, "example.com", False),
        ("example.com", 443, ".example.com", True),
        ("api.example.com", 443, ".example.com", False),
        ("api.example.com", 443, "*.example.com", False),
        ("example.com", 443, "*.example.com", True),
        ("badexample.com", 443, "example.com", True),
        ("API.Example.COM", 443, " Example.com ", False),
        ("api.example.com", 443, "example.com:6443", True),
        ("api.example.com", 6443, "example.com:6443", False),
        ("10.96.0.1", 443, "10.0.0.0/8", False),
        ("11.0.0.1", 443, "10.0.0.0/8", True),
        ("api.example.com", 443, "10.0.0.0/8", True),
        ("10.96.0.1", 443, "10.96.0.1", False),
        ("10.96.0.1", 443, "10.96.0.1:6443", True),
        ("10.96.0.1", 6443, "10.96.0.1:6443", False),
        ("fd00::1", 443, "fd00::/64", False),
        ("fd00::1", 443, "[fd00::1]:443", False),
        ("fd00::1", 443, "fd00::1", False),
        ("10.96.0.1", 443, "96.0.1", True),
        ("kubernetes.default.svc", 443, "other.org,.svc", False),
        ("api.example.com", 443, ":443", True),
    ],
    ids=lambda v: repr(v),
)
def test_no_proxy_matching_as_go(host: str, port: int, no_proxy: str, proxied: bool) -> None:
    assert use_proxy(host, port, no_proxy) is proxied


def test_environment_picks_by_scheme_upper_case_first() -> None:
    env = {"HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128", "http_proxy": "plain:8080"}
    https = from_environment("https://api.example.com:6443", env)
    assert https is not None and (https.host, https.port, https.source) == ("upper", 3128, "HTTPS_PROXY")
    plain = from_environment("http://api.example.com", env)  # no scheme: http://
    assert plain is not None and (plain.scheme, plain.host, plain.port) == ("http", "plain", 8080)
    lower = from_environment("https://api.example.com", {"https_proxy": "https://lower"})
    assert lower is not None and (lower.scheme, lower.port, lower.source) == ("https", 443, "https_proxy")
    assert from_environment("https://api.example.com", {"HTTP_PROXY": "http://p:1"}) is None
    assert from_environment("https://127.0.0.1:6443", env) is None
    assert from_environment("https://10.96.0.1", {**env, "no_proxy": "10.96.0.0/12"}) is None


def test_proxy_credentials_go_in_the_header() -> None:
    proxy = parse("http://us%40er:p%3Ass@proxy:3128", "HTTPS_PROXY")
    assert proxy.authorization == "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert proxy.address == "http://proxy:3128" and "p%3Ass" not in repr(proxy)


def kubeconfig(path: Path, cluster: dict[str, Any]) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
                "current-context": "x",
            }
        )
    )
    return path


def test_kubeconfig_proxy_url_wins_over_the_environment(tmp_path: Path) -> None:
    env = {"HTTPS_PROXY": "http://from-env:3128"}
    path = kubeconfig(
        tmp_path / "c", {"server": "https://api.example.com", "proxy-url": "https://p.corp:8443"}
    )
    info = load_kubeconfig(path, env=env)
    assert info.proxy is not None and info.proxy.address == "https://p.corp:8443"
    plain = load_kubeconfig(kubeconfig(tmp_path / "d", {"server": "https://api.example.com"}), env=env)
    assert plain.proxy is not None and plain.proxy.address == "http://from-env:3128"
    assert load_kubeconfig(path, env={}).reload().proxy == info.proxy


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("socks5://p:1080", "proxy-url: socks5 proxies are not supported (http and https proxies are)"),
        ("ftp://p", "proxy-url: unsupported scheme 'ftp', must be http, https, or socks5"),
        ("p.corp:3128", "proxy-url: unsupported scheme 'p.corp', must be http, https, or socks5"),
        ("http://:3128", "proxy-url: 'http://:3128' names no proxy host"),
    ],
)
def test_bad_proxy_url_is_one_line_naming_the_field(tmp_path: Path, url: str, message: str) -> None:
    path = kubeconfig(tmp_path / "c", {"server": "https://k", "proxy-url": url})
    with pytest.raises(ConfigError) as e:
        load_kubeconfig(path, env={})
    assert str(e.value) == f"{path}: clusters[c].cluster.{message}"


def test_socks5_in_the_environment_is_refused_by_name(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "c", {"server": "https://k"})
    with pytest.raises(ConfigError, match=r"^HTTPS_PROXY: socks5 proxies are not supported"):
        load_kubeconfig(path, env={"HTTPS_PROXY": "socks5://p:1080"})


# -- the lookup order ----------------------------------------------------------------------------------


def service_account(tmp_path: Path) -> Path:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_text("")
    (sa / "namespace").write_text("kube-system")
    return sa


IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_kubeconfig_list_merges_and_wins_over_in_cluster(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    first = kubeconfig(tmp_path / "first", {"server": "https://first"})
    second = kubeconfig(tmp_path / "second", {"server": "https://second"})
    env = {**IN_CLUSTER, "KUBECONFIG": f"{tmp_path / 'missing'}:{first}:{second}"}
    info = load_connection(env=env, sa_dir=sa)
    assert (info.server, info.default_namespace) == ("https://first", "team")


def test_kubeconfig_of_missing_files_falls_to_in_cluster(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    missing = f"{tmp_path / 'a'}:{tmp_path / 'b'}"
    info = load_connection(env={**IN_CLUSTER, "KUBECONFIG": missing}, sa_dir=sa)
    assert (info.source, info.server, info.default_namespace) == (
        "in-cluster",
        "https://10.96.0.1:443",
        "kube-system",
    )
    with pytest.raises(ConfigError, match=r"^\$KUBECONFIG: none of its files exists: "):
        load_connection(env={"KUBECONFIG": missing}, sa_dir=sa)
    with pytest.raises(ConfigError, match="not found"):  # an explicit file must exist
        load_connection(tmp_path / "a", env=IN_CLUSTER, sa_dir=sa)


def test_in_cluster_takes_the_environment_proxy_unless_no_proxy(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    env = {**IN_CLUSTER, "HTTPS_PROXY": "http://egress:3128"}
    proxied = load_connection(env=env, sa_dir=sa)
    assert proxied.proxy is not None and proxied.proxy.address == "http://egress:3128"
    assert load_connection(env={**env, "NO_PROXY": "10.96.0.0/12"}, sa_dir=sa).proxy is None


def test_context_in_cluster_is_refused(tmp_path: Path) -> None:
    sa = service_account(tmp_path)
    with pytest.raises(ConfigError, match="context 'other': no kubeconfig to find it in"):
        load_connection(context="other", env=IN_CLUSTER, sa_dir=sa)


# -- requests through a CONNECT proxy ------------------------------------------------------------------


@dataclass
class ConnectProxy:
    """A CONNECT proxy: records each request's head, answers ``status``, then relays bytes both ways."""

    status: str = "200 Connection established"
    heads: list[str] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        self.heads.append(head)
        target = head.split(" ")[1]
        writer.write(f"HTTP/1.1 {self.status}\r\n\r\n".encode())
        if not self.status.startswith("200"):
            writer.close()
            return
        host, _, port = target.rpartition(":")
        up_reader, up_writer = await asyncio.open_connection(host.strip("[]"), int(port))
        await splice((reader, writer), (up_reader, up_writer))


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        path = head.split(b" ")[1]
        body = b'{"path":"' + path + b'"}'
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    p = ConnectProxy()
    server = await asyncio.start_server(p.handle, "127.0.0.1", 0)
    p.port = server.sockets[0].getsockname()[1]
    yield p
    server.close()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.create(tmp_path_factory.mktemp("pki"))


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
async def test_requests_go_through_the_tunnel(proxy: ConnectProxy, certs: pki.Pki, tls: bool) -> None:
    server_ssl = None
    if tls:
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(certs.serving_cert, certs.serving_key)
    server = await asyncio.start_server(_answer, "127.0.0.1", 0, ssl=server_ssl)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if tls else "http"
    info = ConnectionInfo(
        f"{scheme}://127.0.0.1:{port}",
        ca_data=certs.ca_cert.read_bytes() if tls else None,
        proxy=parse(f"http://me:secret@127.0.0.1:{proxy.port}", "proxy-url"),
    )
    rest = RestClient(info)
    try:
        for n in range(2):
            response = await rest.request("GET", f"/api/v1/pods/{n}")
            assert (response.status, response.json()) == (200, {"path": f"/api/v1/pods/{n}"})
    finally:
        await rest.close()
        server.close()
    [head] = proxy.heads  # the kept-alive tunnel served both requests
    assert head.startswith(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n")
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'me:secret').decode()}\r\n" in head


async def test_a_refused_connect_is_no_answer_naming_the_proxy(proxy: ConnectProxy) -> None:
    proxy.status = "407 Proxy Authentication Required"
    info = ConnectionInfo("http://127.0.0.1:1", proxy=parse(f"http://127.0.0.1:{proxy.port}", "HTTP_PROXY"))
    rest = RestClient(info)
    try:
        response = await rest.request("GET", "/version")
    finally:
        await rest.close()
    assert response.status == 0
    refusal = "HTTP/1.1 407 Proxy Authentication Required"
    assert response.error.endswith(
        f"proxy http://127.0.0.1:{proxy.port} refused CONNECT 127.0.0.1:1: {refusal}"
    )


async def test_an_unreachable_proxy_is_named_with_its_source() -> None:
    info = ConnectionInfo("https://api.example.com", proxy=parse("http://127.0.0.1:1", "HTTPS_PROXY"))
    rest = RestClient(info)
    try:
        response = await rest.request("GET", "/version")
    finally:
        await rest.close()
    assert response.status == 0 and "ProxyError: proxy http://127.0.0.1:1 (HTTPS_PROXY): " in response.error


async def test_an_https_proxy_is_verified_like_the_server_and_carries_tls_inside(certs: pki.Pki) -> None:
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(certs.serving_cert, certs.serving_key)
    proxy = ConnectProxy()
    proxy_server = await asyncio.start_server(proxy.handle, "127.0.0.1", 0, ssl=serving)
    server = await asyncio.start_server(_answer, "127.0.0.1", 0, ssl=serving)
    proxy_port, port = (s.sockets[0].getsockname()[1] for s in (proxy_server, server))
    info = ConnectionInfo(
        f"https://localhost:{port}",  # TLS to the server inside TLS to the proxy
        ca_data=certs.ca_cert.read_bytes(),
        proxy=parse(f"https://127.0.0.1:{proxy_port}", "proxy-url"),
    )
    untrusted = ConnectionInfo(f"https://localhost:{port}", proxy=info.proxy)  # system CAs: the proxy fails
    rest, refused = RestClient(info), RestClient(untrusted)
    try:
        response = await rest.request("GET", "/api")
        failed = await refused.request("GET", "/api")
    finally:
        await rest.close()
        await refused.close()
        server.close()
        proxy_server.close()
    assert (response.status, response.json()) == (200, {"path": "/api"})
    assert [h.split("\r\n")[0] for h in proxy.heads] == [f"CONNECT localhost:{port} HTTP/1.1"]
    assert failed.status == 0 and "CERTIFICATE_VERIFY_FAILED" in failed.error
