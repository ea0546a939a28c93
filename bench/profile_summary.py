"""Where kopf-scheduler's CPU goes, from a ``py-spy record --format raw`` profile (``python -m bench run
--profile --profile-format raw``): every sample is put in one bucket, by the outermost frame that says
what the process was doing, and the buckets are printed with their share and, given ``--pods``, the CPU
per measured pod.

    python -m bench.profile_summary bench/results/profile-SchedulingBasic-full-throughput-<time>.txt \\
        --pods 10000 --rate 100

Buckets, in the order they are tested: the scheduling cycle (split into filter, score, cache snapshot,
pre-filter and the rest), the binding cycle (the ``pods/binding`` POST), event recording, Kopf's
per-event processing (``process_resource_event``: our handler's own body apart), Kopf's watch stream
(reading and decoding lines), Kopf's per-object queues, metrics, other HTTP I/O (responses, socket writes)
and the event loop itself.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

Stack = list[str]


def read(path: Path) -> list[tuple[Stack, int]]:
    """``frame;frame;... count`` lines (py-spy's raw/collapsed format)."""
    stacks = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            stacks.append((stack.split(";"), int(count)))
    return stacks


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
    if _has(frames, "binding_cycle"):
        http = _has(frames, "aiohttp") or _has(frames, "ssl.py")
        return "binding cycle (POST pods/binding)", "HTTP" if http else _own(frames, "kopf_scheduler")
    if _has(frames, "k8s/event_recorder.py") or _has(frames, "k8s/events.py"):
        return "events (events.k8s.io)", "HTTP" if _has(frames, "aiohttp") else "recorder"
    if _has(frames, "process_resource_event"):
        if _has(frames, "kopf_scheduler/service.py") or _has(frames, "kopf_scheduler/scheduler.py"):
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
    if _has(frames, "prometheus_client") or _has(frames, "kopf_scheduler/metrics.py"):
        return "metrics", frames[-1]
    if _has(frames, "aiohttp") or _has(frames, "ssl.py"):
        return "other HTTP I/O (responses, socket writes)", frames[-1]
    if _has(frames, "asyncio/"):
        return "event loop (select, callbacks)", frames[-1]
    return "other", frames[-1]


def summarize(stacks: list[tuple[Stack, int]], rate: float, pods: int | None) -> str:
    total = sum(n for _, n in stacks)
    buckets: Counter[str] = Counter()
    parts: dict[str, Counter[str]] = defaultdict(Counter)
    for frames, n in stacks:
        name, part = bucket(frames)
        buckets[name] += n
        parts[name][part] += n
    per = f"; per pod: over {pods} measured pods" if pods else ""
    lines = [f"{total} samples ({total / rate:.1f} CPU s at {rate:g} Hz){per}"]

    def fmt(n: int) -> str:
        cost = f"  {1e6 * n / rate / pods:7.0f} us/pod" if pods else ""
        return f"{n:6d} {100 * n / total:5.1f}%{cost}"

    for name, n in buckets.most_common():
        lines.append(f"{fmt(n)}  {name}")
        for part, m in parts[name].most_common(5):
            lines.append(f"    {fmt(m)}  {part}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_summary", description=__doc__.splitlines()[0]
    )
    parser.add_argument("profile", type=Path, help="py-spy raw output (collapsed stacks)")
    parser.add_argument("--pods", type=int, default=None, help="measured pods, for CPU per pod")
    parser.add_argument("--rate", type=float, default=100.0, help="py-spy's sampling rate (bench uses 100)")
    args = parser.parse_args(argv)
    print(summarize(read(args.profile), args.rate, args.pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
