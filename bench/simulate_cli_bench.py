"""`kopf-scheduler simulate` end to end, as a user runs it: one file in, the placements out.

Writes a scheduler_perf-shaped cluster (SchedulingBasic: 4-CPU nodes, 1,000 bound pods, N pending pods of
100m CPU) as one JSON ``kind: List`` (and the same objects as multi-document YAML), then times the command
``kopf-scheduler simulate --cluster FILE --output json`` in a fresh process for a small and a large
number of pending pods. The marginal rate, (large - small) / (time(large) - time(small)), is the cost of
one more pending pod including reading it, with the start-up cost (interpreter, imports, nodes) taken out;
each round runs the small file and then the large one, and the rate comes from the median of the rounds'
differences.

    .venv/bin/python bench/simulate_cli_bench.py                       # 5,000 nodes; 500 and 5,000 pods
    .venv/bin/python bench/simulate_cli_bench.py --format yaml --profile profiles/fast-and-simple.yaml
    PYTHONPATH=/tmp/old/operator .venv/bin/python bench/simulate_cli_bench.py --label old  # other code

Each size's timing is the median of its ``--repeat`` runs; results go to
``bench/results/simulate-cli/simulate-cli-<time>-<format>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: the repository root, for ``bench.simulate_bench``
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench.simulate_bench import build

RESULTS = Path(__file__).resolve().parent / "results" / "simulate-cli"


def write_cluster(
    path: Path, fmt: str, nodes: int, pods: int, init_pods: int, scheduler_name: str | None
) -> None:
    cluster = build("SchedulingBasic", nodes, pods, init_pods)
    if scheduler_name is not None:  # the pending pods ask for the profile's scheduler
        for pod in cluster.pending_pods:
            pod["spec"]["schedulerName"] = scheduler_name
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sched-perf"}},
        *({"apiVersion": "v1", "kind": "Node", **n} for n in cluster.nodes),
        *({"apiVersion": "v1", "kind": "Pod", **p} for p in cluster.bound_pods),
        *({"apiVersion": "v1", "kind": "Pod", **p} for p in cluster.pending_pods),
    ]
    with path.open("w") as f:
        if fmt == "json":
            json.dump({"apiVersion": "v1", "kind": "List", "items": objects}, f)
        else:
            yaml.safe_dump_all(objects, f, sort_keys=False)


#: as installed packages run: with their byte code cached (the first, untimed, run writes it)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(path: Path, profile: Path | None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and the number of pods placed, of one ``simulate`` process."""
    command = [sys.executable, "-m", "kopf_scheduler", "simulate", "--cluster", str(path), "-o", "json"]
    if profile is not None:
        command += ["--profile", str(profile)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=_ENV)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"simulate failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    summary = json.loads(done.stdout)["summary"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(summary["scheduled"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--init-pods", type=int, default=1000)
    parser.add_argument("--small", type=int, default=500, help="pending pods of the small run")
    parser.add_argument("--large", type=int, default=5000, help="pending pods of the large run")
    parser.add_argument("--format", choices=("json", "yaml"), default="json")
    parser.add_argument("--profile", type=Path, default=None, help="SchedulingProfile file for simulate")
    parser.add_argument("--repeat", type=int, default=5, help="rounds, each a small and a large run")
    parser.add_argument("--label", default="", help="what the code under test is (recorded with the result)")
    parser.add_argument("--no-save", action="store_true", help="print the result only")
    args = parser.parse_args()
    scheduler_name = None
    if args.profile is not None:
        with args.profile.open() as f:
            scheduler_name = yaml.safe_load(f)["spec"]["schedulerName"]
    with tempfile.TemporaryDirectory() as tmp:
        paths: dict[int, Path] = {}
        for pods in (args.small, args.large):
            paths[pods] = Path(tmp) / f"cluster-{pods}.{args.format}"
            write_cluster(paths[pods], args.format, args.nodes, pods, args.init_pods, scheduler_name)
            run_once(paths[pods], args.profile)  # warm-up: byte code and the file in the page cache
        # small and large alternate, so a change in the machine's speed during the measurement falls on
        # both sides of each round's difference rather than on one size
        timings: dict[int, list[tuple[float, float, int]]] = {args.small: [], args.large: []}
        for _ in range(args.repeat):
            for pods in (args.small, args.large):
                timings[pods].append(run_once(paths[pods], args.profile))
        runs = {
            pods: {
                "pending_pods": pods,
                "file_mib": round(paths[pods].stat().st_size / 2**20, 1),
                "wall_seconds": round(statistics.median(t[0] for t in done), 3),
                "cpu_seconds": round(statistics.median(t[1] for t in done), 3),
                "runs_wall_seconds": [round(t[0], 3) for t in done],
                "scheduled": sorted({t[2] for t in done}),
            }
            for pods, done in timings.items()
        }
    small, large = runs[args.small], runs[args.large]
    # one more pending pod's cost, from each round's difference: the median difference gives the rate
    differences = [
        big[0] - little[0] for little, big in zip(timings[args.small], timings[args.large], strict=True)
    ]
    marginal = (args.large - args.small) / statistics.median(differences)
    result = {
        "benchmark": "simulate-cli",
        "label": args.label,
        "time": datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ"),
        "nodes": args.nodes,
        "init_pods": args.init_pods,
        "format": args.format,
        "profile": str(args.profile) if args.profile else "default",
        "cpus": os.cpu_count(),
        "runs": [small, large],
        "marginal_pods_per_second": round(marginal, 1),
        "round_differences_seconds": [round(d, 3) for d in differences],
    }
    print(json.dumps(result, indent=2))
    if not args.no_save:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"simulate-cli-{result['time']}-{args.format}.json").write_text(
            json.dumps(result, indent=2) + "\n"
        )
    return 0 if all(r["scheduled"] == [r["pending_pods"]] for r in (small, large)) else 1


if __name__ == "__main__":
    sys.exit(main())
