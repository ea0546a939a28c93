"""MallocTrim: the C allocator's free pages are handed back to the kernel periodically, and only where the
C library can (glibc's ``malloc_trim``); in the intake process's environment that includes what a burst of
events left."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from kopf_scheduler.service.intake_link import intake_environment
from kopf_scheduler.service.malloc_trim import MallocTrim, libc_malloc_trim

GLIBC = libc_malloc_trim() is not None

#: what each measured script begins with: the trim, and its own resident set in MiB
MEASURING = """
from kopf_scheduler.service.malloc_trim import libc_malloc_trim

def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
"""


def measured(script: str, env: dict[str, str] | None = None) -> list[float]:
    """The numbers ``script`` prints, run in a fresh interpreter (with ``env``) after ``MEASURING``."""
    code = MEASURING + textwrap.dedent(script)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return [float(number) for number in out.stdout.split()]


async def test_trims_every_interval_until_stopped() -> None:
    calls: list[int] = []
    trim = MallocTrim(every=0.01, trim=lambda pad: calls.append(pad) or 1)
    trim.start()
    for _ in range(200):
        if len(calls) >= 3:
            break
        await asyncio.sleep(0.01)
    await trim.stop()
    assert calls[:3] == [0, 0, 0]  # pad 0: every whole free page
    after_stop = len(calls)
    await asyncio.sleep(0.05)
    assert len(calls) == after_stop


async def test_nothing_runs_without_malloc_trim() -> None:
    trim = MallocTrim(every=0.01)
    trim._trim = None  # a C library without it (musl, macOS)
    trim.start()
    assert trim._task is None
    await trim.stop()


@pytest.mark.skipif(not GLIBC, reason="the C library has no malloc_trim")
def test_free_memory_between_live_chunks_leaves_the_resident_set() -> None:
    # 200 MiB of 4 KiB chunks (above pymalloc's 512 bytes: from malloc), then all but every 64th freed:
    # the free chunks lie between live ones, so free() alone cannot shrink the heap.
    before, after = measured(
        """
        chunks = [bytes(4096) for _ in range(51200)]
        kept = chunks[::64]
        del chunks
        before = rss_mib()
        libc_malloc_trim()(0)
        print(before, rss_mib())
        """
    )
    assert before > 150  # the free chunks were still resident
    assert before - after > 150  # and are no longer


BURST = """
    import json

    event = json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "p", "uid": "u" * 36},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "message": "m" * 80}]}}})
    base = rss_mib()
    events, kept = [], []
    for i in range(6000):  # the events a reconnected watch missed, decoded at once
        events.append(json.loads(event))
        if i % 100 == 0:
            kept.append({"made meanwhile": [i] * 8})  # a few objects outlive the burst
    peak = rss_mib()
    del events
    libc_malloc_trim()(0)
    print(base, peak, rss_mib())
    """


@pytest.mark.skipif(not GLIBC, reason="the C library has no malloc_trim")
@pytest.mark.parametrize(("allocator", "handed_back"), [(None, True), ("pymalloc", False)])
def test_a_burst_of_events_leaves_the_intake_process_once_trimmed(
    allocator: str | None, handed_back: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the intake process's environment (``PYTHONMALLOC=malloc``), the memory of a burst of decoded
    events goes back at a trim though a few objects made meanwhile live on; with Python's own allocator
    (which the environment keeps when asked for) their arenas stay resident."""
    if allocator is None:
        monkeypatch.delenv("PYTHONMALLOC", raising=False)
    else:
        monkeypatch.setenv("PYTHONMALLOC", allocator)
    base, peak, after = measured(BURST, env=intake_environment(os.environ))
    assert peak - base > 5  # the burst took several MiB
    left = (after - base) / (peak - base)
    assert left < 0.3 if handed_back else left > 0.8
