"""Start-up, clean-up and the liveness probe (/healthz)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import kopf
from kopf._core.reactor import inventory

from kopf_scheduler.handlers import login
from kopf_scheduler.handlers.resume import ResumeListings
from kopf_scheduler.service.config import ServiceConfig
from kopf_scheduler.service.intake_link import IntakeLink
from kopf_scheduler.service.service import SchedulerService
from kopf_scheduler.service.supervision import Supervisor


class NoDiffBase(kopf.DiffBaseStorage):
    """Every handler here is ``on.event``: Kopf's change detection is never used, yet building its diff
    base deep-copies every object on every event. This storage builds, keeps and stores nothing."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


class NoProgress(kopf.ProgressStorage):
    """``on.event`` handlers keep no progress, yet Kopf cleans the (empty) diff base of progress marks on
    every event: two deep copies, about 11 µs an event. This storage keeps nothing and cleans nothing."""

    def fetch(self, *, key: kopf.HandlerId, body: kopf.Body) -> kopf.ProgressRecord | None:
        return None

    def store(
        self, *, key: kopf.HandlerId, record: kopf.ProgressRecord, body: kopf.Body, patch: kopf.Patch
    ) -> None:
        return None

    def purge(self, *, key: kopf.HandlerId, body: kopf.Body, patch: kopf.Patch) -> None:
        return None

    def touch(self, *, body: kopf.Body, patch: kopf.Patch, value: str | None) -> None:
        return None

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence


class NoMemories(inventory.ResourceMemories):
    """Kopf remembers every object it has seen until it is deleted (a ``ResourceMemory`` with its memo,
    daemons, throttling and indexing records: about 600 bytes, and its uid as key), for handlers that run
    again later. The intake process has ``on.event`` handlers only, none of which reads such a record:
    each event gets a fresh one (Kopf's ``ephemeral``), kept for none (``intake``: ``kopf.run``)."""

    async def recall(
        self,
        raw_body: kopf.RawBody,
        *,
        memobase: Any = None,
        noticed_by_listing: bool = False,
        ephemeral: bool = False,
    ) -> inventory.ResourceMemory:
        return await super().recall(
            raw_body, memobase=memobase, noticed_by_listing=noticed_by_listing, ephemeral=True
        )


#: seconds a Kopf per-object worker waits for the object's next event before it ends
KOPF_WORKER_IDLE_TIMEOUT = 0.5
#: objects per page of Kopf's own lists
KOPF_LIST_CHUNK = 500


def new_registry() -> kopf.OperatorRegistry:
    """An empty registry for an operator of its own, logging in through the scheduler's own credential
    loader (``login``), so Kopf's connections and the scheduler's act as one identity."""
    registry = kopf.OperatorRegistry()
    login.register(registry)
    return registry


def configure(settings: kopf.OperatorSettings) -> None:
    """Kopf's settings for the scheduler's watches (also those of the intake process: ``intake``)."""
    # Kopf would post a Kubernetes event for every handler log line; the scheduler posts its own events.
    settings.posting.level = logging.WARNING
    # One line per watch event ("Handler 'pod_event' succeeded") is noise at thousands of pods per second.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # The watched kinds are fixed and found by the start-up scan; watching CRDs for new ones needs a
    # permission deploy/rbac.yaml does not grant (Kopf would log 403 errors for a minute, then give up).
    settings.scanning.disabled = True
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.persistence.progress_storage = NoProgress()
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # Kopf keeps a worker task per object until it has had no event for this long. A pod's events come
    # within moments of each other (created, bound), so a worker kept 5 s outlives the collector's young
    # generations and every pod's worker becomes garbage for the slow full collections (tens of ms with
    # the event loop stopped, every few seconds at 100 pods/s); a short idle time lets it die young.
    settings.queueing.idle_timeout = KOPF_WORKER_IDLE_TIMEOUT
    # Kopf lists every watched kind in one request unless told otherwise: 50,000 pods as one response
    # would be held whole (the bytes, then the decoded objects) beside the scheduler's own copies.
    settings.watching.chunk_size = KOPF_LIST_CHUNK


# ``kopf run -m kopf_scheduler.handlers``: Kopf's default registry logs in as ``kopf-scheduler run`` does
login.register()


@kopf.on.startup()
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Starts the service. With ``memo.intake`` (``kopf-scheduler run``) the watches run in the intake
    process, which loads while the service lists and watches once the lists are loaded; without it
    (``kopf run -m kopf_scheduler.handlers``) in this one, through this package's handlers."""
    configure(settings)
    service = SchedulerService(
        memo.get("config") or ServiceConfig.from_env(), supervisor=memo.get("supervisor") or Supervisor()
    )
    memo["service"] = service
    if not memo.get("intake"):
        await service.start()
        # this process's watches begin once this handler returns: from the service's lists on
        resume = memo["resume"] = ResumeListings(service.listed_at)
        resume.install()
        return
    link = IntakeLink(service, service.supervisor.fail, verbose=bool(memo.get("verbose")))
    memo["intake_link"] = link
    starting = asyncio.create_task(link.start(), name="watch-intake-start")  # loads while the lists do

    async def watch() -> None:
        await starting
        link.go(service.scheduler.objects.kinds, service.listed_at)

    try:
        await service.start(watch)
    finally:
        if not starting.done():  # the service did not get as far as watching
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await starting


@kopf.on.cleanup()
async def stop(memo: kopf.Memo, **_: Any) -> None:
    link = memo.get("intake_link")
    if link is not None:
        link.stopping = True  # from here on its exit is expected
    resume = memo.get("resume")
    if resume is not None:
        resume.uninstall()
    service = memo.get("service")
    if service is not None:
        await service.stop()
    if link is not None:
        await link.stop()


@kopf.on.probe(id="scheduler")
def health(memo: kopf.Memo, **_: Any) -> dict[str, Any]:
    """/healthz: red (HTTP 500) once a background task has failed (``supervision``)."""
    service = memo.get("service")
    if service is None:
        return {"synced": False}
    if not service.supervisor.healthy:
        raise kopf.PermanentError(service.supervisor.failure)
    return service.health()
