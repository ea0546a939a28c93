"""The fault proxy's ``delay`` (``devcluster.fault_proxy``): a matching request is held, then delivered to
the API server, answered when the client still waits and delivered all the same when it gave up: a late
write reaches the server as the network would carry it. Against a local TLS server standing in for the
API server, which records when each request arrived."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from kopf_scheduler.devcluster.fault_proxy import Fault, FaultProxy
from kopf_scheduler.k8s.connection import load_cert_chain
from kopf_scheduler.service.secure_port import self_signed

BINDING = "/api/v1/namespaces/default/pods/p/binding"
HOLD = 0.8


@pytest.fixture
async def upstream(tmp_path: Path) -> AsyncIterator[tuple[list[tuple[float, str, str]], str, Path]]:
    """(what arrived: monotonic time, method, path), its URL, its CA file."""
    cert_pem, key_pem = self_signed()
    arrived: list[tuple[float, str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        arrived.append((time.monotonic(), request.method, request.path))
        return web.json_response({"kind": "Status", "code": 201}, status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_cert_chain(context, cert_pem, key_pem)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(cert_pem)
    yield arrived, f"https://localhost:{port}", ca_file
    await runner.cleanup()


async def test_a_delayed_request_is_delivered_late_even_when_its_client_gave_up(
    upstream: tuple[list[tuple[float, str, str]], str, Path],
) -> None:
    arrived, url, ca_file = upstream
    proxy = FaultProxy(url, ca_file, "token")
    proxy.start()
    try:
        fault = proxy.add(Fault("POST", r".*/pods/[^/]+/binding", "delay", seconds=HOLD, times=2))
        async with aiohttp.ClientSession() as session:
            sent = time.monotonic()
            with pytest.raises(TimeoutError):  # the client gives up long before the hold ends
                async with session.post(proxy.url + BINDING, data=b"{}", timeout=aiohttp.ClientTimeout(0.2)):
                    pass
            assert arrived == [], "held, not yet delivered"
            await asyncio.sleep(HOLD + 0.5)
            assert [(m, p) for _, m, p in arrived] == [("POST", BINDING)], "delivered, not dropped"
            assert arrived[0][0] - sent >= HOLD

            sent = time.monotonic()  # a client that waits gets the API server's answer, late
            async with session.post(proxy.url + BINDING, data=b"{}") as answer:
                assert answer.status == 201
            assert time.monotonic() - sent >= HOLD and len(arrived) == 2
            async with session.get(proxy.url + "/api/v1/pods") as answer:  # not matching: at once
                assert answer.status == 201
        assert fault.hits == 2 and [(m, p) for _, m, p in proxy.delivered] == [("POST", BINDING)] * 2
        assert [a for *_, a in proxy.requests] == ["delay", "delay", None]
    finally:
        proxy.stop()
