"""The pipe between the watch intake process (``handlers/intake.py``) and the scheduling process: the
intake process's end (``FrameWriter``) and the scheduling process's (``IntakeLink``).

``kopf-scheduler run`` runs Kopf's watches in a second process: Kopf's handling of a watch event (its
per-object workers, JSON decoding, handler invocation) cost the scheduling loop more CPU than the
scheduling cycle itself. That process sends each event as one frame on a pipe: a 4-byte length, then the
pickled ``(channel, event type, object)``, the object without ``metadata.managedFields``. Here frames are
read as the pipe becomes readable, a bounded amount per turn of the event loop, and handed to the
service's event methods in the order they were sent (per object, the order of its watch). ``WATCHES``
lists the watched resources once, for both ends and for the one-process handlers.

Guards: the intake process is started while the service loads its initial lists and watches only once
they are loaded (``go``), from their resourceVersions (``handlers.resume``), before the service leads, as
Kopf's watches started only after the start-up handler. It dies with this process (``PR_SET_PDEATHSIG``)
and runs in a session of its own, so a signal to this process's group (Ctrl-C, a stop by the harness or
the kubelet) reaches this process alone, which stops it after the service has stopped. An intake process
that ends while the service runs is a failure: nothing would reach the cache any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import struct
import sys
from collections.abc import Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kopf_scheduler.api.schema import GROUP, PLURAL, VERSION
from kopf_scheduler.framework.objects import WATCHED_KINDS, ObjectKind
from kopf_scheduler.framework.slim import slim

log = logging.getLogger("kopf_scheduler")

#: the length prefix of a frame
HEADER = struct.Struct("<I")
#: bytes read from the pipe per turn of the event loop (about 50 pods): intake in step with the loop,
#: never one long pause for it
READ_SIZE = 128 * 1024
#: seconds the intake process has to exit after SIGTERM before it is killed
STOP_TIMEOUT = 2.0

PODS = "pods"
NODES = "nodes"
PDBS = "poddisruptionbudgets.policy"
PROFILES = "schedulingprofiles"
#: the intake process's first frame: its modules are loaded, it waits for "go"
READY = "ready"


class _Resource(Protocol):
    @property
    def plural(self) -> str: ...
    @property
    def group(self) -> str: ...


def channel(kind: _Resource) -> str:
    """The channel of one of ``WATCHED_KINDS`` (or of Kopf's resource of it): its plural and group
    (``services``, ``replicasets.apps``)."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def frame(name: str, event: str | None, obj: Mapping[str, Any]) -> bytes:
    """One event as sent on the pipe."""
    data = pickle.dumps((name, event, slim(obj)), protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


class FrameWriter:
    """The intake process's end of the pipe: the frames of one turn of its event loop are written
    together at the start of the next, in the order they were sent (a write per event was a system call
    per event, a fifth of that process's CPU)."""

    def __init__(self) -> None:
        self.transport: asyncio.WriteTransport | None = None
        self._frames: list[bytes] = []

    async def connect(self, fd: int, on_lost: Callable[[], None]) -> None:
        """Writes to the pipe ``fd``; ``on_lost`` is called when its reader is gone."""
        loop = asyncio.get_running_loop()
        self.transport, _ = await loop.connect_write_pipe(
            lambda: _Lost(on_lost), os.fdopen(fd, "wb", buffering=0)
        )

    def send(self, name: str, event: str | None, obj: Mapping[str, Any]) -> None:
        if not self._frames:
            asyncio.get_running_loop().call_soon(self._flush)
        self._frames.append(frame(name, event, obj))

    def _flush(self) -> None:
        frames, self._frames = self._frames, []
        assert self.transport is not None
        self.transport.write(frames[0] if len(frames) == 1 else b"".join(frames))


class _Lost(asyncio.Protocol):
    def __init__(self, on_lost: Callable[[], None]) -> None:
        self.on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self.on_lost()


class EventSink(Protocol):
    """What the events go to (``service.SchedulerService``)."""

    def pod_event(self, kind: str | None, obj: Mapping[str, Any]) -> None: ...
    def node_event(self, kind: str | None, obj: Mapping[str, Any]) -> None: ...
    def pdb_event(self, kind: str | None, obj: Mapping[str, Any]) -> None: ...
    def object_event(self, kind: ObjectKind[Any], event: str | None, obj: Mapping[str, Any]) -> None: ...
    async def profile_event(self, kind: str | None, obj: Mapping[str, Any]) -> None: ...


#: (the sink, the event type or None for a listed object, the object): a coroutine when the sink's
#: method is one (SchedulingProfiles: handled one at a time, in order), else None
Deliver = Callable[[EventSink, str | None, Mapping[str, Any]], Coroutine[Any, Any, None] | None]


@dataclass(frozen=True)
class Watch:
    """A watched resource: where Kopf watches it, its channel on the pipe, and which method of the sink
    its events go to. ``WATCHES`` is the one list of them: the intake process registers a handler for
    each, this end routes each channel, and ``kopf run -m kopf_scheduler.handlers`` (one process)
    registers the same handlers calling the sink directly."""

    group: str
    version: str
    plural: str
    channel: str
    deliver: Deliver


def _objects(kind: ObjectKind[Any]) -> Deliver:
    return lambda sink, event, obj: sink.object_event(kind, event, obj)


WATCHES: tuple[Watch, ...] = (
    Watch("", "v1", "pods", PODS, lambda sink, event, obj: sink.pod_event(event, obj)),
    Watch("", "v1", "nodes", NODES, lambda sink, event, obj: sink.node_event(event, obj)),
    Watch("policy", "v1", "poddisruptionbudgets", PDBS, lambda sink, event, obj: sink.pdb_event(event, obj)),
    Watch(GROUP, VERSION, PLURAL, PROFILES, lambda sink, event, obj: sink.profile_event(event, obj)),
    *(Watch(kind.group, kind.version, kind.plural, channel(kind), _objects(kind)) for kind in WATCHED_KINDS),
)


def intake_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The intake process's environment: the scheduler's, with Python's objects allocated by the C
    library's ``malloc`` (``PYTHONMALLOC=malloc``) unless it names an allocator itself. A watch that
    reconnects gets the events it missed in one burst, decoded at once; with Python's own allocator the
    few objects that outlive the burst keep whole 1 MiB arenas resident, while the C library's free pages
    between them go back to the kernel at the next ``malloc_trim`` (``service.malloc_trim``)."""
    return {**environ, "PYTHONMALLOC": environ.get("PYTHONMALLOC") or "malloc"}


class IntakeLink:
    """Starts the intake process, feeds its events to ``sink``, and stops it."""

    def __init__(self, sink: EventSink, on_failure: Callable[[str], None], *, verbose: bool = False) -> None:
        """``on_failure``: called once with one line when the intake process ends on its own."""
        self.sink = sink
        self.on_failure = on_failure
        self.argv = [sys.executable, "-m", "kopf_scheduler.handlers.intake"] + (
            ["--verbose"] if verbose else []
        )
        self.stopping = False
        self._process: asyncio.subprocess.Process | None = None
        self._fd = -1
        self._buffer = bytearray()
        self._waiter: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._serial = asyncio.Lock()  # the events handled by coroutines: one at a time, in order
        self._serial_tasks: set[asyncio.Task[None]] = set()
        self._routes: dict[str, Watch] = {watch.channel: watch for watch in WATCHES}

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def start(self) -> None:
        """Starts the intake process and returns once it has loaded its modules (it says so with a
        frame on ``READY``); it watches nothing before ``go``. Started while the service loads its lists,
        it watches moments after they are loaded, not after its own start-up of about a second."""
        read_fd, write_fd = os.pipe()
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.argv,
                f"--fd={write_fd}",
                f"--parent={os.getpid()}",
                pass_fds=(write_fd,),
                start_new_session=True,
                stdin=asyncio.subprocess.PIPE,
                env=intake_environment(os.environ),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        os.set_blocking(read_fd, False)
        self._fd = read_fd
        ready = self._ready = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().add_reader(read_fd, self._readable)
        self._waiter = asyncio.create_task(self._wait(), name="watch-intake")
        log.info("watch intake: process %d", self._process.pid)
        await asyncio.shield(ready)

    def go(
        self, fed: Collection[ObjectKind[Any]] = WATCHED_KINDS, resume: Mapping[str, str] | None = None
    ) -> None:
        """Lets the intake process watch (once the service has loaded its initial lists); of
        ``WATCHED_KINDS``, only the ``fed`` ones (a kind whose feature gate is off is not watched).
        ``resume``: by channel, the resourceVersion of the service's own start-up list, from which that
        watch goes on without listing again (``handlers.resume``)."""
        if self._process is not None and self._process.stdin is not None and self._process.returncode is None:
            self._process.stdin.write(go_line(fed, resume or {}).encode() + b"\n")

    async def _wait(self) -> None:
        assert self._process is not None
        code = await self._process.wait()
        if self._ready is not None and not self._ready.done():
            self._ready.set_result(None)  # ``start`` returns; the failure below stops the operator
        if not self.stopping:
            self._close_pipe()
            self.on_failure(f"the watch intake process (pid {self._process.pid}) exited with code {code}")

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, READ_SIZE)
        except BlockingIOError:
            return
        if not chunk:  # the intake process closed its end; ``_wait`` reports its exit
            self._close_pipe()
            return
        buffer = self._buffer
        buffer += chunk
        at, end = 0, len(buffer)
        while end - at >= HEADER.size:
            (size,) = HEADER.unpack_from(buffer, at)
            start = at + HEADER.size
            if end - start < size:
                break
            name, event, obj = pickle.loads(buffer[start : start + size])
            at = start + size
            self._deliver(name, event, obj)
        del buffer[:at]

    def _deliver(self, name: str, event: str | None, obj: Mapping[str, Any]) -> None:
        if name == READY:
            if self._ready is not None and not self._ready.done():
                self._ready.set_result(None)
            return
        watch = self._routes.get(name)
        if watch is None:
            log.warning("watch intake: an event on an unknown channel %r, ignored", name)
            return
        try:
            later = watch.deliver(self.sink, event, obj)
        except Exception:  # one bad event costs that event, not the intake
            log.exception("watch intake: handling a %s event of %s failed", event or "LISTED", name)
            return
        if later is not None:
            task = asyncio.create_task(self._in_turn(later, event, name), name=f"{name}-event")
            self._serial_tasks.add(task)
            task.add_done_callback(self._serial_tasks.discard)
            task.add_done_callback(lambda _: later.close())  # cancelled before its turn: never awaited

    async def _in_turn(self, later: Coroutine[Any, Any, None], event: str | None, name: str) -> None:
        async with self._serial:
            try:
                await later
            except Exception:
                log.exception("watch intake: handling a %s event of %s failed", event or "LISTED", name)

    def _close_pipe(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1

    async def stop(self) -> None:
        """Stops the intake process (SIGTERM, then SIGKILL after ``STOP_TIMEOUT``) and waits for it."""
        self.stopping = True
        self._close_pipe()
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
        if self._waiter is not None:
            await self._waiter
        for task in list(self._serial_tasks):
            task.cancel()


def go_line(fed: Collection[ObjectKind[Any]], resume: Mapping[str, str]) -> str:
    """What ``go`` writes: "go", then each channel left out, then ``channel=resourceVersion`` for each
    watch that resumes (``parse_go`` reads it back)."""
    left_out = [channel(kind) for kind in WATCHED_KINDS if kind not in fed]
    return " ".join(["go", *left_out, *(f"{name}={version}" for name, version in sorted(resume.items()))])


def parse_go(line: str) -> tuple[frozenset[str], dict[str, str]] | None:
    """The channels left out and the resume points of a ``go_line``; None for anything else (stdin closed)."""
    words = line.split()
    if not words or words[0] != "go":
        return None
    left_out = frozenset(word for word in words[1:] if "=" not in word)
    resume = dict(word.split("=", 1) for word in words[1:] if "=" in word)
    return left_out, resume
