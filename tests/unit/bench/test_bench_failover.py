"""``python -m bench failover``: what it makes of the watch's and the Lease's times, its table in
RESULTS.md, and the same Lease timings for both schedulers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import failover, report, schedulers
from bench.__main__ import parser


def test_startup_counts_from_the_process_start_to_ready_first_and_last_binding() -> None:
    fields = failover.startup_fields(100.0, 108.5, [112.25, 110.0, 111.0])
    assert fields == {"startup_seconds": 8.5, "first_binding_seconds": 10.0, "pending_bound_seconds": 12.25}
    # never ready, nothing bound: no figure rather than a made-up one
    assert failover.startup_fields(100.0, None, []) == {
        "startup_seconds": None,
        "first_binding_seconds": None,
        "pending_bound_seconds": None,
    }


def test_failover_is_the_first_binding_after_the_standby_took_the_lease() -> None:
    kill, acquired = 50.0, 65.0
    first_seen = {"p0": 48.0, "p1": 49.9, "p2": 55.0, "p3": 60.0, "p4": 66.0}
    bound_at = {
        "p0": 48.2,
        "p1": 50.05,  # the dead leader's binding, in flight at the kill: not the standby's
        "p2": 65.4,  # the standby's first
        "p3": 65.6,
        "p4": 66.1,
    }
    fields = failover.failover_fields(first_seen, bound_at, kill, acquired)
    assert fields["lease_taken_seconds"] == 15.0
    assert fields["failover_seconds"] == pytest.approx(15.4)
    assert fields["bound_in_flight_after_kill"] == 1
    assert fields["pods_created_in_gap"] == 2  # p2, p3: created after the kill, before the takeover
    assert fields["latency_gap_max_s"] == pytest.approx(10.4)  # p2
    assert fields["latency_before_kill_p99_s"] == pytest.approx(0.2)  # p0, p1: 0.2 and 0.15
    assert fields["leader_latency_p99_s"] == pytest.approx(0.2)  # p0: p1 was seen bound after the kill
    assert fields["unbound_at_kill"] == 1  # p1
    assert fields["latency_after_takeover_p99_s"] == pytest.approx(0.1)
    assert fields["latency_max_s"] == pytest.approx(10.4)
    assert fields["backlog_cleared_seconds"] == pytest.approx(15.6)  # p3, the last created before it


def test_without_a_takeover_there_is_no_failover_figure() -> None:
    fields = failover.failover_fields({"p0": 1.0}, {"p0": 1.5, "p1": 3.0}, 2.0, None)
    assert fields["failover_seconds"] is None
    assert fields["lease_taken_seconds"] is None
    assert fields["bound_in_flight_after_kill"] == 1


def test_lease_micro_time_is_read_to_the_microsecond() -> None:
    assert failover.micro_time_epoch("1970-01-01T00:00:10.250001Z") == pytest.approx(10.250001)


def test_both_schedulers_get_kube_schedulers_default_lease_timings(tmp_path: Path) -> None:
    kube = failover.KubeReplica(None, tmp_path, "a")  # type: ignore[arg-type]
    kopf = failover.KopfReplica(None, tmp_path, "b")  # type: ignore[arg-type]
    election = kube.leader_election()
    assert (election["leaseDuration"], election["renewDeadline"], election["retryPeriod"]) == (
        "15s",
        "10s",
        "2s",
    )
    flags = dict(zip(kopf.leader_election[::2], kopf.leader_election[1::2], strict=True))
    assert flags["--leader-elect"] == "true"
    assert flags["--leader-elect-lease-duration"] == election["leaseDuration"]
    assert flags["--leader-elect-renew-deadline"] == election["renewDeadline"]
    assert flags["--leader-elect-retry-period"] == election["retryPeriod"]
    # two replicas of one scheduler log apart
    assert kopf.log_file != failover.KopfReplica(None, tmp_path, "a").log_file  # type: ignore[arg-type]
    # the `run` mode keeps leader election off
    assert schedulers.KopfScheduler(None, tmp_path).leader_election == ["--leader-elect", "false"]  # type: ignore[arg-type]


def test_the_subcommand_offers_only_the_sizes_of_memory_at_scale(capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(["failover", "--size", "full"])
    assert (args.size, args.scheduler, args.func) == ("full", None, failover.cmd_failover)
    with pytest.raises(SystemExit):
        parser().parse_args(["failover", "--size", "medium"])
    assert "invalid choice: 'medium'" in capsys.readouterr().err


def run(kind: str, size: str = "full", **extra: object) -> dict[str, object]:
    record: dict[str, object] = {
        "workload": "MemoryAtScale",
        "size": size,
        "mode": "failover",
        "scheduler": kind,
        "nodes": 5000,
        "init_pods": 50000,
        "pending_pods": 1000,
        "pods": 2000,
        "complete": True,
        "loadavg_before": [1.0],
        "startup_seconds": 3.1,
        "first_binding_seconds": 3.4,
        "pending_bound_seconds": 7.9,
        "standby_ready_seconds": 2.9,
        "lease_taken_seconds": 15.2,
        "failover_seconds": 15.3,
        "latency_max_s": 16.8,
    }
    record.update(extra)
    return record


def test_results_md_has_a_start_up_and_failover_table(tmp_path: Path) -> None:
    kube, kopf = schedulers.KUBE_SCHEDULER, schedulers.KOPF_SCHEDULER
    runs = [
        run(
            kopf,
            startup_seconds=9.75,
            first_binding_seconds=11.5,
            failover_seconds=16.25,
            probe_created_seconds=12.0,
            probe_bound_after_seconds=41.5,
        ),
        run(kube),
        run(kopf, size="small", nodes=500, init_pods=5000, complete=False, bound=700, error="timeout"),
    ]
    (tmp_path / "results").mkdir()
    doc = {"commit": "abc", "machine": {}, "versions": {}, "runs": runs}
    (tmp_path / "results" / "20261129T110000Z.json").write_text(json.dumps(doc))
    report.write(tmp_path / "results", tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Start-up and failover" in text
    table = [
        line for line in text.splitlines() if line.startswith("| small |") or line.startswith("| full |")
    ]
    assert table == [
        "| small | 500 | 5,000 | 1,000 | kopf-scheduler | 3.10 | 3.40 | 7.90 | - | 2.90 | 15.20 | 15.30 "
        "| 16.80 | INCOMPLETE (700/2000 bound) |",
        "| full | 5,000 | 50,000 | 1,000 | kube-scheduler | 3.10 | 3.40 | 7.90 | - | 2.90 | 15.20 | 15.30 "
        "| 16.80 | ok |",
        "| full | 5,000 | 50,000 | 1,000 | kopf-scheduler | 9.75 | 11.50 | 7.90 | 12.0: 41.50 | 2.90 | 15.20 "
        "| 16.25 "
        "| 16.80 | ok |",
    ]
    # failover runs are no throughput rows
    assert "## Throughput workloads" not in text


def test_repeats_show_the_median_of_the_complete_runs() -> None:
    kopf = schedulers.KOPF_SCHEDULER
    runs = [run(kopf, failover_seconds=s, first_binding_seconds=s / 2) for s in (15.0, 19.0, 16.0)]
    row = report.combine(runs, {"_file": "x.json"})
    assert (row["failover_seconds"], row["first_binding_seconds"]) == (16.0, 8.0)
    assert (
        report.failover_table({("failover", "MemoryAtScale", "full", kopf): row})[2].split(" | ")[11]
        == "16.00"
    )


def test_the_probe_pod_counts_its_creation_from_the_start_and_its_binding_from_its_creation() -> None:
    assert failover.probe_fields(100.0, 130.5, 131.25) == {
        "probe_created_seconds": 30.5,
        "probe_bound_after_seconds": 0.75,
    }
    assert failover.probe_fields(100.0, 130.5, None) == {
        "probe_created_seconds": 30.5,
        "probe_bound_after_seconds": None,
    }
