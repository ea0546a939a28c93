"""The API server's side of one Lease, for leader election tests: ``FakeAPI(fallback=server.answer)``.
Optimistic concurrency (a write with a stale resourceVersion gets 409, a create of an existing lease too),
a competitor's writes slipped in just before ours, and outages that answer every request with one status.

Leader election may run on a thread of its own (``k8s.leader_thread``): ``wait_for_version`` lets a test
that holds its event loop wait, on a condition the elector's writes signal, until it has written enough."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from fake_api import Request

from kopf_scheduler.k8s.rest import Response


class LeaseServer:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        #: while set, every request gets this status (500, 503, ...)
        self.failing: int | None = None
        #: runs before a write (PUT or POST) is handled: another candidate's write landing first
        self.before_write: Callable[[Request], None] | None = None
        self._stored_once = threading.Condition()

    def _stored(self, body: dict[str, Any]) -> Response:
        with self._stored_once:
            self.version += 1
            self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
            self._stored_once.notify_all()
        return Response(200, json.dumps(self.lease).encode())

    def wait_for_version(self, version: int, timeout: float) -> bool:
        """Blocks this thread until a write has made the lease's version ``version`` (True), or
        ``timeout`` seconds have passed (False)."""
        with self._stored_once:
            return self._stored_once.wait_for(lambda: self.version >= version, timeout)

    def answer(self, call: Request) -> Response:
        if self.failing is not None:
            return Response(self.failing, json.dumps({"message": "etcdserver: request timed out"}).encode())
        if call.method == "GET":
            return Response(404) if self.lease is None else Response(200, json.dumps(self.lease).encode())
        if self.before_write is not None:
            self.before_write(call)
        if call.method == "POST":
            if self.lease is not None:
                return Response(409, json.dumps({"message": "leases.coordination.k8s.io exists"}).encode())
            created = self._stored(call.body)
            return Response(201, created.body)
        sent = (call.body.get("metadata") or {}).get("resourceVersion")
        if self.lease is None or sent != self.lease["metadata"]["resourceVersion"]:
            return Response(409, json.dumps({"message": "the object has been modified"}).encode())
        return self._stored(call.body)

    def write_as(self, holder: str, renew_time: str) -> None:
        """Another candidate's write: it holds the lease, renewed at ``renew_time``."""
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": renew_time,
            "leaseTransitions": 0,
        }
        if self.lease is not None:
            spec["leaseTransitions"] = self.lease["spec"].get("leaseTransitions") or 0
        base = self.lease or {"metadata": {"name": "kopf-scheduler", "namespace": "ns"}}
        self._stored({**base, "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec})

    def renew_behind_the_leaders_back(self) -> None:
        """What a renewal cancelled in flight leaves: the write landed, its answer was never read."""
        assert self.lease is not None
        self._stored(self.lease)
