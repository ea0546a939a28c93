"""The connection pool against a local server that answers as scripted, byte for byte: the framings an
answer can have, kept-alive connections reused or found closed, answers cut short or malformed, timeouts,
cancellation and the connection limit. What the server received is checked from its own record."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest
from waiting import until

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.k8s.connection import ConnectionInfo
from kopf_scheduler.k8s.http_pool import HttpPool, NoAnswer
from kopf_scheduler.k8s.rest import RestClient


@dataclass
class Seen:
    connection: int
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


def ok(body: bytes = b'{"kind":"Status"}', status: int = 200, extra: str = "") -> list[bytes]:
    return [f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body]


#: a piece of an answer that closes the connection instead
CLOSE = b"<close>"
#: a piece of an answer that waits until the test sets the server's ``release`` event
WAIT = b"<wait>"
#: an answer: the pieces to write (with a pause between), "close" to close the connection at once, "hang"
#: to keep it open and silent
Script = Callable[[Seen, int], "list[bytes] | str"]


@dataclass
class Server:
    script: Script = lambda seen, n: ok()
    seen: list[Seen] = field(default_factory=list)
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number, answered = self.connections, 0
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                first, *lines = head.decode().rstrip("\r\n").split("\r\n")
                method, target, _ = first.split(" ")
                headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                seen = Seen(number, method, target, headers, body)
                self.seen.append(seen)
                action = self.script(seen, answered)
                answered += 1
                if action == "close":
                    return
                if action == "hang":
                    await asyncio.sleep(3600)
                for piece in action:
                    if piece == CLOSE:
                        return
                    if piece == WAIT:
                        await self.release.wait()
                        continue
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
        finally:
            self.open_now -= 1
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, int]]:
    state = Server()
    srv = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    yield state, port
    srv.close()


def get(path: str = "/x") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: h\r\n\r\n".encode()


def post(path: str = "/x", body: bytes = b"{}") -> bytes:
    return f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


async def test_kept_alive_connection_is_reused(server: tuple[Server, int]) -> None:
    state, port = server
    pool = HttpPool("127.0.0.1", port)
    for _ in range(3):
        answer = await pool.request("GET", get(), 5)
        assert (answer.status, answer.body) == (200, b'{"kind":"Status"}')
    assert state.connections == 1 and len(state.seen) == 3
    await pool.close()


async def test_chunked_answer_arrives_whole(server: tuple[Server, int]) -> None:
    state, port = server
    chunks = [b'{"items":[', b'"a",' * 3000, b'"b"]}']
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nRetry-After: 3\r\n\r\n"
    state.script = lambda seen, n: [head, *(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks), b"0\r\n\r\n"]
    pool = HttpPool("127.0.0.1", port)
    answer = await pool.request("GET", get(), 5)
    assert answer.body == b"".join(chunks) and answer.headers[b"retry-after"] == b"3"
    assert (await pool.request("GET", get(), 5)).body == b"".join(chunks)
    assert state.connections == 1
    await pool.close()


async def test_answer_that_ends_with_the_connection(server: tuple[Server, int]) -> None:
    state, port = server
    state.script = lambda seen, n: [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
        b"part one, ",
        b"two",
        CLOSE,
    ]
    pool = HttpPool("127.0.0.1", port)
    assert (await pool.request("GET", get(), 5)).body == b"part one, two"
    assert (await pool.request("GET", get(), 5)).body == b"part one, two"
    assert state.connections == 2, "a connection the server closes is not reused"
    await pool.close()


async def test_connection_close_header_is_honoured(server: tuple[Server, int]) -> None:
    state, port = server
    state.script = lambda seen, n: ok(extra="Connection: close\r\n")
    pool = HttpPool("127.0.0.1", port)
    await pool.request("GET", get(), 5)
    await pool.request("GET", get(), 5)
    assert state.connections == 2
    await pool.close()


async def test_idempotent_request_on_a_closed_kept_alive_connection_is_sent_again(
    server: tuple[Server, int],
) -> None:
    state, port = server
    # the server drops the connection when its second request arrives, with no answer
    state.script = lambda seen, n: "close" if n == 1 else ok()
    pool = HttpPool("127.0.0.1", port)
    await pool.request("GET", get(), 5)
    assert (await pool.request("GET", get("/again"), 5)).status == 200
    assert [(s.connection, s.target) for s in state.seen] == [(1, "/x"), (1, "/again"), (2, "/again")]
    await pool.close()


async def test_post_on_a_closed_kept_alive_connection_is_left_to_the_caller(
    server: tuple[Server, int],
) -> None:
    """The server may have acted on it: the binder reads the pod before it decides."""
    state, port = server
    state.script = lambda seen, n: "close" if n == 1 else ok(status=201)
    rest = RestClient(ConnectionInfo(f"http://127.0.0.1:{port}"))
    assert (await rest.request("POST", "/api/v1/a", b"{}")).status == 201
    response = await rest.request("POST", "/api/v1/b", b"{}")
    assert response.status == 0 and "closed the connection" in response.message()
    assert [s.target for s in state.seen] == ["/api/v1/a", "/api/v1/b"], "sent once"
    assert (await rest.request("POST", "/api/v1/c", b"{}")).status == 201
    await rest.close()


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"only part"], "mid-answer"),
        ([b"HTTP/1.1 200 OK\r\nContent-Le"], "mid-answer"),
        ([b"SMTP ready\r\n\r\n"], "malformed answer"),
    ],
)
async def test_answer_cut_short_or_malformed_is_no_answer(
    server: tuple[Server, int], answer: list[bytes], message: str
) -> None:
    state, port = server
    state.script = lambda seen, n: [*answer, CLOSE] if seen is state.seen[0] else ok()
    pool = HttpPool("127.0.0.1", port)
    with pytest.raises(NoAnswer, match=message):
        await pool.request("GET", get(), 5)
    assert (await pool.request("GET", get(), 5)).status == 200, "the next request gets a new connection"
    assert state.connections == 2
    await pool.close()


async def test_timeout_closes_the_connection_so_a_late_answer_cannot_be_read_as_the_next(
    server: tuple[Server, int],
) -> None:
    state, port = server

    def script(seen: Seen, n: int) -> list[bytes] | str:
        if seen.target == "/slow":
            return [WAIT, *ok(b'"late"')]  # answered only once the client has given up
        return ok(b'"fresh"')

    state.script = script
    pool = HttpPool("127.0.0.1", port)
    await pool.request("GET", get("/warm"), 5)
    with pytest.raises(TimeoutError):
        await pool.request("GET", get("/slow"), 0.01)
    state.release.set()  # the late answer goes out now, on the connection the client closed
    assert (await pool.request("GET", get("/next"), 5)).body == b'"fresh"'
    assert [(s.connection, s.target) for s in state.seen] == [(1, "/warm"), (1, "/slow"), (2, "/next")]
    await pool.close()


async def test_cancelled_request_closes_its_connection(server: tuple[Server, int]) -> None:
    state, port = server
    state.script = lambda seen, n: "hang" if seen.target == "/hang" else ok()
    pool = HttpPool("127.0.0.1", port)
    task = asyncio.create_task(pool.request("GET", get("/hang"), 5))
    await until(lambda: any(s.target == "/hang" for s in state.seen))  # the server has the request
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.open_connections == 0
    assert (await pool.request("GET", get(), 5)).status == 200
    assert state.connections == 2
    await pool.close()


async def test_requests_beyond_the_limit_wait_for_a_free_connection(server: tuple[Server, int]) -> None:
    state, port = server
    state.script = lambda seen, n: [b"", *ok()]  # 10 ms before each answer: the requests overlap
    pool = HttpPool("127.0.0.1", port, limit=3)
    answers = await asyncio.gather(*(pool.request("GET", get(f"/{i}"), 5) for i in range(12)))
    assert [a.status for a in answers] == [200] * 12
    assert state.most_open == 3 and state.connections == 3
    await pool.close()


async def test_connection_idle_past_keepalive_is_not_reused(server: tuple[Server, int]) -> None:
    state, port = server
    clock = VirtualClock()
    pool = HttpPool("127.0.0.1", port, keepalive=60.0, clock=clock)
    await pool.request("GET", get(), 5)
    clock.advance(59.9)
    await pool.request("GET", get(), 5)  # idle for less than the keep-alive: reused
    assert state.connections == 1
    clock.advance(60.0)
    await pool.request("GET", get(), 5)
    assert state.connections == 2
    await until(lambda: state.open_now == 1)  # the expired connection was closed, not left open
    await pool.close()


async def test_most_recently_used_connection_is_reused_first(server: tuple[Server, int]) -> None:
    """After a burst, a trickle of requests keeps one connection busy and lets the others expire."""
    state, port = server
    state.script = lambda seen, n: [b"", *ok()]
    clock = VirtualClock()
    pool = HttpPool("127.0.0.1", port, keepalive=60.0, clock=clock)
    await asyncio.gather(*(pool.request("GET", get(), 5) for _ in range(5)))
    assert state.connections == 5
    for _ in range(8):  # one request every 10 s: the one connection in use never idles for 60 s
        await pool.request("GET", get(), 5)
        clock.advance(10.0)
    assert len({s.connection for s in state.seen[5:]}) == 1
    assert pool.open_connections == 1
    await until(lambda: state.open_now == 1)  # the server saw the other four closed
    await pool.close()


async def test_rest_client_writes_the_request_a_server_expects(server: tuple[Server, int]) -> None:
    """Path prefix of the server URL, escaping, query, headers and body."""
    state, port = server
    rest = RestClient(ConnectionInfo(f"http://127.0.0.1:{port}/k8s/clusters/c-1"), user_agent="ua/1")
    response = await rest.request(
        "PATCH",
        "/api/v1/namespaces/ns/pods/p q",
        {"a": 1},
        content_type="application/merge-patch+json",
        params={"labelSelector": "app in (a,b)"},
    )
    assert response.status == 200 and response.json() == {"kind": "Status"}
    seen = state.seen[0]
    assert seen.method == "PATCH"
    assert seen.target == "/k8s/clusters/c-1/api/v1/namespaces/ns/pods/p%20q?labelSelector=app+in+%28a%2Cb%29"
    assert seen.headers["host"] == f"127.0.0.1:{port}"
    assert seen.headers["user-agent"] == "ua/1" and seen.headers["accept"] == "application/json"
    assert seen.headers["content-type"] == "application/merge-patch+json"
    assert seen.body == b'{"a":1}' and "accept-encoding" not in seen.headers
    await rest.close()


async def test_a_closed_connection_is_freed_without_the_cyclic_collector(server: tuple[Server, int]) -> None:
    """The scheduler freezes what survives a full collection (``service.gc_freeze``): a closed connection
    caught in a reference cycle would keep its TLS state until the next compaction."""
    _, port = server
    pool = HttpPool("127.0.0.1", port)
    enabled = gc.isenabled()
    gc.disable()
    try:
        assert (await pool.request("GET", get(), 5)).status == 200
        gone = weakref.ref(pool._idle[-1])
        await pool.close()  # its idle connection is closed
        for _ in range(5):
            await asyncio.sleep(0)  # connection_lost runs
        assert gone() is None
    finally:
        if enabled:
            gc.enable()
