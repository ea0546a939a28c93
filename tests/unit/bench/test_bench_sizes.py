"""The bench's sizes: which workloads a size runs, and the cost curve drawn from them."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import report, schedulers
from bench.__main__ import parser, plan
from bench.workloads import SIZES, WORKLOADS


def planned(*argv: str) -> set[str]:
    return {name for name, _, _ in plan(parser().parse_args(["run", *argv]))}


def test_a_size_runs_only_the_workloads_that_have_it() -> None:
    assert planned("--size", "scale") == {
        "SchedulingBasic",
        "TopologySpreading",
        "MixedSchedulingBasePod",
        "MemoryAtScale",
        "SchedulingWithMixedChurn",
    }
    assert planned("--size", "medium") == {"SchedulingBasic"}
    assert planned("--size", "full") == {n for n, w in WORKLOADS.items() if "full" in w.sizes}
    assert all(WORKLOADS[n].shape("scale").nodes == 15000 for n in planned("--size", "scale"))


def test_naming_a_workload_without_the_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main

    with pytest.raises(SystemExit):
        main(["run", "--size", "scale", "--workload", "PreemptionBasic"])
    assert "--size scale: PreemptionBasic has no such size" in capsys.readouterr().err


def row(nodes: int, cpu_ms: float, p99: float) -> dict[str, object]:
    return {"complete": True, "nodes": nodes, "cpu_ms_per_pod": cpu_ms, "latency_p99_s": p99}


KOPF, KUBE = schedulers.KOPF_SCHEDULER, schedulers.KUBE_SCHEDULER


def curve_rows() -> dict[tuple[str, str, str, str], dict[str, object]]:
    kopf, kube = KOPF, KUBE
    return {
        ("throughput", "SchedulingBasic", "scale", kopf): row(15000, 2.9, 4.0),
        ("throughput", "SchedulingBasic", "medium", kopf): row(1000, 2.1, 0.9),
        ("throughput", "SchedulingBasic", "full", kube): row(5000, 3.1, 4.3),
        ("throughput", "SchedulingBasic", "small", kube): row(500, 1.3, 0.8),
        # incomplete runs are left out
        ("throughput", "SchedulingBasic", "full", kopf): {**row(5000, 9, 9), "complete": False},
    }


def test_the_cost_curve_has_one_point_per_measured_size_in_node_order() -> None:
    rows = curve_rows()
    assert report.curve_points(rows, KOPF) == [(1000, 2.1, 0.9), (15000, 2.9, 4.0)]
    assert report.curve_points(rows, KUBE) == [(500, 1.3, 0.8), (5000, 3.1, 4.3)]


def test_the_cost_curve_is_drawn_once_both_schedulers_have_two_points(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="the bench extra draws the report's pictures")
    rows = curve_rows()
    assert report.cost_curve(rows, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    # one scheduler's single point is no curve
    del rows[("throughput", "SchedulingBasic", "small", KUBE)]
    assert not report.cost_curve(rows, tmp_path / "none.png")


def test_sizes_are_ordered_by_nodes() -> None:
    basic = WORKLOADS["SchedulingBasic"]
    assert [basic.shape(s).nodes for s in SIZES] == [500, 1000, 5000, 15000]
