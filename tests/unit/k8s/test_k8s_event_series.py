"""Event aggregation (client-go ``tools/events`` behaviour) over a virtual clock: what is written when."""

from __future__ import annotations

import pytest

from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.k8s.event_series import (
    FINISH_AFTER,
    FLUSH_INTERVAL,
    NOTE_LIMIT,
    WARNING,
    EventAggregator,
    EventNamer,
    ObjectRef,
    Occurrence,
    SeriesEntry,
    is_qualified_name,
)

POD = ObjectRef("Pod", "ns", "web-0", uid="u-1", resource_version="7")
MESSAGE = "0/3 nodes are available: 3 Insufficient cpu."


def failure(note: str = MESSAGE, regarding: ObjectRef = POD) -> Occurrence:
    return Occurrence(regarding, WARNING, "FailedScheduling", "Scheduling", note)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(start=1000.0)


@pytest.fixture
def agg(clock: VirtualClock) -> EventAggregator:
    return EventAggregator(
        clock, "kopf-scheduler", "kopf-scheduler-0", wall=lambda: clock.now() + 1_700_000_000.0,
        namer=EventNamer(wall_ns=lambda: 1_700_000_000_000_000_000),
    )  # fmt: skip


def write_ok(agg: EventAggregator, entry: SeriesEntry) -> tuple[str, dict, SeriesEntry | None]:
    write = agg.start_write(entry)
    assert write is not None
    return write.kind, write.body, agg.finish_write(write, "ok")


def test_first_occurrence_is_created_as_a_whole_event(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    assert entry is not None and entry.queued
    kind, body, again = write_ok(agg, entry)
    assert kind == "create" and again is None
    assert body == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-0.17979cfe362a0000", "namespace": "ns"},
        "eventTime": "2023-11-14T22:30:00.000000Z",
        "reportingController": "kopf-scheduler",
        "reportingInstance": "kopf-scheduler-0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ns", "name": "web-0", "uid": "u-1",
                      "resourceVersion": "7"},
        "note": MESSAGE,
        "type": "Warning",
    }  # fmt: skip


def test_second_occurrence_starts_the_series_at_once_later_ones_wait_for_the_flush(
    agg: EventAggregator, clock: VirtualClock
) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write_ok(agg, entry)
    clock.advance(1)
    second = agg.record(failure())
    assert second is entry
    kind, body, again = write_ok(agg, entry)
    series = {"count": 2, "lastObservedTime": "2023-11-14T22:30:01.000000Z"}
    assert (kind, body, again) == ("patch", {"series": series}, None)
    for _ in range(18):
        clock.advance(1)
        assert agg.record(failure()) is None  # absorbed: no API call
    assert agg.aggregated == 19
    clock.advance(FLUSH_INTERVAL)
    due = agg.flush()
    assert due == [entry]
    kind, body, _ = write_ok(agg, entry)
    assert kind == "patch" and body["series"]["count"] == 20
    assert body["series"]["lastObservedTime"] == "2023-11-14T22:30:19.000000Z"
    assert agg.flush() == []  # nothing moved since


def test_occurrences_before_the_create_is_sent_fold_into_it(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    for _ in range(19):
        assert agg.record(failure()) is None
    assert entry is not None
    kind, body, again = write_ok(agg, entry)
    assert kind == "create" and body["series"]["count"] == 20 and again is None


def test_occurrences_during_the_create_start_the_series_right_after_it(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write = agg.start_write(entry)
    assert write is not None and write.kind == "create"
    assert agg.record(failure()) is None  # in flight: not queued twice
    again = agg.finish_write(write, "ok")
    assert again is entry and entry.queued
    kind, body, _ = write_ok(agg, entry)
    assert kind == "patch" and body["series"]["count"] == 2


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(failure(note="0/4 nodes are available: 4 Insufficient cpu."), id="other-note"),
        pytest.param(failure(regarding=ObjectRef("Pod", "ns", "web-0", uid="u-2")), id="recreated-pod"),
        pytest.param(failure(regarding=ObjectRef("Pod", "ns", "web-1", uid="u-3")), id="other-pod"),
        pytest.param(Occurrence(POD, "Normal", "Scheduled", "Binding", MESSAGE), id="other-reason"),
    ],
)
def test_non_isomorphic_events_are_separate(agg: EventAggregator, other: Occurrence) -> None:
    first = agg.record(failure())
    second = agg.record(other)
    assert first is not None and second is not None and first is not second
    assert first.name != second.name


def test_resource_version_is_not_part_of_the_key(agg: EventAggregator) -> None:
    agg.record(failure())
    newer = ObjectRef("Pod", "ns", "web-0", uid="u-1", resource_version="8")
    assert agg.record(failure(regarding=newer)) is None


def test_idle_entries_are_forgotten_after_six_minutes(agg: EventAggregator, clock: VirtualClock) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write_ok(agg, entry)
    clock.advance(FINISH_AFTER - 1)
    assert agg.flush() == [] and agg.entries
    clock.advance(1)
    assert agg.flush() == [] and not agg.entries
    fresh = agg.record(failure())
    assert fresh is not None and fresh is not entry
    assert agg.start_write(fresh).kind == "create"  # type: ignore[union-attr]


