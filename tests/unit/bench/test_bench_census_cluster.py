"""``python -m bench census --cluster``: what it reads of kube-scheduler's heap profile and metrics, and
the bytes per node and per bound pod it derives from three points of one growing cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import census_cluster as cc
from bench.__main__ import parser

PROFILE = """heap profile: 1203: 9437184 [88231: 612368384] @ heap/1048576
1: 1048576 [1: 1048576] @ 0x4a5b 0x4a6c
#	0x4a5b	k8s.io/client-go/tools/cache.(*threadSafeMap).Add+0x5b

# runtime.MemStats
# Alloc = 48211336
# TotalAlloc = 912000000
# Sys = 120000000
# HeapAlloc = 48211336
# HeapSys = 90000000
# HeapInuse = 52000000
"""

METRICS = """# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 4.9012736e+07
go_memstats_heap_alloc_bytes_total{x="y"} 1
go_memstats_alloc_bytes 4.9012736e+07
"""


def test_the_live_heap_is_heap_alloc_of_the_profile_not_its_sampled_header() -> None:
    assert cc.heap_alloc(PROFILE) == 48211336
    with pytest.raises(ValueError, match="HeapAlloc"):
        cc.heap_alloc("heap profile: 1: 2 [3: 4] @ heap/1048576\n")


def test_a_metric_is_read_from_its_unlabelled_sample_only() -> None:
    assert cc.metric(METRICS, "go_memstats_heap_alloc_bytes") == 49012736.0
    assert cc.metric(METRICS, "process_resident_memory_bytes") is None


def test_nodes_are_added_first_then_pods_and_each_slope_divides_by_what_was_added() -> None:
    at = cc.points(3000, 30000)
    assert at == (cc.Point(1500, 15000), cc.Point(3000, 15000), cc.Point(3000, 30000))
    # 1,500 nodes add 15 MB, then 15,000 pods add 60 MB
    assert cc.slopes(at, (100e6, 115e6, 175e6)) == {"per_node": 10_000, "per_bound_pod": 4_000}
    with pytest.raises(ValueError, match="only nodes"):
        cc.slopes((cc.Point(1, 10), cc.Point(2, 20), cc.Point(2, 30)), (1.0, 2.0, 3.0))


def test_each_scheduler_and_method_gets_its_slopes() -> None:
    at = cc.points(20, 200)

    def record(heap: int, rss: int, scheduling: int, intake: int) -> dict[str, object]:
        return {
            cc.KUBE: {"heap_alloc_bytes": heap, "rss_bytes": rss},
            cc.KOPF: {"rss_bytes": {"scheduling": scheduling, "intake": intake, "both": scheduling + intake}},
        }

    measured = [
        record(1000, 5000, 9000, 4000),
        record(2000, 7000, 19000, 5000),
        record(3000, 17000, 39000, 6000),
    ]
    out = cc.per_object(at, measured)
    assert out[cc.KUBE] == {
        "go_heap": {"per_node": 100, "per_bound_pod": 10},
        "rss": {"per_node": 200, "per_bound_pod": 100},
    }
    assert out[cc.KOPF]["rss_both"] == {"per_node": 1100, "per_bound_pod": 210}
    assert "kube-scheduler, go_heap" in cc.summary({"slopes": out})


def test_the_newest_tracemalloc_census_is_copied_and_cluster_files_are_not_taken_for_it(
    tmp_path: Path,
) -> None:
    def census(name: str, node: int) -> None:
        results = {"intake": {"node": {"bytes_per_object": node}, "bound_pod": {"bytes_per_object": 900}}}
        (tmp_path / name).write_text(json.dumps({"sizes": {"nodes": [250, 500]}, "results": results}))

    census("census-20261101T000000Z.json", 1)
    census("census-20261102T000000Z.json", 2)
    (tmp_path / "census-cluster-20261103T000000Z.json").write_text(json.dumps({"points": []}))
    found = cc.latest_census(tmp_path)
    assert found is not None
    assert found["file"] == "census-20261102T000000Z.json"
    assert found["bytes_per_object"] == {"intake": {"node": 2, "bound_pod": 900}}
    assert cc.latest_census(tmp_path / "none") is None


def test_the_census_command_runs_on_a_cluster_with_cluster() -> None:
    args = parser().parse_args(["census", "--cluster", "--nodes", "3000", "--pods", "30000"])
    assert (args.cluster, args.nodes, args.pods) == (True, 3000, 30000)
    assert parser().parse_args(["census"]).cluster is False
