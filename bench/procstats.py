"""CPU time and memory of a process and its children, read from ``/proc``.

CPU seconds are ``utime + stime`` (plus ``cutime + cstime``: children already reaped) from
``/proc/<pid>/stat``, summed over the process and its live descendants. Peak memory is ``VmHWM`` (the
resident-set high-water mark the kernel keeps for the life of the process) from ``/proc/<pid>/status``,
summed over the tree: read it before the process is stopped. Whole-machine busy time comes from
``/proc/stat``, so a run can tell how much CPU went to processes that are not part of it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may contain spaces: split after the last ")"
    return text[text.rfind(")") + 2 :].split()


def children_of(pid: int) -> list[int]:
    """Direct children (from ``/proc/<pid>/task/*/children``, else a scan of every process)."""
    found: list[int] = []
    tasks = Path(f"/proc/{pid}/task")
    try:
        for task in tasks.iterdir():
            text = (task / "children").read_text()
            found.extend(int(x) for x in text.split())
        return found
    except OSError:
        pass
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            fields = _stat_fields(int(proc.name))
            if fields and int(fields[1]) == pid:
                found.append(int(proc.name))
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    out, stack = [], [pid]
    while stack:
        current = stack.pop()
        if _stat_fields(current) is None:
            continue
        out.append(current)
        stack.extend(children_of(current))
    return out


def cpu_seconds(pid: int, *, tree: bool = True) -> float:
    """CPU seconds used by ``pid`` (and its descendants, with ``tree``) so far (0.0 when it is gone)."""
    total = 0
    for p in process_tree(pid) if tree else [pid]:
        fields = _stat_fields(p)
        if fields:
            # after the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
            total += sum(int(x) for x in fields[11:15])
    return total / CLOCK_TICKS


def _status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def peak_rss_bytes(pid: int) -> int:
    """Sum of ``VmHWM`` over the tree: each process's own resident high-water mark."""
    return sum(_status_kib(p, "VmHWM") for p in process_tree(pid)) * 1024


def rss_bytes(pid: int, *, tree: bool = True) -> int:
    """Resident set (``VmRSS``) of ``pid`` (summed over its live descendants, with ``tree``)."""
    return sum(_status_kib(p, "VmRSS") for p in (process_tree(pid) if tree else [pid])) * 1024


#: the ``st`` column of ``/proc/net/tcp``: an established connection
TCP_ESTABLISHED = "01"


def tcp_connections(pid: int, remote_port: int | None = None) -> int:
    """Established TCP connections of ``pid`` alone (to ``remote_port`` when given): the rows of
    ``/proc/<pid>/net/tcp`` and ``tcp6`` whose socket inode is one of the process's open descriptors
    (0 when it is gone)."""
    inodes: set[str] = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    except OSError:
        return 0
    count = 0
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            # sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_ESTABLISHED or fields[9] not in inodes:
                continue
            if remote_port is None or int(fields[2].rsplit(":", 1)[1], 16) == remote_port:
                count += 1
    return count


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle since boot (``/proc/stat``: all but idle and iowait)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    values = [int(x) for x in first[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice (guest is inside user)
    busy = sum(values[:8]) - values[3] - values[4]
    return busy / CLOCK_TICKS


def alive(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")