def test_patch_of_an_expired_event_creates_it_again_with_its_series(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write_ok(agg, entry)
    agg.record(failure())
    write = agg.start_write(entry)
    assert write is not None and write.kind == "patch"
    again = agg.finish_write(write, "gone")
    assert again is entry
    kind, body, _ = write_ok(agg, entry)
    assert kind == "create" and body["series"]["count"] == 2 and body["metadata"]["name"] == entry.name


def test_failed_create_forgets_so_the_next_occurrence_tries_again(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write = agg.start_write(entry)
    assert write is not None
    assert agg.finish_write(write, "failed") is None
    assert not agg.entries
    assert agg.record(failure()) is not None


def test_failed_patch_stays_dirty_for_the_next_flush(agg: EventAggregator, clock: VirtualClock) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write_ok(agg, entry)
    agg.record(failure())
    write = agg.start_write(entry)
    assert write is not None
    assert agg.finish_write(write, "failed") is None
    clock.advance(FLUSH_INTERVAL)
    assert agg.flush() == [entry]


def test_dropped_new_entry_is_forgotten(agg: EventAggregator) -> None:
    entry = agg.record(failure())
    assert entry is not None
    agg.dropped(entry)
    assert not agg.entries and agg.start_write(entry) is None


def test_oldest_written_entries_are_evicted_over_the_limit(clock: VirtualClock) -> None:
    agg = EventAggregator(clock, "c", "i", max_entries=3)
    entries = []
    for i in range(3):
        entry = agg.record(failure(regarding=ObjectRef("Pod", "ns", f"p{i}", uid=f"u{i}")))
        assert entry is not None
        write_ok(agg, entry)
        entries.append(entry)
    agg.record(failure(regarding=ObjectRef("Pod", "ns", "p3", uid="u3")))
    assert len(agg.entries) == 3 and entries[0].forgotten and not entries[1].forgotten


def test_entries_about_a_deleted_object_are_forgotten_once_written(
    agg: EventAggregator, clock: VirtualClock
) -> None:
    """No occurrence can join the series of an object that is gone (its uid is in the key): a written
    entry goes at once, one with a count still to write goes after that write, others stay."""
    other = ObjectRef("Pod", "ns", "web-1", uid="u-2")
    written = agg.record(failure())
    assert written is not None
    write_ok(agg, written)
    kept = agg.record(failure(regarding=other))
    assert kept is not None
    write_ok(agg, kept)
    scheduled = agg.record(Occurrence(POD, "Normal", "Scheduled", "Binding", "assigned ns/web-0 to n1"))
    assert scheduled is not None and scheduled.queued  # its create is not sent yet

    agg.object_deleted("u-1")
    assert written.forgotten and not scheduled.forgotten and not kept.forgotten
    kind, _, again = write_ok(agg, scheduled)
    assert kind == "create" and again is None and scheduled.forgotten
    assert list(agg.entries.values()) == [kept]
    agg.object_deleted("u-2")
    assert not agg.entries and not agg.by_uid and not agg.deleted


def test_a_deleted_objects_unwritten_count_is_written_before_it_is_forgotten(
    agg: EventAggregator, clock: VirtualClock
) -> None:
    entry = agg.record(failure())
    assert entry is not None
    write_ok(agg, entry)
    agg.record(failure())  # the series starts: written at once
    write_ok(agg, entry)
    agg.record(failure())  # a count the next flush writes
    agg.object_deleted("u-1")
    assert not entry.forgotten
    clock.advance(FLUSH_INTERVAL)
    assert agg.flush() == [entry]
    kind, body, _ = write_ok(agg, entry)
    assert (kind, body["series"]["count"]) == ("patch", 3)
    assert entry.forgotten and not agg.entries


def test_note_is_cut_to_the_api_limit_in_bytes(agg: EventAggregator) -> None:
    entry = agg.record(failure(note="é" * 1000))  # 2000 bytes
    assert entry is not None
    note = entry.body["note"]
    assert len(note.encode()) <= NOTE_LIMIT and note.endswith(" ...")


def test_event_names_never_repeat_and_fall_back_to_uuid() -> None:
    namer = EventNamer(wall_ns=lambda: 255)
    assert [namer("p"), namer("p")] == ["p.ff", "p.100"]
    long_name = namer("a" * 250)
    assert len(long_name) == 36 and long_name.count("-") == 4


def test_related_object_is_part_of_the_key_and_the_body(agg: EventAggregator) -> None:
    preemptor = ObjectRef("Pod", "ns", "high", uid="u-9")
    first = agg.record(
        Occurrence(POD, "Normal", "Preempted", "Preempting", "Preempted by pod u-9", related=preemptor)
    )
    other = agg.record(Occurrence(POD, "Normal", "Preempted", "Preempting", "Preempted by pod u-9"))
    assert first is not None and other is not None and first is not other
    assert first.body["related"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "namespace": "ns",
        "name": "high",
        "uid": "u-9",
    }
    assert "related" not in other.body


def test_reporting_controller_per_occurrence(agg: EventAggregator) -> None:
    default = agg.record(failure())
    profile = agg.record(
        Occurrence(POD, WARNING, "FailedScheduling", "Scheduling", MESSAGE, reporting_controller="gpu")
    )
    assert default is not None and profile is not None and default is not profile
    assert (default.body["reportingController"], profile.body["reportingController"]) == (
        "kopf-scheduler",
        "gpu",
    )


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("default-scheduler", True),
        ("kopf-scheduler.io/bin-packing", True),
        ("A_b.c", True),
        ("", False),
        ("not a name", False),
        ("-leading", False),
        ("x" * 64, False),
        ("Bad_Prefix/name", False),
    ],
)
def test_is_qualified_name(name: str, valid: bool) -> None:
    assert is_qualified_name(name) is valid
