"""Releasing the lease when the last renewal landed without the leader seeing its answer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _fake_api import Call, FakeRest  # type: ignore[import-not-found]

from kopf_scheduler.k8s.leader import LeaderElector
from kopf_scheduler.k8s.rest import Response


class LeaseServer:
    """One Lease with optimistic concurrency: a PUT with a stale resourceVersion gets 409."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0

    def _stored(self, body: dict[str, Any]) -> Response:
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.version)}}
        return Response(200, json.dumps(self.lease).encode())

    def answer(self, call: Call) -> Response:
        if call.method == "GET":
            return Response(404) if self.lease is None else Response(200, json.dumps(self.lease).encode())
        if call.method == "POST":
            created = self._stored(call.body)
            return Response(201, created.body)
        sent = (call.body.get("metadata") or {}).get("resourceVersion")
        if self.lease is None or sent != self.lease["metadata"]["resourceVersion"]:
            return Response(409, json.dumps({"message": "the object has been modified"}).encode())
        return self._stored(call.body)

    def renew_behind_the_leaders_back(self) -> None:
        """What a renewal cancelled in flight leaves: the write landed, its answer was never read."""
        assert self.lease is not None
        self._stored(self.lease)


async def test_release_after_an_unseen_renewal_empties_the_holder() -> None:
    server = LeaseServer()
    elector = LeaderElector(FakeRest(answer=server.answer), namespace="ns", identity="a")  # type: ignore[arg-type]
    started = asyncio.Event()

    async def lead() -> None:
        started.set()
        await asyncio.Event().wait()

    run = asyncio.ensure_future(elector.run(lead))
    await asyncio.wait_for(started.wait(), 5)
    server.renew_behind_the_leaders_back()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""
    assert server.lease["spec"]["leaseDurationSeconds"] == 1


async def test_release_leaves_a_lease_another_candidate_took() -> None:
    server = LeaseServer()
    elector = LeaderElector(FakeRest(answer=server.answer), namespace="ns", identity="a")  # type: ignore[arg-type]
    started = asyncio.Event()

    async def lead() -> None:
        started.set()
        await asyncio.Event().wait()

    run = asyncio.ensure_future(elector.run(lead))
    await asyncio.wait_for(started.wait(), 5)
    assert server.lease is not None
    server._stored({**server.lease, "spec": {**server.lease["spec"], "holderIdentity": "b"}})
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    assert server.lease["spec"]["holderIdentity"] == "b"
