"""Starting and stopping the control-plane processes.

Every component runs detached in its own session (so it is its own process-group leader and outlives
the command that started it), with stdin closed and stdout+stderr appended to a log file. It is stopped
by signalling its whole process group: SIGTERM, then SIGKILL after a grace period. Before signalling a
pid read back from disk, the process's command line is compared with the recorded one, so a recycled
pid of an unrelated process is never killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Component:
    """One running (or once started) process; serialised into the dev cluster's state file."""

    name: str
    argv: list[str]
    log_file: Path
    pid: int = 0
    # Live handle when this Python process started it; lets `stop` reap it (no zombie left behind).
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "argv": self.argv, "log_file": str(self.log_file), "pid": self.pid}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Component:
        return cls(
            name=data["name"], argv=list(data["argv"]), log_file=Path(data["log_file"]), pid=data["pid"]
        )

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return is_running(self.pid, self.argv[0])

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the parent dies (PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)


def spawn(
    name: str,
    argv: Sequence[str],
    log_file: Path,
    *,
    env: dict[str, str] | None = None,
    die_with_parent: bool = False,
) -> Component:
    """Start ``argv`` detached (new session), output appended to ``log_file``. With ``die_with_parent``
    the process is also terminated if this Python process dies without stopping it (test fixtures)."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
            preexec_fn=_die_with_parent if die_with_parent else None,
        )
    return Component(name=name, argv=list(argv), log_file=log_file, pid=popen.pid, popen=popen)


def is_running(pid: int, executable: str | None = None) -> bool:
    """Whether ``pid`` is a live, non-zombie process (running ``executable``, when given)."""
    if pid <= 0:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    # The state letter follows the parenthesised command name, which may itself contain spaces.
    if stat[stat.rfind(")") + 2 :].startswith(("Z", "X")):
        return False
    if executable is None:
        return True
    argv0 = cmdline.split(b"\0", 1)[0].decode(errors="replace")
    return argv0 == executable


def stop(component: Component, timeout: float = 10.0) -> None:
    """SIGTERM the component's process group, SIGKILL it after ``timeout`` seconds; idempotent."""
    if not component.alive():
        _reap(component)
        return
    _signal_group(component.pid, signal.SIGTERM)
    if not _wait_dead(component, timeout):
        _signal_group(component.pid, signal.SIGKILL)
        _wait_dead(component, 5.0)
    _reap(component)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _wait_dead(component: Component, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not component.alive():
            return True
        time.sleep(0.05)
    return not component.alive()


def _reap(component: Component) -> None:
    if component.popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            component.popen.wait(timeout=1.0)


def path_in_use(path: Path) -> bool:
    """Whether any live process has ``path`` in its command line (e.g. etcd's ``--data-dir``)."""
    needle = str(path).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def log_tail(log_file: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist)."""
    try:
        with open(log_file, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except FileNotFoundError:
        return ""


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    *,
    interval: float = 0.2,
    alive: Callable[[], bool] = lambda: True,
) -> bool:
    """Poll ``check`` until true (True), ``timeout`` passes or ``alive`` turns false (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if not alive() or time.monotonic() >= deadline:
            return False
        time.sleep(interval)
