"""``python -m bench``: run the side-by-side benchmark, or regenerate its report.

    python -m bench run --size small                          # every workload, all three schedulers
    python -m bench run --size full --workload SchedulingBasic --repeat 3
    python -m bench run --size full --latency-rate 100 --latency-only
    python -m bench failover --size full                      # start-up and failover, two replicas each
    python -m bench soak --minutes 10                         # memory under churn, gangs, token rotation
    python -m bench report                                    # RESULTS.md and the chart from results/*.json
    python -m bench census --nodes 1000 --pods 10000          # memory per node and pod, no cluster

Results: ``bench/results/<UTC time>.json`` (rewritten after every run, so an interrupted benchmark keeps
what it measured) and ``bench/RESULTS.md``. The order of the schedulers rotates from one workload (and
repeat) to the next, so none of them always runs on the warmest machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import census, failover, report, schedulers, soak
from bench.runner import RunOptions, run_one
from bench.workloads import LATENCY_WORKLOAD, SIZES, WORKLOADS

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_TIMEOUT = {"small": 300.0, "medium": 600.0, "full": 1800.0, "scale": 3600.0}


def _command(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return ""


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        memory = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        memory = 0
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "memory_bytes": memory,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from kopf_scheduler.devcluster import find_bin_dir

    out: dict[str, str] = {}
    for package in ("kopf-scheduler", "kopf", "aiohttp", "numpy"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = ""
    try:
        bin_dir = find_bin_dir()
    except Exception:
        return out
    out["kube-scheduler"] = _command([str(bin_dir / "kube-scheduler"), "--version"])
    out["kube-apiserver"] = _command([str(bin_dir / "kube-apiserver"), "--version"])
    out["etcd"] = _command([str(bin_dir / "etcd"), "--version"])
    return out


def commit() -> str:
    """HEAD, with ``-dirty`` when the work tree has changes (read-only git calls)."""
    head = _command(["git", "-C", str(BENCH_DIR.parent), "rev-parse", "HEAD"])
    status = subprocess.run(
        ["git", "-C", str(BENCH_DIR.parent), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=False,
    )
    return head + ("-dirty" if status.stdout.strip() else "") if head else ""


def plan(args: argparse.Namespace) -> list[tuple[str, str, bool]]:
    """(workload, scheduler, latency mode) in run order: the scheduler order rotates per workload."""
    order = list(args.scheduler or schedulers.ALL)
    runs: list[tuple[str, str, bool]] = []
    slot = 0
    for _ in range(args.repeat):
        batches: list[tuple[str, bool]] = []
        if not args.latency_only:
            # unless named, only the workloads that have this size
            named = args.workload or [w for w in WORKLOADS if args.size in WORKLOADS[w].sizes]
            batches += [(w, False) for w in named]
        if args.latency_rate:
            batches.append((LATENCY_WORKLOAD, True))
        for workload, latency in batches:
            shift = slot % len(order)
            runs += [
                (workload, kind, latency)
                for kind in order[shift:] + order[:shift]
                # unless asked for by name, the raw binder skips workloads that binding alone leaves undone
                if kind != schedulers.RAW_BINDER or args.scheduler or WORKLOADS[workload].raw_binder
                # a workload only some schedulers can do at all (gangs: kopf-scheduler only)
                if not WORKLOADS[workload].schedulers or kind in WORKLOADS[workload].schedulers
            ]
            slot += 1
    return runs


def new_document() -> dict[str, Any]:
    """A results file's head: the commit, machine and versions measured, and no run yet."""
    return {
        "commit": commit(),
        "machine": machine_info(),
        "versions": versions(),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "argv": sys.argv[1:],
        "runs": [],
    }


def new_results(results_dir: Path | str) -> tuple[Path, str, Path, dict[str, Any]]:
    """A new results file of ``run``, ``failover`` or ``soak``: the folder (made if missing), the stamp
    that names the file and its logs, the file, and its head (``new_document``)."""
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return folder, stamp, folder / f"{stamp}.json", new_document()


