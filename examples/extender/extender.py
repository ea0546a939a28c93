#!/usr/bin/env python3
"""An example scheduler extender: a small HTTP server (Python standard library only) that speaks
kube-scheduler's extender protocol, so kube-scheduler and kopf-scheduler can both use it.

Verbs (POST ``<any prefix>/<verb>``, JSON in and out, field names as kube-scheduler sends them):

- ``filter``: a node passes when its label ``example.com/extender`` is ``allow``; a node labelled
  ``never`` fails as unresolvable (preemption cannot help there), any other node fails with a reason.
- ``prioritize``: the node's label ``example.com/extender-score`` (0..10; absent or bad: 0).
- ``bind``: POSTs the pod's ``binding`` to the API server given with ``--api-server`` (and
  ``--token-file``, ``--ca-file``); without one it accepts the binding and does nothing (for
  ``kopf-scheduler simulate``, which then takes the pod as bound).
- ``preempt``: keeps every candidate node and its victims, answered by UID as kube-scheduler expects.

A nodeCacheCapable configuration sends node names only; this extender keeps no node cache, so it then
passes every node and scores each 0. Every request is logged as one JSON line (``--record FILE``), and
kept in ``ExampleExtender.requests`` when the server runs inside another program.

Run it: ``python examples/extender/extender.py --port 8888``, then apply ``profile.yaml`` (same folder).
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FILTER_LABEL = "example.com/extender"
SCORE_LABEL = "example.com/extender-score"
ALLOW, NEVER = "allow", "never"
VERBS = ("filter", "prioritize", "bind", "preempt")


def _field(doc: Mapping[str, Any], name: str) -> Any:
    """A field as Go's encoding/json finds it: the exact key, else a key equal ignoring case."""
    if name in doc:
        return doc[name]
    return next((v for k, v in doc.items() if k.lower() == name.lower()), None)


def _labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _candidates(args: Mapping[str, Any]) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """(node objects or None when only names were sent, node names)."""
    node_list = _field(args, "Nodes")
    if node_list is not None:
        nodes = list(node_list.get("items") or ())
        return nodes, [_name(n) for n in nodes]
    return None, list(_field(args, "NodeNames") or ())


class ExampleExtender:
    """The extender's logic and its HTTP server; ``start`` serves it from a thread, ``stop`` ends it."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        api_server: str = "",
        token: str = "",
        ca_file: str = "",
        record: str = "",
    ) -> None:
        self.host = host
        self.api_server = api_server.rstrip("/")
        self.token = token
        self.ca_file = ca_file
        self.record = record
        #: one entry per request: {"path", "verb", "pod": "ns/name", "uid", "nodes": [...]}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer((host, port), self._handler_class())
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.server.server_port}"

    # -- verbs ---------------------------------------------------------------------------------------
    def filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        nodes, names = _candidates(args)
        if nodes is None:  # nodeCacheCapable: no labels to look at
            return {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
        passed, failed, unresolvable = [], {}, {}
        for node in nodes:
            value = _labels(node).get(FILTER_LABEL)
            if value == ALLOW:
                passed.append(node)
            elif value == NEVER:
                unresolvable[_name(node)] = f"node(s) had label {FILTER_LABEL}={NEVER}"
            else:
                failed[_name(node)] = f"node(s) didn't have label {FILTER_LABEL}={ALLOW}"
        return {
            "Nodes": {"metadata": {}, "items": passed},
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }

    def prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        nodes, names = _candidates(args)
        if nodes is None:
            return [{"Host": name, "Score": 0} for name in names]
        scores = []
        for node in nodes:
            try:
                score = min(max(int(_labels(node).get(SCORE_LABEL, "0")), 0), 10)
            except ValueError:
                score = 0
            scores.append({"Host": _name(node), "Score": score})
        return scores

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if not self.api_server:
            return {"Error": ""}
        namespace, name = _field(args, "PodNamespace"), _field(args, "PodName")
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": _field(args, "PodUID")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": _field(args, "Node")},
        }
        request = urllib.request.Request(
            f"{self.api_server}/api/v1/namespaces/{namespace}/pods/{name}/binding",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        context = ssl.create_default_context(cafile=self.ca_file or None)
        try:
            with urllib.request.urlopen(request, timeout=10, context=context):
                return {"Error": ""}
        except urllib.error.HTTPError as e:
            return {
                "Error": f"binding {namespace}/{name}: HTTP {e.code}: {e.read().decode(errors='replace')}"
            }
        except OSError as e:
            return {"Error": f"binding {namespace}/{name}: {e}"}

    def preempt(self, args: Mapping[str, Any]) -> dict[str, Any]:
        meta = _field(args, "NodeNameToMetaVictims")
        if meta is not None:
            return {"NodeNameToMetaVictims": meta}
        kept = {}
        for node, victims in (_field(args, "NodeNameToVictims") or {}).items():
            pods = _field(victims, "Pods") or []
            kept[node] = {
                "Pods": [{"UID": (p.get("metadata") or {}).get("uid", "")} for p in pods],
                "NumPDBViolations": _field(victims, "NumPDBViolations") or 0,
            }
        return {"NodeNameToMetaVictims": kept}

    # -- serving -------------------------------------------------------------------------------------
    def note(self, path: str, verb: str, args: Mapping[str, Any]) -> None:
        pod = _field(args, "Pod") or {}
        meta = pod.get("metadata") or {}
        entry: dict[str, Any] = {"path": path, "verb": verb}
        if verb == "bind":
            entry["pod"] = f"{_field(args, 'PodNamespace')}/{_field(args, 'PodName')}"
            entry["uid"] = _field(args, "PodUID")
            entry["nodes"] = [_field(args, "Node")]
        else:
            entry["pod"] = f"{meta.get('namespace')}/{meta.get('name')}"
            entry["uid"] = meta.get("uid")
            if verb == "preempt":
                victims = _field(args, "NodeNameToVictims") or _field(args, "NodeNameToMetaVictims") or {}
                entry["nodes"] = sorted(victims)
            else:
                entry["nodes"] = _candidates(args)[1]
        with self._lock:
            self.requests.append(entry)
            if self.record:
                with open(self.record, "a") as f:
                    f.write(json.dumps(entry) + "\n")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        extender = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as kube-scheduler's client expects

            def do_POST(self) -> None:
                verb = self.path.rstrip("/").rsplit("/", 1)[-1]
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    args = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._reply(400, {"Error": "invalid JSON"})
                    return
                if verb not in VERBS or not isinstance(args, dict):
                    self._reply(404, {"Error": f"unknown verb {verb!r}"})
                    return
                extender.note(self.path, verb, args)
                self._reply(200, getattr(extender, verb)(args))

            def _reply(self, status: int, answer: Any) -> None:
                body = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # requests are recorded by ``note``

        return Handler

    def start(self) -> ExampleExtender:
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="example-extender", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--api-server", default="", help="the API server bind POSTs to (else: accept)")
    parser.add_argument("--token-file", default="", help="bearer token for --api-server")
    parser.add_argument("--ca-file", default="", help="CA bundle for --api-server")
    parser.add_argument("--record", default="", help="append one JSON line per request to this file")
    args = parser.parse_args(argv)
    token = ""
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    extender = ExampleExtender(
        args.host,
        args.port,
        api_server=args.api_server,
        token=token,
        ca_file=args.ca_file,
        record=args.record,
    )
    print(f"example extender listening on {extender.url}", file=sys.stderr, flush=True)
    try:
        extender.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        extender.server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
