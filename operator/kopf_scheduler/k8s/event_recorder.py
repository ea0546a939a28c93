"""Sending events in the background: ``record`` is synchronous and cheap, a few workers do the API calls.

Like client-go's broadcaster, the queue between the two is bounded (``maxQueuedEvents`` = 1000) and an
event that finds it full is dropped and counted, so a slow API server costs events, never scheduling
time. Aggregation happens before the queue (``EventAggregator.record``), so repeated failures of one pod
take no queue space. A periodic flush writes the counts of running series.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.k8s.event_series import EventAggregator, Occurrence, SeriesEntry, Write
from kopf_scheduler.k8s.rest import STRATEGIC_MERGE_PATCH, Response, RestClient, resource_path
from kopf_scheduler.k8s.stats import ClientStats
from kopf_scheduler.k8s.workers import DEFAULT_RETRY_DELAYS, WorkerPool, with_retries

logger = logging.getLogger(__name__)

#: upstream ``maxQueuedEvents``
DEFAULT_QUEUE_SIZE = 1000
#: as many concurrent writes as bindings (one Scheduled event per bound pod), so events keep up with them
DEFAULT_WORKERS = 64
EVENTS_GROUP_VERSION = "events.k8s.io/v1"


class EventRecorder:
    def __init__(
        self,
        rest: RestClient,
        aggregator: EventAggregator,
        clock: Clock,
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        workers: int = DEFAULT_WORKERS,
        retry_delays: Sequence[float] = DEFAULT_RETRY_DELAYS,
    ) -> None:
        self.rest = rest
        self.aggregator = aggregator
        self.clock = clock
        self.retry_delays = tuple(retry_delays)
        self.queue: asyncio.Queue[object] = asyncio.Queue(maxsize=queue_size)
        self.pool = WorkerPool("events", self.queue, self._handle, workers)
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def stats(self) -> ClientStats:
        return self.rest.stats

    def record(self, occurrence: Occurrence) -> None:
        if self._closed:
            return
        self.stats.events_recorded += 1
        merged_before = self.aggregator.aggregated
        entry = self.aggregator.record(occurrence)
        merged = self.aggregator.aggregated > merged_before
        if merged:
            self.stats.events_aggregated += 1
        if entry is not None:
            self._enqueue(entry, new=not merged)
        self._ensure_started()

    def object_deleted(self, uid: str) -> None:
        """The object ``uid`` is gone: its events' entries are forgotten (``events.object_deleted``)."""
        self.aggregator.object_deleted(uid)

    def _enqueue(self, entry: SeriesEntry, *, new: bool) -> None:
        try:
            self.queue.put_nowait(entry)
        except asyncio.QueueFull:
            self.aggregator.dropped(entry)
            if new:
                self.stats.events_dropped += 1
                logger.debug("event queue full: dropped %s %s", entry.key.reason, entry.key.name)

    def _ensure_started(self) -> None:
        if self.pool.ensure_started() and self._flusher is None and self.pool.loop is not None:
            self._flusher = self.pool.loop.create_task(self._flush_loop(), name="kopf-scheduler-events-flush")
            if self.pool.watch is not None:
                self.pool.watch(self._flusher)

    async def _flush_loop(self) -> None:
        while True:
            await self.clock.sleep(self.aggregator.flush_interval)
            self.flush()

    def flush(self) -> None:
        """Queue the counts of running series (the periodic tick; also called at shutdown)."""
        for entry in self.aggregator.flush():
            self._enqueue(entry, new=False)

    async def _handle(self, item: object) -> None:
        assert isinstance(item, SeriesEntry)
        write = self.aggregator.start_write(item)
        if write is None:
            return
        outcome = "failed"
        try:
            outcome = await self._send(write)
        finally:
            again = self.aggregator.finish_write(write, outcome)
        if outcome == "ok":
            self.stats.events_sent[write.kind] += 1
        elif outcome == "failed" and write.kind == "create":
            self.stats.events_dropped += 1
        if again is not None:
            self._enqueue(again, new=False)

    async def _send(self, write: Write) -> str:
        entry = write.entry
        if write.kind == "create":
            path = resource_path(EVENTS_GROUP_VERSION, "events", namespace=entry.namespace)
            response = await with_retries(
                lambda: self.rest.request("POST", path, write.body), self.clock, self.retry_delays
            )
            # 409: an earlier try that seemed to fail did create it
            ok = response.status in (200, 201, 409)
        else:
            path = resource_path(EVENTS_GROUP_VERSION, "events", entry.name, namespace=entry.namespace)
            response = await with_retries(
                lambda: self.rest.request("PATCH", path, write.body, content_type=STRATEGIC_MERGE_PATCH),
                self.clock,
                self.retry_delays,
            )
            if response.status == 404:  # expired (events live an hour) or deleted: create it again
                return "gone"
            ok = response.status == 200
        if ok:
            return "ok"
        self._log_failure(write, response)
        return "failed"

    @staticmethod
    def _log_failure(write: Write, response: Response) -> None:
        key = write.entry.key
        logger.warning(
            "event %s for %s/%s not written (%s): %s",
            key.reason,
            key.namespace,
            key.name,
            write.kind,
            response.message(),
        )

    async def close(self, timeout: float) -> bool:
        """Write what is pending (queued events, the last counts of series) within ``timeout``; True
        when everything was written."""
        self._closed = True
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.wait([self._flusher])
            self._flusher = None
        for entry in list(self.aggregator.pending()):
            if entry.created and not (entry.queued or entry.in_flight):
                entry.queued = True
                self._enqueue(entry, new=False)
        done = await self.pool.drain(timeout)
        await self.pool.stop()
        return done