def cmd_run(args: argparse.Namespace) -> int:
    results_dir, stamp, out_file, document = new_results(args.results_dir)
    runs = plan(args)
    print(f"bench: {len(runs)} runs at size {args.size}; results in {out_file}", flush=True)
    failed = 0
    for i, (name, kind, latency) in enumerate(runs, 1):
        opts = RunOptions(
            size=args.size,
            timeout=args.timeout or DEFAULT_TIMEOUT[args.size],
            results_dir=results_dir,
            stamp=stamp,
            create_concurrency=args.create_concurrency,
            rate=args.latency_rate if latency else None,
            rate_seconds=args.latency_seconds,
            profile=args.profile,
            profile_format=args.profile_format,
            quiet_wait=args.quiet_wait,
            controller_manager=args.with_controller_manager,
        )
        what = f"{name} ({args.size}{f', {args.latency_rate:g} pods/s' if latency else ''}) {kind}"
        print(f"[{i}/{len(runs)}] {what} ...", flush=True)
        started = time.monotonic()
        record = run_one(WORKLOADS[name], kind, opts)
        document["runs"].append(record)
        document["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        out_file.write_text(json.dumps(document, indent=1) + "\n")
        took = time.monotonic() - started
        if record["complete"]:
            print(
                f"    {record['bound']}/{record['pods']} bound; throughput avg {record['throughput_avg']} "
                f"p50 {record['throughput_p50']} pods/s; latency p50 {record['latency_p50_s']} s "
                f"p99 {record['latency_p99_s']} s; cpu {record['cpu_seconds']} s; peak RSS "
                f"{record['peak_rss_bytes'] / 2**20:.0f} MiB; {record['api_requests_per_pod']} req/pod "
                f"({took:.0f} s)",
                flush=True,
            )
        else:
            failed += 1
            print(f"    FAILED: {record['error']}", flush=True)
    if not args.no_report:
        report.write(results_dir, BENCH_DIR / "RESULTS.md")
        print(f"bench: wrote {BENCH_DIR / 'RESULTS.md'}", flush=True)
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    report.write(Path(args.results_dir), BENCH_DIR / "RESULTS.md")
    print(f"bench: wrote {BENCH_DIR / 'RESULTS.md'}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run workloads against the schedulers")
    run.add_argument("--size", choices=SIZES, default="small")
    run.add_argument(
        "--workload", action="append", choices=sorted(WORKLOADS), help="repeatable; default: all"
    )
    run.add_argument(
        "--scheduler", action="append", choices=schedulers.ALL, help="repeatable; default: all three"
    )
    run.add_argument("--repeat", type=int, default=1, help="runs of each (workload, scheduler)")
    run.add_argument(
        "--latency-rate",
        type=float,
        default=None,
        metavar="PODS_PER_S",
        help=f"also run {LATENCY_WORKLOAD} with pods created at this rate, for latency",
    )
    run.add_argument(
        "--latency-seconds", type=float, default=30.0, help="how long the latency mode creates pods"
    )
    run.add_argument("--latency-only", action="store_true", help="only the --latency-rate runs")
    run.add_argument(
        "--timeout", type=float, default=None, help="seconds for a measured phase (small 300, full 1800)"
    )
    run.add_argument("--create-concurrency", type=int, default=64, help="pod creations in flight")
    run.add_argument(
        "--profile", action="store_true", help="profile kopf-scheduler during its measured phase"
    )
    run.add_argument(
        "--profile-format",
        choices=("flamegraph", "raw", "speedscope", "cpu"),
        default="flamegraph",
        help="py-spy's (time of running or runnable threads), or cpu: CPU time (bench/cpu_sampler.py)",
    )
    run.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="before each run, wait up to this many seconds for other programs to leave the CPUs idle",
    )
    run.add_argument(
        "--with-controller-manager",
        action="store_true",
        help="also run kube-controller-manager on each run's cluster (runs left out of RESULTS.md)",
    )
    run.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    run.add_argument("--no-report", action="store_true", help="do not regenerate bench/RESULTS.md")
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="regenerate bench/RESULTS.md and the chart from the results")
    rep.add_argument("--results-dir", default=str(BENCH_DIR / "results"))
    rep.set_defaults(func=cmd_report)
    census.register(sub, BENCH_DIR / "results")
    failover.register(sub, BENCH_DIR / "results")
    soak.register(sub, BENCH_DIR / "results")
    return p


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "run" and args.latency_only and not args.latency_rate:
        parser().error("--latency-only needs --latency-rate")
    if args.command == "run":
        missing = [w for w in args.workload or () if args.size not in WORKLOADS[w].sizes]
        if missing:
            parser().error(f"--size {args.size}: {', '.join(missing)} has no such size")
    # SIGTERM unwinds like Ctrl-C: every run's finally stops its scheduler and cluster
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("bench: interrupted; every process it started has been stopped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
