"""Lease-based leader election, as client-go's ``tools/leaderelection`` does it for kube-scheduler.

One ``coordination.k8s.io/v1`` Lease (default ``kube-system/kopf-scheduler``). Defaults are
kube-scheduler's: lease duration 15 s, renew deadline 10 s, retry period 2 s; identity
``<hostname>_<uuid>``; the lease is released when leading ends normally (``ReleaseOnCancel``).

How it works (``leaderelection.go``): a candidate tries every retry period (jittered by up to 1.2x);
it may take the lease when the lease has no holder, or when the lease record has not changed for
``leaseDurationSeconds`` *as measured on the candidate's own clock since it first saw that record* (no
trust in other machines' clocks). Updates carry the lease's resourceVersion, so of two candidates
racing for the same record only one wins. The leader renews every retry period, first optimistically
with the record it wrote last, else after reading the lease again.

Why two electors never both lead: the leader stops believing it leads ``renew_deadline`` after it *sent*
its last successful renewal (``is_leader`` turns false then even when the event loop was too busy to run
the renew task), and cancels the leading task at once. Any other candidate saw that renewal only after
it was sent and waits ``leaseDurationSeconds`` (> ``renew_deadline``) from then. This holds as long as
the clocks run at about the same rate, which is client-go's assumption too.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.k8s.rest import RestClient, resource_path
from kopf_scheduler.k8s.timestamps import micro_time

logger = logging.getLogger(__name__)

#: client-go ``JitterFactor``: an acquire retry waits retry_period x (1 + up to 1.2)
JITTER_FACTOR = 1.2
LEASES = ("coordination.k8s.io/v1", "leases")


def default_identity() -> str:
    """``<hostname>_<uuid>``, as kube-scheduler (two processes on one host never share it)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeadershipLost(Exception):
    """The lease could not be renewed within the renew deadline: leading stopped."""


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str = "kube-system"
    name: str = "kopf-scheduler"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    @property
    def lease_duration_seconds(self) -> int:
        """What the lease records (whole seconds) and what other candidates wait for."""
        return max(1, int(self.lease_duration))

    def validate(self) -> None:
        """client-go's checks, on the whole seconds written into the lease."""
        if self.retry_period <= 0 or self.renew_deadline <= 0:
            raise ValueError("leader election: renew_deadline and retry_period must be greater than zero")
        if self.lease_duration_seconds <= self.renew_deadline:
            raise ValueError(
                f"leader election: lease_duration ({self.lease_duration_seconds} s as recorded) must be "
                f"greater than renew_deadline ({self.renew_deadline} s)"
            )
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("leader election: renew_deadline must be greater than retry_period x 1.2")
        if not self.identity:
            raise ValueError("leader election: identity must not be empty")


