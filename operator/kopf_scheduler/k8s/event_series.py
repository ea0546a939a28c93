"""``events.k8s.io/v1`` events and their aggregation into series, as client-go's ``tools/events`` does.

Pure bookkeeping over an injected clock; ``event_recorder`` does the sending. Behaviour (upstream's
``event_broadcaster.go``, ``recordToSink`` and ``finishSeries``):

- Occurrences with the same key (type, reason, action, reporting controller and instance, the regarding
  and related objects, and the note) are isomorphic. The first is created as an Event named
  ``<object>.<hex nanos>``.
- The second turns the Event into a series (``series.count`` 2, ``lastObservedTime``) and is written at
  once; later ones only bump the count in memory.
- Differences from upstream, on purpose: the note is part of the key (upstream keys on the regarding
  object's resourceVersion instead, which our own condition patches would change on every failure, while
  a new message deserves a new Event), and a series whose count moved is written every
  ``flush_interval`` (30 s) rather than only when it ends or every 30 minutes, so ``kubectl describe``
  shows a live count.
- An entry with no occurrence for ``finish_after`` (6 min) is forgotten (a series' final count was
  written by the flushes before); beyond ``max_entries`` the oldest written entries are forgotten early.
- An entry about an object that was deleted (``object_deleted``, by uid) is forgotten once it has
  nothing left to write: the key holds the uid, so no later occurrence can join its series. Upstream
  keeps it for the 6 minutes; at a hundred bindings a second that is tens of thousands of entries (about
  1.6 KB each) no event can use.

Invariants: an entry is queued for writing or being written at most once at a time (``queued``,
``in_flight``); ``sent_count <= count``; a forgotten entry is never written again.
"""

from __future__ import annotations

import itertools
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.timestamps import micro_time

NORMAL = "Normal"
WARNING = "Warning"
#: events.k8s.io validation limits (``pkg/apis/core/validation/events.go``), in bytes.
NOTE_LIMIT = 1024
REASON_LIMIT = 128
ACTION_LIMIT = 128
REPORTING_INSTANCE_LIMIT = 128
#: upstream ``finishTime``.
FINISH_AFTER = 6 * 60.0
#: how often a running series' count is written (our choice; upstream waits for the end or 30 min).
FLUSH_INTERVAL = 30.0
#: how many recent events are remembered for aggregation (upstream: unbounded for 6 minutes).
MAX_ENTRIES = 20_000

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def truncate_bytes(text: str, limit: int) -> str:
    """At most ``limit`` UTF-8 bytes, ending in `` ...`` when cut (the API counts bytes)."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 4].decode(errors="ignore") + " ..."


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """``v1.ObjectReference`` of the object an event is about."""

    kind: str
    namespace: str
    name: str
    uid: str = ""
    api_version: str = "v1"
    resource_version: str = ""

    def to_json(self) -> dict[str, str]:
        out = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
        }
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        return out


def pod_ref(pod: PodInfo) -> ObjectRef:
    meta = pod.raw.get("metadata") or {}
    return ObjectRef(
        kind="Pod",
        namespace=pod.namespace,
        name=pod.name,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
    )


@dataclass(frozen=True, slots=True)
class EventKey:
    type: str
    reason: str
    action: str
    reporting_controller: str
    reporting_instance: str
    # the regarding object without its resourceVersion
    kind: str
    namespace: str
    name: str
    uid: str
    note: str
    related: ObjectRef | None


@dataclass(slots=True)
class Occurrence:
    """One ``Eventf`` call. An empty ``reporting_controller`` means the aggregator's default."""

    regarding: ObjectRef
    type: str
    reason: str
    action: str
    note: str
    related: ObjectRef | None = None
    reporting_controller: str = ""

    def key(self, controller: str, instance: str) -> EventKey:
        r = self.regarding
        return EventKey(
            self.type,
            self.reason,
            self.action,
            self.reporting_controller or controller,
            instance,
            r.kind,
            r.namespace,
            r.name,
            r.uid,
            self.note,
            self.related,
        )


