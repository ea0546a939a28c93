"""The side-by-side benchmark runs as users run it (``python -m bench run``), on its smallest useful
workload: SchedulingBasic at size small (500 nodes, 1,000 measured pods) for kube-scheduler,
kopf-scheduler and the raw binder, each on its own fresh API server. Asserts only that every pod got
bound and that the results file has the documented fields; speed is not judged here. The volume and DRA
workloads run at upstream's integration-test sizes (a few nodes, 10 pods) for the two schedulers."""

from __future__ import annotations

import dataclasses
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


#: the volume, DRA and churn workloads at about upstream's integration-test sizes ("5Nodes", DRA "fast",
#: "10Nodes"), as nodes, initial pods, measured pods (and creation rate, lifetime): their setup objects,
#: kube-controller-manager, the provisioner, the churn and the after-run check, end to end, in about 20 s
#: a run
TINY = {
    "SchedulingCSIPVs": (5, 5, 10),
    "SchedulingWithResourceClaimTemplate": (2, 4, 10),
    "ExtendedResource": (2, 4, 10),
    "SchedulingWaitForFirstConsumer": (5, 5, 10),
    "SchedulingRequiredPodAntiAffinityWithNSSelector": (10, 4, 6),
    "Unschedulable": (5, 1, 10),
    "SchedulingWithMixedChurn": (10, 0, 40, 10.0, 1.0),
}


@pytest.mark.parametrize("scheduler", ["kube-scheduler", "kopf-scheduler"])
@pytest.mark.parametrize("name", sorted(TINY))
def test_tiny_workloads_complete_and_pass_their_check(name: str, scheduler: str, tmp_path: Path) -> None:
    # `python -m pytest` from the repository root (as `make e2e`) has `bench` on sys.path
    from bench.runner import RunOptions, run_one
    from bench.workloads import WORKLOADS, Shape

    nodes, init, measured, *paced = TINY[name]
    rate, lifetime = paced or (None, None)
    shape = Shape(nodes, init, measured, upstream="tiny", rate=rate, lifetime=lifetime)
    shape = dataclasses.replace(shape, init_namespaces=min(2, WORKLOADS[name].shape("small").init_namespaces))
    workload = dataclasses.replace(WORKLOADS[name], sizes={"small": shape})
    opts = RunOptions(size="small", timeout=120, results_dir=tmp_path, stamp="smoke", quiet_wait=0)
    record = run_one(workload, scheduler, opts)
    assert record["complete"], record["error"]
    assert record["bound"] == record["pods"] == measured, record
    assert record.get("check_problems", 0) == 0, record
    if workload.controllers:
        assert record["controller_manager_cpu_seconds"], record
    if name == "Unschedulable":  # the churn made pods no node holds, and they stayed pending
        assert record["churn_created"] >= 1 and record["churn_deleted"] == 0, record
    if name == "SchedulingWithMixedChurn":  # nodes, pods and Services made and deleted in turn
        assert record["churn_created"] >= 3 and record["churn_deleted"] >= 3, record
        # every measured pod deleted once its second of life was over, except the last bound
        assert record["expired"] >= measured - rate * lifetime - 5, record
    assert record["rss_progress"], record


def test_cpu_profile_covers_both_processes_of_kopf_scheduler(tmp_path: Path) -> None:
    """``--profile --profile-format cpu``: both processes sample their CPU through the start-up hook, and
    the merged profile adds up to what the benchmark measured for the run."""
    from bench.profile_summary import read, summarize
    from bench.runner import RunOptions, run_one
    from bench.workloads import WORKLOADS, Shape

    shape = Shape(100, 0, 300, upstream="tiny", rate=150.0)
    workload = dataclasses.replace(WORKLOADS["SchedulingBasic"], sizes={"small": shape})
    opts = RunOptions(
        size="small", timeout=120, results_dir=tmp_path, stamp="smoke", quiet_wait=0,
        profile=True, profile_format="cpu",
    )  # fmt: skip
    record = run_one(workload, "kopf-scheduler", opts)
    assert record["complete"], record["error"]
    profile = read(Path(record["profile"]))
    assert profile.cpu
    processes = {frames[0] for frames, _ in profile.stacks}
    assert len(processes) == 2, processes
    assert any("kopf-scheduler run" in p for p in processes), processes
    assert any("kopf_scheduler.handlers.intake" in p for p in processes), processes
    total = sum(n for _, n in profile.stacks) / 1e6
    # sampled from just before the first pod to just after the last: the measured phase, give or take
    # the sampler's polls at each end
    assert abs(total - record["cpu_seconds"]) <= 0.3 * record["cpu_seconds"] + 0.3, (total, record)
    text = summarize(profile, pods=300)
    assert "scheduling process" in text and "watch intake process" in text, text
    assert "scheduling cycle" in text and "Kopf per-event processing" in text, text
    assert sorted(p.name for p in tmp_path.glob("profile-*")) == [Path(record["profile"]).name]


def test_cluster_census_reads_kube_schedulers_live_heap_and_both_schedulers_rss() -> None:
    """``census --cluster`` at a tiny size: kube-scheduler's heap profile is served to the benchmark (the
    path allowed, profiling on) and agrees with its /metrics; kopf-scheduler's two processes are found."""
    from bench import census_cluster

    result = census_cluster.run(40, 400, log=lambda line: None)
    points = result["points"]
    assert [(p["nodes"], p["pods"]) for p in points] == [(20, 200), (40, 200), (40, 400)]
    for point in points:
        kube, kopf = point["kube-scheduler"], point["kopf-scheduler"]
        heap = kube["heap_alloc_bytes"]
        assert 1 << 20 < heap < kube["rss_bytes"], kube
        # read just after the forced collection: allocations since then are few
        assert abs(kube["metrics_heap_alloc_bytes"] - heap) < heap / 2, kube
        assert kopf["intake_processes"] == 1, kopf
        assert kopf["rss_bytes"]["scheduling"] > 20 << 20 and kopf["rss_bytes"]["intake"] > 20 << 20, kopf
    assert set(result["slopes"]) == {"kube-scheduler", "kopf-scheduler"}
