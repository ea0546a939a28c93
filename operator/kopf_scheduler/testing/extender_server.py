"""A scripted scheduler extender for tests: an HTTP server on loopback (standard library, in a thread)
that answers each verb with what the test says (a JSON document, an HTTP status, after a delay) and keeps
every request it received. ``unused_url`` gives a URL nothing listens on; ``node_snapshot`` makes a
snapshot of a few named nodes.

    with FakeExtender({"filter": Answer({"NodeNames": ["n1"]})}) as ext:
        ...  # configure urlPrefix ext.url; ext.requests holds (verb, decoded body) pairs
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kopf_scheduler.backend.cache.snapshot import Snapshot
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.testing.builders import make_node


@dataclass(frozen=True)
class Answer:
    """What a verb answers: ``body`` (JSON-encoded unless bytes) with ``status``, after ``delay`` s."""

    body: Any = None
    status: int = 200
    delay: float = 0.0


#: a verb's answer, fixed or computed from the request's decoded body
Reply = Answer | Callable[[Any], Answer]


class FakeExtender:
    def __init__(self, verbs: Mapping[str, Reply], host: str = "127.0.0.1") -> None:
        self.verbs = dict(verbs)
        self.host = host
        #: (verb, decoded request body) in arrival order
        self.requests: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.server = ThreadingHTTPServer((host, 0), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="fake-extender", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server.server_port}"

    def verbs_called(self) -> list[str]:
        with self._lock:
            return [verb for verb, _ in self.requests]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                verb = self.path.rstrip("/").rsplit("/", 1)[-1]
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw) if raw else None
                with fake._lock:
                    fake.requests.append((verb, body))
                reply = fake.verbs.get(verb, Answer({"Error": f"no such verb {verb}"}, status=404))
                answer = reply(body) if callable(reply) else reply
                if answer.delay:
                    fake._stopping.wait(answer.delay)
                payload = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                try:
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up waiting (a timeout test)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler

    def __enter__(self) -> FakeExtender:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # delayed answers end now
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


def unused_url(host: str = "127.0.0.1") -> str:
    """``http://host:port`` with a port nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind((host, 0))
        port = s.getsockname()[1]
    return f"http://{host}:{port}"


__all__ = ["Answer", "FakeExtender", "Reply", "unused_url"]


def node_snapshot(*names: str) -> Snapshot:
    """A snapshot of nodes ``names`` (4 cpu, 8Gi, 10 pods each), as an extender call is made over."""
    snapshot = Snapshot()
    snapshot.rebuild(
        [NodeInfo(make_node().name(n).capacity(cpu="4", memory="8Gi", pods=10).obj()) for n in names]
    )
    return snapshot
