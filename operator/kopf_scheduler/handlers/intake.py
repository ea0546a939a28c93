"""The watch intake process of ``kopf-scheduler run`` (``python -m kopf_scheduler.handlers.intake``, started
by ``intake_link``): Kopf watches the resources of ``intake_link.WATCHES`` (pods, nodes,
SchedulingProfiles, PodDisruptionBudgets and the kinds in ``WATCHED_KINDS``), with the settings of the
scheduler's own watches, and one ``on.event`` handler per kind writes each event to the pipe the
scheduling process reads (``intake_link.FrameWriter``: the frames of one turn of the event loop in one
write). Nothing is written to the API server; no Lease, no ports.

It loads its modules at once, and watches only once the scheduling process says "go" on its stdin (when
that has loaded its own lists). The watches go on from those lists' resourceVersions (``resume``).
It ends with the scheduling process: killed by the kernel when that
process dies (``PR_SET_PDEATHSIG``), stopped by it otherwise (SIGTERM), and on its own when the pipe
breaks or stdin closes before "go".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import signal
import sys
from typing import Any

import kopf
import uvloop

from kopf_scheduler.handlers import logs
from kopf_scheduler.handlers.lifecycle import NoMemories, configure, new_registry
from kopf_scheduler.handlers.resume import ResumeListings
from kopf_scheduler.service.intake_link import READY, WATCHES, FrameWriter, frame, parse_go
from kopf_scheduler.service.malloc_trim import MallocTrim


def registry_for(fd: int, left_out: frozenset[str] = frozenset()) -> kopf.OperatorRegistry:
    """Kopf's handlers of the intake process, writing to the pipe ``fd``; none for the channels
    ``left_out`` (kinds whose feature gate is off)."""
    registry = new_registry()
    pipe = FrameWriter()
    # Each event passes through and is dropped: what grows is the allocator's free memory, given back.
    trim = MallocTrim()

    @kopf.on.startup(registry=registry)
    async def connect(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings)
        await pipe.connect(fd, on_lost=lambda: os._exit(1))  # no one to hand events to
        # What is alive now (modules, Kopf's machinery) lives as long as the process: the collector's
        # full passes skip it. Nothing later is frozen: each event passes through and is dropped.
        gc.freeze()
        trim.start()

    @kopf.on.cleanup(registry=registry)
    async def disconnect(**_: Any) -> None:
        await trim.stop()

    for watch in WATCHES:
        if watch.channel in left_out:
            continue
        handler = kopf.on.event(
            watch.group, watch.version, watch.plural, id=f"{watch.plural}_intake", registry=registry
        )
        handler(_forwarder(watch.channel, pipe))
    return registry


def _forwarder(name: str, pipe: FrameWriter) -> Any:
    async def forward(event: kopf.RawEvent, **_: Any) -> None:
        pipe.send(name, event["type"], event["object"])

    return forward


def _die_with(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies; exit now if it has died already."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kopf_scheduler.handlers.intake")
    parser.add_argument("--fd", type=int, required=True, help="the pipe to write events to")
    parser.add_argument("--parent", type=int, required=True, help="the scheduling process")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    _die_with(args.parent)
    os.write(args.fd, frame(READY, None, {}))
    # "go", the channels not to watch and where the others resume: the service's lists are loaded
    go = parse_go(sys.stdin.buffer.readline().decode())
    if go is None:
        return 0
    left_out, resume = go
    logs.configure(args.verbose)
    ResumeListings(resume).install()
    # uvloop, as Kopf's own CLI runs when it is installed: libuv's sockets, TLS and pipe cost less CPU
    # per watch event than asyncio's. (The scheduling process stays on asyncio: between two cycles it
    # lets the intake run until asyncio's run queue is empty, which uvloop does not show.)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        registry = registry_for(args.fd, left_out)
        kopf.run(
            loop=runner.get_loop(),
            registry=registry,
            memories=NoMemories(),
            clusterwide=True,
            standalone=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
