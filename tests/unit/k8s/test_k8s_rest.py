"""The HTTP layer against a local aiohttp server: 401 rebuilds credentials once, no answer is status 0,
binding posts the right body and maps failures to ``APIError``."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import socket
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.binding import Binder, binding_body
from kopf_scheduler.k8s.connection import ConnectionInfo, StaticToken, load_cert_chain
from kopf_scheduler.k8s.rest import TLS_READ_BUFFER, RestClient, resource_path
from kopf_scheduler.service.secure_port import self_signed


class Server:
    def __init__(self) -> None:
        self.valid_token = "new"
        self.seen: list[tuple[str, str, str, Any]] = []
        self.delay = 0.0
        self.bound: dict[str, str] = {}

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.seen.append((request.method, request.path, request.headers.get("Authorization", ""),
                          json.loads(body) if body else None))  # fmt: skip
        if self.delay:
            await asyncio.sleep(self.delay)
        if request.headers.get("Authorization") != f"Bearer {self.valid_token}":
            return web.json_response({"kind": "Status", "message": "Unauthorized", "code": 401}, status=401)
        if request.path.endswith("/binding"):
            name = request.path.split("/")[-2]
            if name == "gone":
                return web.json_response(
                    {"kind": "Status", "message": f'pods "{name}" not found'}, status=404
                )
            if name in self.bound:
                message = (
                    f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned'
                )
                return web.json_response({"kind": "Status", "message": message}, status=409)
            self.bound[name] = json.loads(body)["target"]["name"]
            return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)
        return web.json_response({"kind": "Thing", "path": request.path})


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    state = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield state, f"http://127.0.0.1:{port}"
    await runner.cleanup()


def info_with_rotation(url: str) -> ConnectionInfo:
    reloads = []

    def reload() -> ConnectionInfo:
        reloads.append(1)
        return ConnectionInfo(url, token=StaticToken("new"), reloader=reload)

    return ConnectionInfo(url, token=StaticToken("old"), reloader=reload)


async def test_401_rebuilds_credentials_once_and_retries(server: tuple[Server, str]) -> None:
    state, url = server
    rest = RestClient(info_with_rotation(url))
    state.delay = 0.05
    responses = await asyncio.gather(*(rest.request("GET", f"/api/v1/x{i}") for i in range(5)))
    assert [r.status for r in responses] == [200] * 5
    assert rest.stats.credential_refreshes == 1
    assert rest.stats.requests == {("GET", 401): 5, ("GET", 200): 5}
    assert rest.info.auth_headers() == {"Authorization": "Bearer new"}
    state.valid_token = "newer"  # and the source has nothing better: the 401 stands
    assert (await rest.request("GET", "/api/v1/y")).status == 401
    await rest.close()


async def test_credential_rotations_close_the_pools_they_retire(server: tuple[Server, str]) -> None:
    """Each rotation here changes the TLS material, so each replaces the connection pool: the pool it
    retires is closed once the requests still running on it end (one is running during the first
    rotation), so after K rotations at most one old pool is alive, never K."""
    state, url = server
    reloads = 0

    def reload() -> ConnectionInfo:
        nonlocal reloads
        reloads += 1
        return ConnectionInfo(
            url, token=StaticToken(f"t{reloads}"), tls_server_name=f"name-{reloads}", reloader=reload
        )

    rest = RestClient(ConnectionInfo(url, token=StaticToken("t0"), reloader=reload))
    state.valid_token, state.delay = "t0", 0.3
    slow = asyncio.create_task(rest.request("GET", "/slow"))
    await asyncio.sleep(0.1)  # on its way on the first pool
    first, state.delay = rest.pool(), 0.0
    pools = [first]
    for k in range(1, 11):
        state.valid_token = f"t{k}"
        assert (await rest.request("GET", f"/api/v1/x{k}")).status == 200
        pools.append(rest.pool())
        alive = [p for p in pools[:-1] if p.open_connections or p in rest._retired]
        assert len(alive) <= 1, (k, len(alive))
    assert rest.stats.credential_refreshes == 10 and len(set(map(id, pools))) == 11
    assert (await slow).status == 200  # the request running during the rotation finished on its pool
    assert first.open_connections == 0 and len(rest._retired) <= 1  # closed, its last connection too
    await rest.close()


async def test_no_answer_is_status_zero() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rest = RestClient(ConnectionInfo(f"http://127.0.0.1:{port}"))
    response = await rest.request("GET", "/api/v1/namespaces")
    assert response.status == 0 and "ConnectionRefusedError" in response.message()
    await rest.close()


async def test_timeout_is_status_zero(server: tuple[Server, str]) -> None:
    state, url = server
    state.delay = 1.0
    rest = RestClient(ConnectionInfo(url, token=StaticToken("new")), timeout=0.1)
    response = await rest.request("GET", "/slow")
    assert response.status == 0 and "timed out" in response.message()
    await rest.close()


def pod(name: str, uid: str | None = "uid-1") -> PodInfo:
    meta: dict[str, Any] = {"name": name, "namespace": "ns"}
    if uid:
        meta["uid"] = uid
    return PodInfo({"metadata": meta, "spec": {"containers": [{"name": "c"}]}})


def test_binding_body() -> None:
    assert json.loads(binding_body(pod("p"), "node-1")) == {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"},
    }
    assert "uid" not in json.loads(binding_body(pod("p", uid=None), "n"))["metadata"]


async def test_bind_outcomes(server: tuple[Server, str]) -> None:
    state, url = server
    rest = RestClient(ConnectionInfo(url, token=StaticToken("new")))
    binder = Binder(rest, concurrency=2)
    await binder.bind(pod("a"), "n1")
    assert state.seen[-1][:2] == ("POST", "/api/v1/namespaces/ns/pods/a/binding")
    with pytest.raises(APIError) as conflict:
        await binder.bind(pod("a"), "n2")
    assert conflict.value.status == 409 and conflict.value.is_gone_or_conflict
    assert "is already assigned" in conflict.value.message
    with pytest.raises(APIError) as gone:
        await binder.bind(pod("gone"), "n1")
    assert gone.value.status == 404 and gone.value.is_gone_or_conflict
    assert dict(rest.stats.binds) == {"ok": 1, "conflict": 1, "gone": 1}
    assert rest.stats.bind_latency.count == 3
    await rest.close()


async def test_bind_concurrency_is_bounded(server: tuple[Server, str]) -> None:
    state, url = server
    state.delay = 0.05
    rest = RestClient(ConnectionInfo(url, token=StaticToken("new")))
    binder = Binder(rest, concurrency=3)
    in_flight = max_in_flight = 0
    original = rest.request

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, max_in_flight
        in_flight += 1
        max_in_flight = max(max_in_flight, in_flight)
        try:
            return await original(*args, **kwargs)
        finally:
            in_flight -= 1

    rest.request = counting  # type: ignore[method-assign]
    await asyncio.gather(*(binder.bind(pod(f"p{i}"), "n") for i in range(12)))
    assert max_in_flight == 3 and len(state.bound) == 12
    await rest.close()


def test_no_answer_bind_error_has_status_zero() -> None:
    error = APIError(0, "binding ns/p to n: timed out")
    assert not error.is_gone_or_conflict and str(error) == "binding ns/p to n: timed out"


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("v1", "pods", "p"), "/api/v1/namespaces/ns/pods/p/status"),
        (
            ("kopf-scheduler.io/v1alpha1", "schedulingprofiles", "x"),
            "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles/x/status",
        ),
    ],
)
def test_resource_path(args: tuple[str, str, str], path: str) -> None:
    namespace = "ns" if args[0] == "v1" else None
    assert resource_path(*args, namespace=namespace, subresource="status") == path


async def test_tls_connections_keep_small_read_buffers_and_large_bodies_arrive_whole() -> None:
    cert_pem, key_pem = self_signed()
    body = json.dumps({"items": [{"name": f"node-{i}", "pad": "x" * 500} for i in range(4000)]}).encode()

    async def big(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)  # the requests overlap: one connection each
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/big", big)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_cert_chain(context, cert_pem, key_pem)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rest = RestClient(ConnectionInfo(f"https://localhost:{port}", ca_data=cert_pem))
    try:
        responses = await asyncio.gather(*(rest.request("GET", "/big") for _ in range(4)))
        assert [r.status for r in responses] == [200] * 4
        assert all(r.body == body for r in responses), "a body of 2 MiB read 16 KiB at a time"
        assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER == 16 * 1024
    finally:
        await rest.close()
        await runner.cleanup()