def is_qualified_name(value: str) -> bool:
    """``IsQualifiedName``, what ``reportingController`` must be: ``[prefix/]name``, the name at most 63
    characters."""
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_QUALIFIED_NAME.match(name))


class EventNamer:
    """``<object>.<hex unix nanos>`` (client-go ``GenerateEventName``), a UUID when that is not a valid
    name; nanos strictly increase within the process so two events never share a name."""

    def __init__(self, wall_ns: Callable[[], int] = time.time_ns) -> None:
        self._wall_ns = wall_ns
        self._last = 0

    def __call__(self, object_name: str) -> str:
        self._last = max(self._wall_ns(), self._last + 1)
        name = f"{object_name}.{self._last:x}"
        if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            return str(uuid.uuid4())
        return name


@dataclass(eq=False)
class SeriesEntry:
    key: EventKey
    #: the Event as first created (without ``series``)
    body: dict[str, Any]
    first_seen: float
    last_seen: float
    last_observed_wall: float
    count: int = 1
    sent_count: int = 0
    created: bool = False
    queued: bool = False
    in_flight: bool = False
    forgotten: bool = False

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.body["metadata"]["namespace"])

    @property
    def dirty(self) -> bool:
        return self.count > self.sent_count

    def series(self) -> dict[str, Any]:
        return {"count": self.count, "lastObservedTime": micro_time(self.last_observed_wall)}


@dataclass(frozen=True, slots=True)
class Write:
    """One API call for an entry: ``create`` (POST the whole Event) or ``patch`` (its series)."""

    entry: SeriesEntry
    kind: str  # "create" | "patch"
    body: dict[str, Any]
    count: int


