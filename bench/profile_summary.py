"""Where kopf-scheduler's CPU goes, from a raw profile of ``python -m bench run --profile``: every sample is
put in one bucket, by the outermost frame that says what the process was doing, and the buckets are
printed with their share and, given ``--pods``, the cost per measured pod, after each process's total.

    python -m bench.profile_summary bench/results/profile-SchedulingBasic-full-rate100-<time>.cpu.txt \\
        --pods 3000

Two kinds of profile are read. ``--profile-format cpu`` (``bench/cpu_sampler.py``) weighs each stack by
the CPU time it used: the figures are CPU. ``--profile-format raw`` (py-spy) counts samples taken at
``--rate`` per second of every thread running or waiting for a core: on a machine whose cores are busy,
that includes the waits after each wake-up, so the figures are an upper bound of CPU, not CPU.

Buckets, in the order they are tested: the scheduling cycle (split into filter, score, cache snapshot,
pre-filter and the rest), the binding cycle (the ``pods/binding`` POST), event recording, Kopf's
per-event processing (``process_resource_event``: our handler's own body apart), Kopf's watch stream
(reading and decoding lines), Kopf's per-object queues, metrics, other HTTP I/O (responses, socket writes),
the garbage collector's callbacks, and the event loop itself.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

Stack = list[str]
#: the first line of a ``--profile-format cpu`` profile (``bench.cpu_sampler.HEADER``)
CPU_HEADER = "# kopf-scheduler CPU profile"
#: frames of the HTTP path: the API client's pool, TLS, and Kopf's aiohttp client
HTTP = ("k8s/http_pool.py", "aiohttp", "ssl.py", "sslproto.py")


@dataclass
class Profile:
    stacks: list[tuple[Stack, int]]
    #: weights per second: microseconds of CPU (1e6), or py-spy's sampling rate
    per_second: float
    cpu: bool


def read(path: Path, rate: float = 100.0) -> Profile:
    """``frame;frame;... weight`` lines (py-spy's raw/collapsed format)."""
    text = path.read_text()
    stacks = []
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    cpu = text.startswith(CPU_HEADER)
    return Profile(stacks, 1e6 if cpu else rate, cpu)


def _has(frames: Iterable[str], text: str) -> bool:
    return any(text in f for f in frames)


def _own(frames: Stack, package: str) -> str:
    """The innermost frame of ``package`` (or the leaf)."""
    return next((f for f in reversed(frames) if package in f), frames[-1])


def bucket(frames: Stack) -> tuple[str, str]:
    if _has(frames, "scheduling_cycle"):
        for marker, part in (
            ("find_nodes_that_fit", "filter"),
            ("run_score", "score"),
            ("update_snapshot", "cache snapshot"),
            ("run_pre_filter", "pre-filter"),
            ("run_pre_score", "pre-score"),
        ):
            if _has(frames, marker):
                return "scheduling cycle", part
        return "scheduling cycle", "other: " + _own(frames, "kopf_scheduler")
    http = any(_has(frames, f) for f in HTTP)
    if _has(frames, "binding_cycle"):
        return "binding cycle (POST pods/binding)", "HTTP" if http else _own(frames, "kopf_scheduler")
    if _has(frames, "k8s/event_recorder.py") or _has(frames, "k8s/event_series.py"):
        return "events (events.k8s.io)", "HTTP" if http else "recorder"
    if _has(frames, "process_resource_event"):
        ours = ("kopf_scheduler/service/service.py", "kopf_scheduler/scheduling/scheduler.py")
        if any(_has(frames, path) for path in ours):
            return "Kopf per-event processing", "our handler's body (service -> scheduler cache/queue)"
        if _has(frames, "diffbase.py") or _has(frames, "progress.py") or _has(frames, "deepcopy"):
            return "Kopf per-event processing", "_detect_causes: diff-base, progress storage, deepcopy"
        if _has(frames, "execution.py") or _has(frames, "invocation.py"):
            return "Kopf per-event processing", "handler execution: contextvars, kwargs, invocation"
        return "Kopf per-event processing", "other: " + _own(frames, "kopf/")
    if _has(frames, "kopf/_cogs/clients"):
        return "Kopf watch stream", "JSON decoding" if _has(frames, "json/") else "reading"
    if _has(frames, "kopf/_core/reactor/queueing.py"):
        return "Kopf per-object queues and workers", frames[-1]
    if _has(frames, "prometheus_client") or _has(frames, "kopf_scheduler/service/metrics.py"):
        return "metrics", frames[-1]
    if http:
        return "other HTTP I/O (responses, socket writes)", frames[-1]
    if _has(frames, "_after_collection"):  # the first Python code after a collection: its time lands here
        return "garbage collector", frames[-1]
    if _has(frames, "asyncio/"):
        return "event loop (select, callbacks)", frames[-1]
    return "other", frames[-1]


def _process(frames: Stack) -> str:
    first = frames[0]
    if not first.startswith("process "):
        return ""
    return "watch intake process" if "handlers.intake" in first else "scheduling process"


def summarize(profile: Profile, pods: int | None) -> str:
    stacks, per_second = profile.stacks, profile.per_second
    total = sum(n for _, n in stacks)
    if not total:
        return "no samples"
    buckets: Counter[str] = Counter()
    parts: dict[str, Counter[str]] = defaultdict(Counter)
    processes: Counter[str] = Counter()
    for frames, n in stacks:
        name, part = bucket(frames)
        buckets[name] += n
        parts[name][part] += n
        processes[_process(frames)] += n
    per = f"; per pod: over {pods} measured pods" if pods else ""
    if profile.cpu:
        lines = [f"{total / per_second:.2f} CPU s{per}"]
    else:
        seconds = f"{total / per_second:.1f} s of running or runnable threads at {per_second:g} Hz"
        lines = [f"{total} samples ({seconds}){per}"]

    def fmt(n: int) -> str:
        cost = f"  {1e6 * n / per_second / pods:7.0f} us/pod" if pods else ""
        return f"{n:9d} {100 * n / total:5.1f}%{cost}"

    if profile.cpu:  # each stack starts with its process (py-spy's may not tell the intake process apart)
        for name, n in processes.most_common():
            lines.append(f"{fmt(n)}  {name or 'other'}")
        lines.append("")
    for name, n in buckets.most_common():
        lines.append(f"{fmt(n)}  {name}")
        for part, m in parts[name].most_common(5):
            lines.append(f"    {fmt(m)}  {part}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_summary", description=__doc__.splitlines()[0]
    )
    parser.add_argument("profile", type=Path, help="a raw profile (collapsed stacks): cpu or py-spy's")
    parser.add_argument("--pods", type=int, default=None, help="measured pods, for CPU per pod")
    parser.add_argument(
        "--rate", type=float, default=100.0, help="py-spy's sampling rate (bench uses 100); not for cpu"
    )
    args = parser.parse_args(argv)
    print(summarize(read(args.profile, args.rate), args.pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