class LeaderElector:
    def __init__(
        self,
        rest: RestClient,
        config: LeaderElectionConfig | None = None,
        *,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        **settings: Any,
    ) -> None:
        """``settings`` override fields of ``config`` (``namespace=``, ``identity=``, ...)."""
        base = config if config is not None else LeaderElectionConfig()
        self.config = dataclasses.replace(base, **settings) if settings else base
        self.config.validate()
        self.rest = rest
        self.clock = clock if clock is not None else RealClock()
        self.wall = wall
        self._observed: dict[str, Any] | None = None  # the lease object as last read or written
        self._observed_at = 0.0  # our clock when its record last changed
        self._renewed_at: float | None = None  # our clock when the last successful write was sent
        self._leading = False
        self._reported_leader = ""
        self.on_new_leader: Callable[[str], Any] | None = None
        self.path = resource_path(*LEASES, namespace=self.config.namespace)
        self.lease_path = resource_path(*LEASES, self.config.name, namespace=self.config.namespace)

    @property
    def identity(self) -> str:
        return self.config.identity

    @property
    def is_leader(self) -> bool:
        """True only while leading and within the renew deadline of the last successful renewal."""
        return (
            self._leading
            and self._renewed_at is not None
            and self.clock.now() < self._renewed_at + self.config.renew_deadline
        )

    @property
    def leader(self) -> str:
        """The holder in the lease as last observed ('' for none)."""
        return str(self._spec().get("holderIdentity") or "")

    # -- the loop ------------------------------------------------------------------------------------

    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[Any]],
        on_stopped_leading: Callable[[], Any] | None = None,
    ) -> None:
        """Wait for the lease, then lead until cancelled or until the lease is lost (client-go's ``Run``).

        ``on_started_leading()`` runs as a task once the lease is held; as in client-go, leading goes on
        when it returns (it may just start the scheduling loop and return). While leading:

        - renewal fails for ``renew_deadline``: leading stops at once (the task, if still running, is
          cancelled; ``on_stopped_leading`` is awaited, which should cancel whatever was started) and
          ``LeadershipLost`` is raised; kube-scheduler exits then, a caller may also stand by again by
          calling ``run`` once more;
        - ``on_started_leading`` raises: leading stops, the lease is released, the exception propagates;
        - ``run`` is cancelled: leading stops, then the lease is released (``release_on_cancel``).

        ``on_stopped_leading`` (sync or async) is called once leading has stopped, before the lease is
        released, so nothing it guards runs while another instance may already lead. Unlike client-go it
        is not called when ``run`` is cancelled before it ever led.
        """
        await self._acquire()
        self._leading = True
        logger.info("leader election: %s acquired lease %s", self.identity, self.lease_path)
        lead: asyncio.Task[Any] = asyncio.ensure_future(on_started_leading())
        renew = asyncio.ensure_future(self._renew_loop())
        lost = False
        failure: BaseException | None = None
        try:
            waiting: set[asyncio.Future[Any]] = {lead, renew}
            while True:
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if renew in done:
                    lost = True
                    if not renew.cancelled() and renew.exception() is not None:
                        logger.error("leader election: renewal failed", exc_info=renew.exception())
                    break
                waiting.discard(lead)
                if not lead.cancelled() and lead.exception() is not None:
                    failure = lead.exception()
                    break
        finally:
            self._leading = False
            lead.cancel()
            renew.cancel()
            await asyncio.wait({lead, renew})
            try:
                if on_stopped_leading is not None:
                    outcome = on_stopped_leading()
                    if inspect.isawaitable(outcome):
                        await outcome
            finally:
                if lost:
                    logger.error("leader election: %s lost lease %s", self.identity, self.lease_path)
                elif self.config.release_on_cancel:
                    await self._release()
        if lost:
            raise LeadershipLost(f"lease {self.lease_path} not renewed within {self.config.renew_deadline} s")
        assert failure is not None
        raise failure

    async def _acquire(self) -> None:
        period = self.config.retry_period
        while True:
            if await self._try_acquire_or_renew():
                return
            await self.clock.sleep(period + random.random() * JITTER_FACTOR * period)

    async def _renew_loop(self) -> None:
        """Returns when leadership is lost."""
        config = self.config
        while True:
            await self.clock.sleep(config.retry_period)
            while True:
                assert self._renewed_at is not None
                deadline = self._renewed_at + config.renew_deadline
                remaining = deadline - self.clock.now()
                if remaining <= 0:
                    return
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancellation that
                # arrives as the renewal completes, and this loop would then renew forever after
                # ``run`` was cancelled (a SIGTERM'd operator hanging on to the lease)
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    renewed = False
                if renewed:
                    break
                await self.clock.sleep(min(config.retry_period, max(0.0, deadline - self.clock.now())))

    # -- one attempt (tryAcquireOrRenew) -------------------------------------------------------------

    def _spec(self) -> dict[str, Any]:
        return dict((self._observed or {}).get("spec") or {})

    def _holds_lease(self) -> bool:
        return self._observed is not None and self._spec().get("holderIdentity") == self.identity

    def _lease_valid(self, now: float) -> bool:
        seconds = self._spec().get("leaseDurationSeconds") or 0
        return self._observed_at + float(seconds) > now

    def _observe(self, lease: dict[str, Any]) -> None:
        if self._observed is None or lease.get("spec") != self._observed.get("spec"):
            self._observed_at = self.clock.now()
        self._observed = lease
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        if holder != self._reported_leader:
            self._reported_leader = holder
            logger.info("leader election: lease %s is held by %r", self.lease_path, holder)
            if self.on_new_leader is not None:
                self.on_new_leader(holder)

    def _record(self, now_wall: float) -> dict[str, Any]:
        stamp = micro_time(now_wall)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.config.lease_duration_seconds,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": 0,
        }

    def _lease_body(self, spec: dict[str, Any], base: dict[str, Any] | None) -> dict[str, Any]:
        body = copy.deepcopy(base) if base is not None else {}
        body["apiVersion"], body["kind"] = "coordination.k8s.io/v1", "Lease"
        metadata = body.setdefault("metadata", {})
        metadata["name"], metadata["namespace"] = self.config.name, self.config.namespace
        body["spec"] = spec
        return body

    async def _update(self, spec: dict[str, Any], sent_at: float) -> bool:
        """PUT with the observed resourceVersion (a concurrent writer makes it fail with 409)."""
        response = await self.rest.request("PUT", self.lease_path, self._lease_body(spec, self._observed))
        if response.status != 200:
            logger.debug("leader election: update of %s: %s", self.lease_path, response.message())
            return False
        self._observe(response.json())
        self._renewed_at = sent_at
        return True

    async def _try_acquire_or_renew(self) -> bool:
        sent_at = self.clock.now()
        record = self._record(self.wall())
        # 1. the leader renews optimistically with the record it wrote last
        if self._holds_lease() and self._lease_valid(sent_at):
            old = self._spec()
            record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = old.get("leaseTransitions") or 0
            if await self._update(record, sent_at):
                return True
        # 2. read (or create) the lease
        response = await self.rest.request("GET", self.lease_path)
        if response.status == 404:
            created = await self.rest.request("POST", self.path, self._lease_body(record, None))
            if created.status != 201:
                return False
            self._observe(created.json())
            self._renewed_at = sent_at
            return True
        if response.status != 200:
            logger.warning("leader election: cannot read %s: %s", self.lease_path, response.message())
            return False
        self._observe(response.json())
        old = self._spec()
        now = self.clock.now()
        if old.get("holderIdentity") and self._lease_valid(now) and not self._holds_lease():
            return False  # held by another candidate and not expired
        # 3. take it over, or renew after a failed fast path
        if self._holds_lease():
            record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = old.get("leaseTransitions") or 0
        else:
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        return await self._update(record, sent_at)

    async def _release(self) -> None:
        """Hand the lease back (empty holder, 1 s duration): a standby takes it at its next try.

        A renewal cancelled while its PUT was in flight may have landed without our seeing the new
        resourceVersion; the release then conflicts (409), so the lease is read again and, while we
        still hold it, the release is retried with the fresh version.
        """
        try:
            async with asyncio.timeout(self.config.renew_deadline):  # see _renew_loop
                for _ in range(3):
                    if not self._holds_lease():
                        return
                    response = await self.rest.request(
                        "PUT", self.lease_path, self._lease_body(self._released_spec(), self._observed)
                    )
                    if response.status == 200:
                        self._observe(response.json())
                        logger.info("leader election: %s released lease %s", self.identity, self.lease_path)
                        return
                    if response.status != 409:
                        break
                    current = await self.rest.request("GET", self.lease_path)
                    if current.status != 200:
                        break
                    self._observe(current.json())
        except TimeoutError:
            logger.warning("leader election: releasing %s timed out", self.lease_path)
            return
        logger.warning("leader election: releasing %s: %s", self.lease_path, response.message())

    def _released_spec(self) -> dict[str, Any]:
        stamp = micro_time(self.wall())
        return {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": stamp,
            "renewTime": stamp,
            "leaseTransitions": self._spec().get("leaseTransitions") or 0,
        }
