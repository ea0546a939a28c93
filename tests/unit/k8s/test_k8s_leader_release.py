"""Releasing the lease when the last renewal landed without the leader seeing its answer."""

from __future__ import annotations

import asyncio

from fake_api import FakeAPI
from lease_server import LeaseServer

from kopf_scheduler.k8s.leader import LeaderElector


async def _leading(server: LeaseServer) -> asyncio.Future[None]:
    """Candidate "a" running against ``server``, once it leads (until cancelled)."""
    elector = LeaderElector(FakeAPI(fallback=server.answer), namespace="ns", identity="a")  # type: ignore[arg-type]
    started = asyncio.Event()

    async def lead() -> None:
        started.set()
        await asyncio.Event().wait()

    run = asyncio.ensure_future(elector.run(lead))
    await asyncio.wait_for(started.wait(), 5)
    return run


async def test_release_after_an_unseen_renewal_empties_the_holder() -> None:
    server = LeaseServer()
    run = await _leading(server)
    server.renew_behind_the_leaders_back()
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    assert server.lease is not None
    assert server.lease["spec"]["holderIdentity"] == ""
    assert server.lease["spec"]["leaseDurationSeconds"] == 1


async def test_release_leaves_a_lease_another_candidate_took() -> None:
    server = LeaseServer()
    run = await _leading(server)
    assert server.lease is not None
    server._stored({**server.lease, "spec": {**server.lease["spec"], "holderIdentity": "b"}})
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)

    assert server.lease["spec"]["holderIdentity"] == "b"
