"""The side-by-side benchmark runs as users run it (``python -m bench run``), on its smallest useful
workload: SchedulingBasic at size small (500 nodes, 1,000 measured pods) for kube-scheduler,
kopf-scheduler and the raw binder, each on its own fresh API server. Asserts only that every pod got
bound and that the results file has the documented fields; speed is not judged here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = (
    "workload", "size", "scheduler", "nodes", "pods", "throughput_avg", "throughput_p50", "latency_p50_s",
    "latency_p99_s", "cpu_seconds", "peak_rss_bytes", "api_requests_per_pod",
)  # fmt: skip


def test_small_scheduling_basic_binds_every_pod_for_all_three(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "bench", "run", "--size", "small", "--workload", "SchedulingBasic",
        "--results-dir", str(tmp_path), "--no-report", "--quiet-wait", "0", "--timeout", "120",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1, output
    document = json.loads(files[0].read_text())
    assert {"commit", "machine", "versions", "runs"} <= set(document), document.keys()
    runs = document["runs"]
    assert sorted(r["scheduler"] for r in runs) == ["kopf-scheduler", "kube-scheduler", "raw-binder"], output
    for run in runs:
        assert run["complete"], f"{run['scheduler']}: {run['error']}\n{output}"
        assert run["bound"] == run["pods"] == 1000, run
        assert (run["workload"], run["size"], run["nodes"]) == ("SchedulingBasic", "small", 500)
        missing = [f for f in DOCUMENTED if f not in run]
        assert not missing, missing
        assert run["api_requests_per_pod"] >= 1.0, run  # at least the binding
        assert run["peak_rss_bytes"] > 0 and run["cpu_seconds"] > 0, run
    assert done.returncode == 0, output
