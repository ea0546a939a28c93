"""``python -m bench run --profile --profile-format cpu``: the sampler loaded into a process through
``bench/cpu_profile_hook`` charges CPU time, not wall time, to the code that used it, and
``bench.profile_summary`` reads its profile. A child process alternates a busy loop with sleeps of the
same length; the profile must put nearly all of its CPU in the busy loop, and add up to what the kernel
counted for the process over the same window."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]

#: burns CPU before the profile starts (the profile must not charge it), then alternates 30 ms of work
#: with 30 ms of sleep until told to stop
CHILD = """
import time
from pathlib import Path

def spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(i * i for i in range(200))

def nap(seconds):
    time.sleep(seconds)

spin(0.5)
Path("ready").touch()
while not Path("done").exists():
    spin(0.03)
    nap(0.03)
"""


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_cpu_profile_charges_cpu_time_to_the_code_that_used_it(tmp_path: Path) -> None:
    sampler, summary = _load("cpu_sampler"), _load("profile_summary")
    output = tmp_path / "profile-child.cpu.txt"
    profiler = sampler.CpuProfiler(output)
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=tmp_path, env=profiler.env(dict(os.environ)))
    try:
        _wait_for(tmp_path / "ready")
        profiler.start()
        before = _cpu_seconds(child.pid)
        time.sleep(2.0)
        used = _cpu_seconds(child.pid) - before
        profiler.stop()
    finally:
        (tmp_path / "done").touch()
        child.wait(timeout=20)
    assert child.returncode == 0

    profile = summary.read(output)
    assert profile.cpu
    assert {frames[0].split(":")[0] for frames, _ in profile.stacks} == {f"process {child.pid}"}
    total = sum(n for _, n in profile.stacks) / 1e6
    in_spin = sum(n for frames, n in profile.stacks if any(f.startswith("spin (") for f in frames)) / 1e6
    in_nap = sum(n for frames, n in profile.stacks if any(f.startswith("nap (") for f in frames)) / 1e6
    # as long asleep as busy, yet the sleep costs next to no CPU
    assert in_spin >= 0.85 * total, (in_spin, in_nap, total)
    assert in_nap <= 0.05 * total, (in_spin, in_nap, total)
    # what the kernel counted in the window (the sampler's window is up to a poll longer at each end)
    assert abs(total - used) <= 0.25 * used + 0.1, (total, used)
    assert summary.summarize(profile, pods=None).splitlines()[0] == f"{total:.2f} CPU s"
    assert set(tmp_path.glob("profile-child.*")) == {output}, "the per-process files are left behind"
