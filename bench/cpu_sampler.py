"""A CPU-time profile of kopf-scheduler's processes (``python -m bench run --profile --profile-format cpu``).

py-spy samples every thread that is running or waiting for a core. On a machine whose cores are all
busy (the API server, etcd and the load generator run beside the scheduler), a process woken by a pipe
or a socket often waits for a core before it runs, and py-spy counts that wait as time spent in the
Python line where it stands. This sampler counts CPU time only: the kernel sends SIGPROF after each
``INTERVAL`` of the process's CPU time (``ITIMER_PROF``, rounded up to the kernel's tick), and each sample
charges the main thread's CPU time since the previous sample to the Python stack it interrupted. Time in
C code (a system call, a parser, numpy) is charged to the Python code running when the signal is handled.

Both ends live here:

- In kopf-scheduler's processes (the scheduling process and the watch intake process it starts), the
  start-up hook ``bench/cpu_profile_hook/sitecustomize.py`` calls ``start_from_env``: with ``ENV`` set to
  a path prefix, a thread samples while ``<prefix>.on`` exists, marking that with ``<prefix>.<pid>.busy``,
  then writes ``<prefix>.<pid>.txt`` and removes its mark.
- In the benchmark, ``CpuProfiler`` gives the scheduler the environment for that, creates and removes
  ``<prefix>.on`` around the measured phase, and merges the processes' files into one profile.

The profile is in py-spy's raw format (``frame;frame;... weight`` per line, the outermost frame naming the
process), with weights in microseconds of CPU and the first line ``HEADER``; ``bench.profile_summary``
reads both kinds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType

#: the environment variable naming the path prefix of the profile files
ENV = "BENCH_CPU_PROFILE"
#: CPU time between two samples (the kernel sends the signal at its next tick after this)
INTERVAL = 0.001
#: seconds between two looks for the start and stop file
POLL = 0.1
#: the first line of a merged profile
HEADER = "# kopf-scheduler CPU profile: weights in microseconds of CPU"
HOOK_DIR = Path(__file__).resolve().parent / "cpu_profile_hook"


# -- in the profiled process ------------------------------------------------------------------------------


class _Sampler:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pid = os.getpid()
        self.weights: Counter[tuple[tuple[CodeType, int], ...]] = Counter()
        #: the main thread's CPU time at the previous sample (None: none yet in this profile)
        self.last: float | None = None
        self._labels: dict[str, str] = {}
        with open(f"/proc/{self.pid}/cmdline", "rb") as f:
            words = f.read().replace(b"\0", b" ").decode(errors="replace").split()
        # one line, and no ";": the separator of frames
        self.command = " ".join(words).replace(";", ",").replace('"', "'")

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        now = time.thread_time()  # the handler runs on the main thread: its CPU time
        last, self.last = self.last, now
        if last is None:  # the first sample of a profile only starts the count
            return
        spent = now - last
        stack = []
        while frame is not None:
            stack.append((frame.f_code, frame.f_lineno))
            frame = frame.f_back
        self.weights[tuple(reversed(stack))] += spent

    def run(self) -> None:
        """Samples while the start file exists, each time it appears."""
        on, busy = Path(f"{self.prefix}.on"), Path(f"{self.prefix}.{self.pid}.busy")
        while True:
            while not on.exists():
                time.sleep(POLL)
            busy.touch()
            self.weights.clear()
            self.last = None  # the main thread's clock can only be read on the main thread
            signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)
            while on.exists():
                time.sleep(POLL)
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
            self.write(Path(f"{self.prefix}.{self.pid}.txt"))
            busy.unlink(missing_ok=True)

    def write(self, path: Path) -> None:
        process = f'process {self.pid}:"{self.command}"'
        lines = []
        for stack, seconds in list(self.weights.items()):
            frames = ";".join(self._label(code, line) for code, line in stack)
            lines.append(f"{process};{frames} {round(seconds * 1e6)}\n")
        partial = path.with_suffix(".partial")
        partial.write_text("".join(lines))
        partial.replace(path)

    def _label(self, code: CodeType, line: int) -> str:
        """py-spy's form: ``qualified name (file:line)``, the file relative to its ``sys.path`` entry."""
        short = self._labels.get(code.co_filename)
        if short is None:
            short = code.co_filename
            roots = sorted((p for p in sys.path if p and short.startswith(p + os.sep)), key=len)
            if roots:
                short = short[len(roots[-1]) + 1 :]
            self._labels[code.co_filename] = short
        return f"{code.co_qualname} ({short}:{line})"


def start_from_env() -> None:
    """Starts sampling on and off as the start file says, when ``ENV`` is set (from the start-up hook)."""
    prefix = os.environ.get(ENV)
    if not prefix or threading.current_thread() is not threading.main_thread():
        return
    sampler = _Sampler(prefix)
    signal.signal(signal.SIGPROF, sampler.on_signal)
    threading.Thread(target=sampler.run, name="cpu-sampler", daemon=True).start()


# -- in the benchmark -------------------------------------------------------------------------------------


class CpuProfiler:
    """The benchmark's end: ``env`` for the scheduler's start, ``start`` and ``stop`` around the measured
    phase; ``stop`` writes the merged profile to ``output``."""

    #: seconds ``stop`` waits for the processes to write their files
    WRITE_TIMEOUT = 20.0

    def __init__(self, output: Path) -> None:
        self.output = output
        self.prefix = str(output.with_suffix(""))
        self._on = Path(f"{self.prefix}.on")
        self.started = False

    def env(self, environ: dict[str, str]) -> dict[str, str]:
        """``environ`` with the start-up hook first on PYTHONPATH and the prefix set."""
        path = os.pathsep.join(p for p in (str(HOOK_DIR), environ.get("PYTHONPATH", "")) if p)
        return {**environ, "PYTHONPATH": path, ENV: self.prefix}

    def start(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self._on.touch()
        self.started = True
        deadline = time.monotonic() + 5.0
        while not self._files(".busy"):  # sampling before the first pod
            if time.monotonic() > deadline:
                self._on.unlink(missing_ok=True)
                raise RuntimeError(f"no kopf-scheduler process started sampling ({ENV}={self.prefix})")
            time.sleep(POLL)

    def stop(self) -> None:
        if not self.started:
            return
        self.started = False
        self._on.unlink(missing_ok=True)
        deadline = time.monotonic() + self.WRITE_TIMEOUT
        while self._files(".busy") and time.monotonic() < deadline:
            time.sleep(POLL)
        parts = self._files(".txt")
        with self.output.open("w") as out:
            out.write(HEADER + "\n")
            for part in parts:
                out.write(part.read_text())
        for part in parts + self._files(".busy"):
            with contextlib.suppress(OSError):
                part.unlink()

    def _files(self, suffix: str) -> list[Path]:
        folder, name = Path(self.prefix).parent, Path(self.prefix).name
        return sorted(folder.glob(f"{name}.*{suffix}"))
