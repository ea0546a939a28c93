"""Extender calls within bounds, over real HTTP on loopback (an aiohttp test server): redirects are not
followed, answers are size-capped, link-local and metadata addresses are refused (as written in the URL
and as a host name resolves), TLS files are read only from the TLS directory and their errors carry no OS
details, and a preempt answer may only narrow the candidates it was sent."""

from __future__ import annotations

import errno
import json
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kopf_scheduler.api.extenders import ExtenderSpec, TLSConfig
from kopf_scheduler.framework.extenders import (
    ExtenderError,
    ExtenderTransport,
    HTTPExtender,
    TLSError,
    build_extenders,
)
from kopf_scheduler.framework.extenders import scheduling as extending
from kopf_scheduler.framework.extenders import transport as transport_module
from kopf_scheduler.framework.extenders.transport import Endpoint, response_limit
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code
from kopf_scheduler.testing import make_pod
from kopf_scheduler.testing.extender_server import Answer, FakeExtender, node_snapshot

POD = PodInfo(make_pod().name("p").namespace("ns").uid("u1").priority(100).req(cpu="1").obj())
REFUSED = (
    "is a link-local or cloud metadata address: refused (the operator flag --allow-extender-link-local "
    "allows it)"
)


class Server:
    """An aiohttp server on 127.0.0.1: ``/prefix/<verb>`` answers as ``routes`` say; hits are counted."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.app = web.Application()
        self.app.router.add_post("/{where}/{verb}", self._handle)
        self.routes: dict[str, Any] = {}
        self.server = TestServer(self.app, host="127.0.0.1")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[path] = self.hits.get(path, 0) + 1
        await request.read()
        return await self.routes[path](request)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    s = Server()
    await s.server.start_server()
    yield s
    await s.server.close()


def _endpoint(url: str, timeout: float = 5.0) -> Endpoint:
    return Endpoint(url, None, None, timeout)


# -- time limit -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("configured", "used"), [(0.25, 0.25), (-1.0, 5.0), (0.0, 5.0), (1e9, 300.0)])
def test_every_call_has_a_time_limit(configured: float, used: float) -> None:
    """Validation refuses negative and absurd timeouts; a spec made in code cannot get around them."""
    assert (
        transport_module.endpoint(ExtenderSpec("http://127.0.0.1:1", http_timeout=configured)).timeout == used
    )


# -- redirects ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_redirects_are_not_followed(transport: ExtenderTransport, server: Server, code: int) -> None:
    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=code, headers={"Location": f"{server.url}/elsewhere/filter"})

    async def elsewhere(request: web.Request) -> web.Response:
        return web.json_response({"NodeNames": ["n1"]})

    server.routes = {"/prefix/filter": redirect, "/elsewhere/filter": elsewhere}
    with pytest.raises(ExtenderError) as e:
        await transport.post(_endpoint(server.url + "/prefix"), "filter", b"{}")
    assert str(e.value) == (
        f"failed filter with extender at URL {server.url}/prefix/filter, code {code} "
        "(redirects are not followed)"
    )
    assert server.hits == {"/prefix/filter": 1}


# -- answer size ----------------------------------------------------------------------------------------
def test_response_limit_grows_with_the_request() -> None:
    assert response_limit(0) == transport_module.MIN_RESPONSE_LIMIT == 8 * 1024 * 1024
    assert response_limit(10 * 1024 * 1024) == 40 * 1024 * 1024


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "chunked"])
async def test_an_oversized_answer_is_an_error(
    transport: ExtenderTransport, server: Server, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    monkeypatch.setattr(transport_module, "MIN_RESPONSE_LIMIT", 1000)

    async def answer(request: web.Request) -> web.StreamResponse:
        size = json.loads(await request.read())["size"]
        if not streamed:
            return web.Response(body=b" " * size, content_type="application/json")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(size // 100):
            await response.write(b" " * 100)
        await response.write_eof()
        return response

    server.routes = {"/prefix/filter": answer}
    where = _endpoint(server.url + "/prefix")

    async def post(size: int, request_size: int = 0) -> bytes:
        """An answer of ``size`` bytes to a request of (at least) ``request_size``."""
        request = json.dumps({"size": size}).encode()
        return await transport.post(where, "filter", request.ljust(request_size))

    assert len(await post(1000)) == 1000  # at the limit
    with pytest.raises(ExtenderError) as e:
        await post(1100)
    assert str(e.value) == (
        f"failed filter with extender at URL {server.url}/prefix/filter: the answer exceeds 1000 bytes, the "
        "most this call accepts"
    )
    assert len(await post(3200, request_size=800)) == 3200  # 4 x the request's 800 bytes
    with pytest.raises(ExtenderError):
        await post(3300, request_size=800)


async def test_an_oversized_filter_answer_fails_the_attempt_as_any_extender_error(
    transport: ExtenderTransport, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport_module, "MIN_RESPONSE_LIMIT", 1000)
    monkeypatch.setattr(transport_module, "RESPONSE_LIMIT_FACTOR", 0)

    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"NodeNames": ["n1"], "Error": "x" * 2000})

    server.routes = {"/prefix/filter": answer}
    ext = HTTPExtender(
        ExtenderSpec(server.url + "/prefix", filter_verb="filter", node_cache_capable=True), transport
    )
    with pytest.raises(extending.ExtenderFailure) as e:
        await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(1), node_snapshot("n1"), lambda *_: None
        )
    assert e.value.status.code == Code.ERROR
    assert "the answer exceeds 1000 bytes" in e.value.status.message()


# -- addresses ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://169.254.169.254/latest", "169.254.169.254"),
        ("http://[fe80::1]:8080/x", "fe80::1"),
        ("http://[fd00:ec2::254]/x", "fd00:ec2::254"),
    ],
    ids=["imds", "ipv6-link-local", "imds-ipv6"],
)
async def test_link_local_literals_are_refused_at_call_time(
    transport: ExtenderTransport, url: str, host: str
) -> None:
    """``ExtenderSpec``s made in code skip validation: the call itself refuses, before any connection."""
    [ext] = build_extenders([ExtenderSpec(url, filter_verb="filter")], transport)
    with pytest.raises(ExtenderError) as e:
        await ext.filter(POD, node_snapshot("n1").node_infos)
    assert str(e.value) == f'Post "{url}/filter": {host} {REFUSED}'
    assert transport._sessions == {}  # no session, so no connection, was even made


class FakeResolver:
    """Resolves every name as ``addresses`` say (no DNS in unit tests)."""

    addresses = {"imds.example.test": "169.254.169.254", "ext.example.test": "127.0.0.1"}

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[dict[str, Any]]:
        address = self.addresses[host]
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET,
                "proto": 0,
                "flags": 0,
            }
        ]

    async def close(self) -> None: ...


async def test_host_names_are_checked_as_they_resolve(
    transport: ExtenderTransport, server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aiohttp

    monkeypatch.setattr(aiohttp, "DefaultResolver", FakeResolver)

    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"NodeNames": ["n1"]})

    server.routes = {"/prefix/filter": answer}
    with pytest.raises(ExtenderError) as e:
        await transport.post(_endpoint("http://imds.example.test/prefix"), "filter", b"{}")
    assert str(e.value) == (
        f'Post "http://imds.example.test/prefix/filter": imds.example.test (169.254.169.254) {REFUSED}'
    )
    # a name resolving to loopback (as the e2e tests' extenders) is called
    port = server.server.port
    body = await transport.post(_endpoint(f"http://ext.example.test:{port}/prefix"), "filter", b"{}")
    assert body == b'{"NodeNames": ["n1"]}'


# -- TLS files ------------------------------------------------------------------------------------------
def _tls_spec(tls_dir: Path, **files: str) -> ExtenderSpec:
    return ExtenderSpec(
        "https://127.0.0.1:1/x", tls=TLSConfig(file_dir=str(tls_dir), **files), path="spec.extenders[0]"
    )


def test_a_symlink_out_of_the_tls_directory_is_refused(transport: ExtenderTransport, tmp_path: Path) -> None:
    tls_dir, outside = tmp_path / "tls", tmp_path / "outside"
    tls_dir.mkdir()
    outside.mkdir()
    (outside / "ca.pem").write_text("secret")
    (tls_dir / "ca.pem").symlink_to(outside / "ca.pem")
    with pytest.raises(TLSError) as e:
        build_extenders([_tls_spec(tls_dir, ca_file="ca.pem")], transport)
    assert e.value.field == "spec.extenders[0].tlsConfig.caFile"
    assert str(e.value) == "'ca.pem' is not a file in the extender TLS directory"


@pytest.mark.parametrize(
    ("files", "field", "message"),
    [
        (
            {"ca_file": "missing.pem"},
            "caFile",
            "unable to load root certificates from 'missing.pem': no such file",
        ),
        ({"ca_file": "."}, "caFile", "'.' is not a file in the extender TLS directory"),
        (
            {"ca_file": "data/ca.pem"},
            "caFile",
            "unable to load root certificates from 'data/ca.pem': not valid PEM data (or the key does not "
            "match the certificate)",
        ),
        (
            {"ca_file": "unreadable.pem"},
            "caFile",
            "unable to load root certificates from 'unreadable.pem': not readable",
        ),
        (
            {"cert_file": "data/ca.pem", "key_file": "data/ca.pem"},
            "certFile",
            "unable to load client certificate: not valid PEM data (or the key does not match the "
            "certificate)",
        ),
    ],
    ids=["missing", "the-directory", "garbage-through-a-symlink-inside", "unreadable", "garbage-client-cert"],
)
def test_tls_file_errors_carry_no_os_details(
    transport: ExtenderTransport,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    files: dict[str, str],
    field: str,
    message: str,
) -> None:
    """A Secret volume's layout: files are symlinks to ``..data/``, itself a symlink, all inside."""
    tls_dir = tmp_path / "tls"
    (tls_dir / "..2026_01_01").mkdir(parents=True)
    (tls_dir / "..2026_01_01" / "ca.pem").write_text("not a certificate")
    (tls_dir / "..data").symlink_to("..2026_01_01")
    (tls_dir / "data").symlink_to("..data")
    unreadable = tls_dir / "unreadable.pem"
    unreadable.write_text("x")
    # The OS's refusal to open it, as a process without root gets it for a mode-0 file (root reads any
    # file, so chmod alone would not refuse it wherever the tests run as root).
    load = ssl.SSLContext.load_verify_locations

    def refusing(context: ssl.SSLContext, cafile: Any = None, *args: Any, **kwargs: Any) -> None:
        if cafile is not None and os.path.realpath(cafile) == os.path.realpath(unreadable):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(cafile))
        load(context, cafile, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", refusing)
    with pytest.raises(TLSError) as e:
        build_extenders([_tls_spec(tls_dir, **files)], transport)
    assert e.value.field == f"spec.extenders[0].tlsConfig.{field}"
    assert str(e.value) == message
    assert str(tmp_path) not in str(e.value) and "Errno" not in str(e.value)


# -- preempt --------------------------------------------------------------------------------------------
def _victim(name: str, priority: int, node: str = "n1") -> PodInfo:
    return PodInfo(make_pod().name(name).namespace("ns").uid(name).node(node).priority(priority).obj())


async def test_a_preempt_answer_may_only_narrow_the_candidates(transport: ExtenderTransport) -> None:
    snapshot = node_snapshot("n1", "n2", "n3")
    low, other, high, elsewhere = (
        _victim("low", 1),
        _victim("other", 1),
        _victim("high", 500),
        _victim("n3-pod", 1, "n3"),
    )
    for pod in (low, other, high):
        snapshot.node_infos[0].add_pod(pod)
    snapshot.node_infos[2].add_pod(elsewhere)
    candidates = {"n1": ([low, other], 0), "n2": ([], 0)}

    def answer(victims: dict[str, list[str]]) -> Answer:
        return Answer(
            {
                "NodeNameToMetaVictims": {
                    n: {"Pods": [{"UID": u} for u in uids]} for n, uids in victims.items()
                }
            }
        )

    with FakeExtender(
        {
            "subset": answer({"n1": ["low"]}),
            "not-a-victim": answer({"n1": ["low", "high"]}),
            "not-a-candidate": answer({"n3": ["n3-pod"]}),
        }
    ) as fake:

        def ext(verb: str) -> HTTPExtender:
            return HTTPExtender(ExtenderSpec(fake.url, preempt_verb=verb, node_cache_capable=True), transport)

        kept = await ext("subset").process_preemption(POD, candidates, snapshot)
        assert kept == {"n1": ([low], 0)}
        with pytest.raises(ExtenderError) as e:
            await ext("not-a-victim").process_preemption(POD, candidates, snapshot)
        assert str(e.value) == (
            f"extender: {fake.url} claims to preempt pod ns/high (UID: high) on node: n1, but it is not "
            "one of that node's preemption victims"
        )
        with pytest.raises(ExtenderError) as e:
            await ext("not-a-candidate").process_preemption(POD, candidates, snapshot)
        assert (
            str(e.value)
            == f"extender: {fake.url} claims to preempt on node: n3, which is not a preemption candidate"
        )
        # a victim sent that is not of lower priority (the scheduler would not send one; checked anyway)
        with pytest.raises(ExtenderError) as e:
            await ext("not-a-victim").process_preemption(POD, {"n1": ([low, high], 0)}, snapshot)
        assert str(e.value) == (
            f"extender: {fake.url} claims to preempt pod ns/high (UID: high) on node: n1, but its priority "
            "500 is not lower than the preemptor's 100"
        )
