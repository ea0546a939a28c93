"""The scheduling process's end of the watch intake (``intake_link``), against a real child process that
writes frames as the intake process does (``intake_link.frame``) on the pipe it is handed: every event
reaches the service's method for its kind, in the order sent, whole however the pipe splits it; an
intake process that ends on its own is a failure, one stopped on purpose is not."""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from waiting import until

from kopf_scheduler.framework.objects import DEVICE_TAINT_RULES, SERVICES, WATCHED_KINDS, ObjectKind
from kopf_scheduler.service import intake_link
from kopf_scheduler.service.intake_link import IntakeLink

#: the stand-in intake process: after ``LOAD`` seconds says it is ready, waits for "go" on stdin (as
#: ``handlers.intake`` does), writes the frames of ``EVENTS`` (a Python literal), in writes of ``CHUNK``
#: bytes with a pause between them, then does ``THEN``
CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    from kopf_scheduler.service.intake_link import READY, frame
    fd = int(next(a for a in sys.argv if a.startswith("--fd="))[5:])
    time.sleep(LOAD)
    os.write(fd, frame(READY, None, {}))
    if sys.stdin.readline() != "go\\n":
        sys.exit(5)
    data = b"".join(frame(*event) for event in EVENTS)
    for at in range(0, len(data), CHUNK):
        os.write(fd, data[at : at + CHUNK])
        time.sleep(0.001)
    THEN
    """
)


class Sink:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, Any]] = []
        self.profile_running = 0

    def pod_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        self.seen.append(("pod", kind, obj))

    def node_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("a node the sink cannot take")
        self.seen.append(("node", kind, obj))

    def pdb_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        self.seen.append(("pdb", kind, obj))

    def object_event(self, kind: ObjectKind[Any], event: str | None, obj: Mapping[str, Any]) -> None:
        self.seen.append((kind.kind, event, obj))

    async def profile_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        assert self.profile_running == 0, "two profile events at once"
        self.profile_running += 1
        await asyncio.sleep(0.01)
        self.seen.append(("profile", kind, obj))
        self.profile_running -= 1


def _link(
    tmp_path: Path,
    events: list[tuple[str, str | None, dict[str, Any]]],
    *,
    chunk: int,
    then: str = "time.sleep(60)",
    load: float = 0.0,
) -> tuple[IntakeLink, Sink, list[str]]:
    sink, failures = Sink(), []
    link = IntakeLink(sink, failures.append)
    script = tmp_path / "intake.py"
    script.write_text(
        CHILD.replace("LOAD", str(load))
        .replace("EVENTS", repr(events))
        .replace("CHUNK", str(chunk))
        .replace("THEN", then)
    )
    link.argv = [sys.executable, str(script)]
    return link, sink, failures


def _obj(name: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **extra}}


@pytest.mark.parametrize("chunk", [997, 4096, 1 << 20], ids=["odd-writes", "page-writes", "one-write"])
def test_every_event_reaches_its_kind_in_order(chunk: int, tmp_path: Path) -> None:
    big = _obj("big", annotations={"blob": "x" * (3 * intake_link.READ_SIZE)})
    events = [
        (intake_link.PODS, None, _obj("p0")),
        (intake_link.NODES, "ADDED", _obj("n0", managedFields=[{"manager": "kubectl"}])),
        (intake_link.PROFILES, None, _obj("prof-a")),
        (intake_link.NODES, "MODIFIED", _obj("bad")),
        (intake_link.PODS, "MODIFIED", big),
        (intake_link.channel(SERVICES), "ADDED", _obj("svc")),
        (intake_link.PDBS, "DELETED", _obj("pdb")),
        (intake_link.PROFILES, "MODIFIED", _obj("prof-a")),
        ("widgets.example.com", "ADDED", _obj("w")),
        *[(intake_link.PODS, "ADDED", _obj(f"p{i}")) for i in range(1, 300)],
    ]

    async def run() -> tuple[Sink, list[str]]:
        link, sink, failures = _link(tmp_path, events, chunk=chunk)
        await link.start()
        link.go()
        try:
            # all but two: the bad node, the unknown channel
            await until(lambda: len(sink.seen) == len(events) - 2, timeout=10)
        finally:
            await link.stop()
        return sink, failures

    sink, failures = asyncio.run(run())
    assert failures == []
    pods = [obj["metadata"]["name"] for what, _, obj in sink.seen if what == "pod"]
    assert pods == ["p0", "big"] + [f"p{i}" for i in range(1, 300)]
    assert (
        next(obj for what, _, obj in sink.seen if what == "pod" and obj["metadata"]["name"] == "big") == big
    )
    others = [(what, kind, obj["metadata"]["name"]) for what, kind, obj in sink.seen if what != "pod"]
    # profile events are awaited (they write status) in tasks of their own, one at a time, in order
    assert [seen for seen in others if seen[0] == "profile"] == [
        ("profile", None, "prof-a"),
        ("profile", "MODIFIED", "prof-a"),
    ]
    assert [seen for seen in others if seen[0] != "profile"] == [
        ("node", "ADDED", "n0"),
        ("Service", "ADDED", "svc"),
        ("pdb", "DELETED", "pdb"),
    ]
    node = next(obj for what, _, obj in sink.seen if what == "node")
    assert node == _obj("n0")  # kept without managedFields
    assert sink.seen[0] == ("pod", None, _obj("p0"))  # a listed object keeps its None


def test_start_returns_once_the_intake_process_is_loaded(tmp_path: Path) -> None:
    """``start`` waits for the intake process's ready frame (it loads while the service lists); events
    come only after ``go``, which the stand-in checks it got before writing any."""

    async def run() -> tuple[float, Sink, list[str]]:
        link, sink, failures = _link(tmp_path, [(intake_link.PODS, "ADDED", _obj("p"))], chunk=4096, load=0.5)
        began = asyncio.get_running_loop().time()
        await link.start()
        took = asyncio.get_running_loop().time() - began
        link.go()
        await until(lambda: bool(sink.seen), timeout=10)
        await link.stop()
        return took, sink, failures

    took, sink, failures = asyncio.run(run())
    assert took >= 0.5
    assert sink.seen == [("pod", "ADDED", _obj("p"))]
    assert failures == []


def test_an_intake_process_that_dies_loading_is_a_failure(tmp_path: Path) -> None:
    async def run() -> list[str]:
        link, _, failures = _link(tmp_path, [], chunk=4096)
        link.argv = [sys.executable, "-c", "import sys; sys.exit(4)"]
        await link.start()  # returns: the failure stops the operator
        await link.stop()
        return failures

    failures = asyncio.run(run())
    assert len(failures) == 1 and failures[0].endswith("exited with code 4")


def test_an_intake_process_that_exits_on_its_own_is_one_failure(tmp_path: Path) -> None:
    async def run() -> tuple[Sink, list[str]]:
        link, sink, failures = _link(
            tmp_path, [(intake_link.PODS, "ADDED", _obj("p"))], chunk=4096, then="sys.exit(3)"
        )
        await link.start()
        link.go()
        await until(lambda: bool(failures), timeout=10)
        await link.stop()
        return sink, failures

    sink, failures = asyncio.run(run())
    assert [what for what, _, _ in sink.seen] == ["pod"]
    assert len(failures) == 1
    assert failures[0].startswith("the watch intake process (pid ") and failures[0].endswith(
        "exited with code 3"
    )


@pytest.mark.parametrize("ignores_sigterm", [False, True])
def test_stopping_ends_the_intake_process_without_a_failure(
    ignores_sigterm: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(intake_link, "STOP_TIMEOUT", 0.5)
    # the child says it is past its signal set-up with one more frame, written after it
    armed = f"os.write(fd, frame({intake_link.PODS!r}, 'ADDED', {_obj('armed')!r}))"
    then = (
        f"signal.signal(signal.SIGTERM, signal.SIG_IGN); {armed}; time.sleep(60)"
        if ignores_sigterm
        else f"{armed}; time.sleep(60)"
    )

    async def run() -> tuple[int | None, list[str]]:
        link, sink, failures = _link(
            tmp_path, [(intake_link.PODS, "ADDED", _obj("p"))], chunk=4096, then=then
        )
        await link.start()
        link.go()
        await until(lambda: ("pod", "ADDED", _obj("armed")) in sink.seen, timeout=10)
        pid = link.pid
        await link.stop()
        return pid, failures

    pid, failures = asyncio.run(run())
    assert failures == []
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone and reaped


REPORT = "{'metadata': {'name': os.environ['PYTHONMALLOC']}}"


@pytest.mark.parametrize(("given", "used"), [(None, "malloc"), ("pymalloc", "pymalloc")])
def test_the_intake_process_allocates_with_malloc_unless_told_otherwise(
    given: str | None, used: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The intake process gets ``PYTHONMALLOC=malloc`` (its free memory after a burst of events can then
    be trimmed); an allocator the scheduler's own environment names is kept."""
    if given is None:
        monkeypatch.delenv("PYTHONMALLOC", raising=False)
    else:
        monkeypatch.setenv("PYTHONMALLOC", given)

    async def run() -> Sink:  # the stand-in reports the allocator it was given as a pod's name
        then = f"os.write(fd, frame({intake_link.PODS!r}, 'ADDED', {REPORT})); time.sleep(60)"
        link, sink, _ = _link(tmp_path, [], chunk=4096, then=then)
        await link.start()
        link.go()
        await until(lambda: bool(sink.seen), timeout=10)
        await link.stop()
        return sink

    sink = asyncio.run(run())
    assert sink.seen == [("pod", "ADDED", _obj(used))]


