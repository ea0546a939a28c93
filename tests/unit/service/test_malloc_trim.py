"""MallocTrim: the C allocator's free pages are handed back to the kernel periodically, and only where the
C library can (glibc's ``malloc_trim``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

from kopf_scheduler.service.malloc_trim import MallocTrim, libc_malloc_trim

GLIBC = libc_malloc_trim() is not None


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
    script = textwrap.dedent(
        """
        from kopf_scheduler.service.malloc_trim import libc_malloc_trim

        def rss_mib():
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024

        chunks = [bytes(4096) for _ in range(51200)]
        kept = chunks[::64]
        del chunks
        before = rss_mib()
        libc_malloc_trim()(0)
        print(before, rss_mib())
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    before, after = map(float, out.split())
    assert before > 150  # the free chunks were still resident
    assert before - after > 150  # and are no longer