@dataclass
class EventAggregator:
    """The cache of recent events and the decisions of what to write when (see the module docstring)."""

    clock: Clock
    reporting_controller: str
    reporting_instance: str
    flush_interval: float = FLUSH_INTERVAL
    finish_after: float = FINISH_AFTER
    max_entries: int = MAX_ENTRIES
    wall: Callable[[], float] = time.time
    namer: EventNamer = field(default_factory=EventNamer)
    entries: dict[EventKey, SeriesEntry] = field(default_factory=dict)
    #: the keys of the entries about each regarding object, by its uid
    by_uid: dict[str, list[EventKey]] = field(default_factory=dict)
    #: uids of deleted objects whose entries are forgotten as soon as they are written
    deleted: set[str] = field(default_factory=set)
    #: occurrences merged into an existing entry
    aggregated: int = 0

    def __post_init__(self) -> None:
        self.reporting_instance = truncate_bytes(self.reporting_instance, REPORTING_INSTANCE_LIMIT)

    def make_body(self, occurrence: Occurrence, wall: float) -> dict[str, Any]:
        r = occurrence.regarding
        return {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": self.namer(r.name), "namespace": r.namespace or "default"},
            "eventTime": micro_time(wall),
            "reportingController": occurrence.reporting_controller or self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": truncate_bytes(occurrence.action, ACTION_LIMIT),
            "reason": truncate_bytes(occurrence.reason, REASON_LIMIT),
            "regarding": r.to_json(),
            **({"related": occurrence.related.to_json()} if occurrence.related is not None else {}),
            "note": truncate_bytes(occurrence.note, NOTE_LIMIT),
            "type": occurrence.type,
        }

    def record(self, occurrence: Occurrence) -> SeriesEntry | None:
        """Account for one occurrence; returns the entry when it must be written now (and marks it
        queued), None when the occurrence was absorbed into a series that is written later."""
        now, wall = self.clock.now(), self.wall()
        key = occurrence.key(self.reporting_controller, self.reporting_instance)
        entry = self.entries.get(key)
        if entry is None:
            entry = SeriesEntry(key, self.make_body(occurrence, wall), now, now, wall)
            self.entries[key] = entry
            if key.uid:
                self.by_uid.setdefault(key.uid, []).append(key)
            if len(self.entries) > self.max_entries:
                self._evict()
            entry.queued = True
            return entry
        self.aggregated += 1
        entry.count += 1
        entry.last_seen, entry.last_observed_wall = now, wall
        if self._write_now(entry):
            entry.queued = True
            return entry
        return None

    @staticmethod
    def _write_now(entry: SeriesEntry) -> bool:
        # A series starts at once (upstream writes the second occurrence immediately); after that
        # its count waits for the periodic flush. Nothing is written while a write is pending.
        return (
            entry.created and entry.sent_count == 1 and entry.dirty and not (entry.queued or entry.in_flight)
        )

    def dropped(self, entry: SeriesEntry) -> None:
        """The entry could not be queued (queue full): a never-created one is forgotten, so a later
        occurrence starts afresh; a created one stays dirty for the next flush."""
        entry.queued = False
        if not entry.created:
            self._forget(entry)

    def start_write(self, entry: SeriesEntry) -> Write | None:
        """Take a queued entry for writing; None if it was forgotten meanwhile."""
        entry.queued = False
        if entry.forgotten:
            return None
        entry.in_flight = True
        if entry.created:
            return Write(entry, "patch", {"series": entry.series()}, entry.count)
        body = dict(entry.body)
        if entry.count >= 2:
            body["series"] = entry.series()
        return Write(entry, "create", body, entry.count)

    def finish_write(self, write: Write, outcome: str) -> SeriesEntry | None:
        """``outcome``: ``ok``; ``gone`` (a patched Event no longer exists: create it again); or
        ``failed`` (given up). Returns the entry when it must be written again at once (marked queued)."""
        entry = write.entry
        entry.in_flight = False
        if entry.forgotten:
            return None
        if outcome == "ok":
            entry.created = True
            entry.sent_count = max(entry.sent_count, write.count)
            if entry.key.uid in self.deleted and not entry.dirty:
                self._forget(entry)
                return None
        elif outcome == "gone":
            entry.created = False
            entry.queued = True
            return entry
        else:  # failed: a never-created entry is forgotten; a series waits for the next flush
            if not entry.created:
                self._forget(entry)
            return None
        if self._write_now(entry):
            entry.queued = True
            return entry
        return None

    def flush(self) -> list[SeriesEntry]:
        """The periodic tick: series whose count moved are returned for writing (marked queued);
        clean entries idle for ``finish_after`` are forgotten."""
        now = self.clock.now()
        due: list[SeriesEntry] = []
        for entry in list(self.entries.values()):
            if entry.queued or entry.in_flight:
                continue
            if now - entry.last_seen >= self.finish_after:
                # the final count was written (or tried) by the flushes since the last occurrence
                self._forget(entry)
            elif entry.created and entry.dirty:
                entry.queued = True
                due.append(entry)
        return due

    def object_deleted(self, uid: str) -> None:
        """The regarding object ``uid`` is gone: its entries are forgotten now, or once their pending
        write is done."""
        for key in list(self.by_uid.get(uid, ())):
            entry = self.entries[key]
            if entry.queued or entry.in_flight or entry.dirty:
                self.deleted.add(uid)
            else:
                self._forget(entry)

    def pending(self) -> Iterator[SeriesEntry]:
        """Entries with something not yet written (for a final flush at shutdown)."""
        return (e for e in self.entries.values() if e.dirty and not e.forgotten)

    def _evict(self, scan: int = 64) -> None:
        """Over ``max_entries``: forget the oldest entries that have nothing left to write. Upstream
        keeps every event for 6 minutes, which at hundreds of bindings per second is a lot of memory;
        an evicted entry only means a later identical event starts a new Event instead of a series."""
        excess = len(self.entries) - self.max_entries
        for entry in list(itertools.islice(self.entries.values(), scan)):
            if excess <= 0:
                break
            if not (entry.queued or entry.in_flight or entry.dirty):
                self._forget(entry)
                excess -= 1

    def _forget(self, entry: SeriesEntry) -> None:
        entry.forgotten = True
        key = entry.key
        if self.entries.get(key) is not entry:
            return
        del self.entries[key]
        keys = self.by_uid.get(key.uid)
        if keys is not None:
            keys.remove(key)
            if not keys:
                del self.by_uid[key.uid]
                self.deleted.discard(key.uid)