def test_the_intake_process_of_another_parent_exits_at_once() -> None:
    """The intake module's own start-up check: handed a parent that is not its parent, it exits at once
    (the kernel's PR_SET_PDEATHSIG covers a parent that dies later)."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "kopf_scheduler.handlers.intake", f"--fd={write_fd}", "--parent=1"],
            dict(os.environ),
        )
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read_fd)
        os.close(write_fd)
    assert os.waitstatus_to_exitcode(status) == 1


def test_the_intake_process_writes_a_turns_frames_together_in_order() -> None:
    """The intake process's end (``FrameWriter``): the frames of handlers that ran in one turn of its
    event loop leave in one write, and every frame arrives whole and in the order it was sent."""
    read_fd, write_fd = os.pipe()
    sent = [("pods", "ADDED", {"metadata": {"name": f"p{i}"}}) for i in range(7)]

    async def run() -> int:
        pipe = intake_link.FrameWriter()
        await pipe.connect(write_fd, on_lost=lambda: None)
        assert pipe.transport is not None
        writes = 0
        write = pipe.transport.write

        def counted(data: Any) -> None:
            nonlocal writes
            writes += 1
            write(data)

        pipe.transport.write = counted  # type: ignore[method-assign]
        for event in sent[:4]:  # one turn
            pipe.send(*event)
        await asyncio.sleep(0)
        for event in sent[4:]:  # the next
            pipe.send(*event)
        await asyncio.sleep(0.01)
        pipe.transport.close()
        return writes

    try:
        writes = asyncio.run(run())
        data = os.read(read_fd, 1 << 16)
    finally:
        os.close(read_fd)
    received, at = [], 0
    while at < len(data):
        (size,) = intake_link.HEADER.unpack_from(data, at)
        received.append(pickle.loads(data[at + 4 : at + 4 + size]))
        at += 4 + size
    assert received == sent
    assert writes == 2


class _Stdin:
    def __init__(self) -> None:
        self.written = b""

    def write(self, data: bytes) -> None:
        self.written += data


class _Process:
    returncode = None

    def __init__(self) -> None:
        self.stdin = _Stdin()


@pytest.mark.parametrize("gated_off", [False, True])
def test_go_names_the_channels_of_kinds_not_fed(gated_off: bool) -> None:
    """The intake process is told, with "go", which watched kinds to leave out (a kind whose feature gate
    is off: DeviceTaintRules without DRADeviceTaintRules)."""
    link = IntakeLink(Sink(), lambda line: None)
    process = _Process()
    link._process = process  # type: ignore[assignment]
    fed = [kind for kind in WATCHED_KINDS if not (gated_off and kind is DEVICE_TAINT_RULES)]
    link.go(fed)
    expected = b"go devicetaintrules.resource.k8s.io\n" if gated_off else b"go\n"
    assert process.stdin.written == expected


def test_go_names_where_each_listed_watch_resumes() -> None:
    """With "go" come the resourceVersions of the service's start-up lists, one per channel, which the
    intake process reads back beside the channels left out."""
    link = IntakeLink(Sink(), lambda line: None)
    process = _Process()
    link._process = process  # type: ignore[assignment]
    fed = [kind for kind in WATCHED_KINDS if kind is not DEVICE_TAINT_RULES]
    link.go(fed, {"pods": "812", "nodes": "790"})
    line = process.stdin.written.decode()
    assert line == "go devicetaintrules.resource.k8s.io nodes=790 pods=812\n"
    assert intake_link.parse_go(line) == (
        frozenset({"devicetaintrules.resource.k8s.io"}),
        {"nodes": "790", "pods": "812"},
    )
    assert intake_link.parse_go("") is None
