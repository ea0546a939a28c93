"""The fence at the wire (``k8s.fence``, ``HttpPool``'s ``before_write``): a write is judged when its
bytes leave on a ready connection, not when it starts. Each case lets the Lease lapse while the write
waits (for a pool slot, for a credential rebuild after a 401, for a TLS handshake the server holds) and
checks from the server's own record that no refused write reached it; reads pass unfenced."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from kopf_scheduler.k8s.connection import ConnectionInfo, StaticToken, load_cert_chain
from kopf_scheduler.k8s.fence import FencedRest, FencedWrite
from kopf_scheduler.k8s.rest import RestClient
from kopf_scheduler.service.secure_port import self_signed

BINDING = "/api/v1/namespaces/default/pods/p/binding"
BODY = b'{"kind":"Binding","target":{"name":"n1"}}'


@dataclass
class Server:
    """HTTP/1.1 over asyncio streams: records each request (method, path, token) as it arrives; a GET to
    ``/slow`` is answered once ``release`` is set; a token other than ``valid_token`` gets 401."""

    valid_token: str = "t"
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    connections: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                first, *lines = head.decode().rstrip("\r\n").split("\r\n")
                method, target, _ = first.split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
                await reader.readexactly(int(headers.get("content-length", 0)))
                token = headers.get("authorization", "").removeprefix("Bearer ")
                self.seen.append((method, target, token))
                if target == "/slow":
                    await self.release.wait()
                status = 401 if token != self.valid_token else 201 if method == "POST" else 200
                writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 2\r\n\r\n{{}}".encode())
                await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, str]]:
    state = Server()
    srv = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    yield state, f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    srv.close()


def fenced(rest: RestClient, leading: list[bool]) -> FencedRest:
    return FencedRest(rest, lambda: leading[0])


async def test_a_write_waiting_for_a_pool_slot_is_judged_when_it_leaves(server: tuple[Server, str]) -> None:
    state, url = server
    rest = RestClient(ConnectionInfo(url, token=StaticToken("t")), connections=1)
    leading = [True]
    writes = fenced(rest, leading)
    read = asyncio.create_task(writes.request("GET", "/slow"))  # holds the only slot
    while not state.seen:
        await asyncio.sleep(0.01)
    write = asyncio.create_task(writes.request("POST", BINDING, BODY))
    await asyncio.sleep(0.1)  # past the fence's first look, waiting for the slot
    leading[0] = False  # the Lease lapses while it waits
    state.release.set()
    assert (await read).status == 200
    with pytest.raises(FencedWrite, match="does not hold the leader Lease"):
        await write
    assert [(m, p) for m, p, _ in state.seen] == [("GET", "/slow")], "the server saw no binding"
    assert writes.refused == 1
    # the slot was freed and the connection, never written on, is reused; reads are not fenced
    assert (await writes.request("GET", "/api/v1/pods")).status == 200
    assert state.connections == 1
    await rest.close()


async def test_no_resend_after_a_credential_rebuild_once_the_lease_lapsed(server: tuple[Server, str]) -> None:
    state, url = server
    leading = [True]

    def reload() -> ConnectionInfo:  # slow enough (an exec plugin, say) that the Lease lapses meanwhile
        leading[0] = False
        return ConnectionInfo(url, token=StaticToken("t"), reloader=reload)

    rest = RestClient(ConnectionInfo(url, token=StaticToken("old"), reloader=reload))
    writes = fenced(rest, leading)
    with pytest.raises(FencedWrite):
        await writes.request("POST", BINDING, BODY)
    assert state.seen == [("POST", BINDING, "old")], "answered 401, then not sent again"
    assert rest.stats.credential_refreshes == 1
    # a read after the rebuild passes with the new credentials
    assert (await writes.request("GET", "/api/v1/pods")).status == 200
    await rest.close()


async def test_a_write_on_a_new_connection_is_judged_after_the_tls_handshake() -> None:
    """The server's listening socket accepts nothing until released: the kernel completes the TCP
    handshake, the TLS handshake waits on the server, and the Lease lapses meanwhile."""
    cert_pem, key_pem = self_signed()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    load_cert_chain(context, cert_pem, key_pem)
    state = Server()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        port = sock.getsockname()[1]
        srv = await asyncio.start_server(state.handle, sock=sock, ssl=context, start_serving=False)
        rest = RestClient(
            ConnectionInfo(f"https://localhost:{port}", ca_data=cert_pem, token=StaticToken("t"))
        )
        leading = [True]
        writes = fenced(rest, leading)
        try:
            write = asyncio.create_task(writes.request("POST", BINDING, BODY))
            await asyncio.sleep(0.2)  # connected in the kernel, the handshake held
            assert not write.done() and state.connections == 0
            leading[0] = False
            await srv.start_serving()
            with pytest.raises(FencedWrite):
                await write
            for _ in range(100):  # the server's side of the handshake may finish a moment later
                if state.connections:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            assert state.connections == 1 and state.seen == [], "handshake done, nothing written"
            leading[0] = True  # the connection is kept: the next write goes out on it
            assert (await writes.request("POST", BINDING, BODY)).status == 201
            assert state.connections == 1 and [m for m, _, _ in state.seen] == ["POST"]
        finally:
            await rest.close()
            srv.close()
            with contextlib.suppress(Exception):
                await srv.wait_closed()
