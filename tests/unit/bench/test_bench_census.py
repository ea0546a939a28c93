"""``python -m bench census``: the objects it feeds read as the scheduler reads the benchmark's, and each
layer's growth is counted per object added, with what the scheduling process keeps of a pod (its API
object and its PodInfo) among the files that allocated it."""

from __future__ import annotations

import asyncio

from bench import census

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


def test_the_objects_are_the_benchmarks_bound_pods_and_nodes() -> None:
    pod = PodInfo(census.served_pod(7, 3, census.BENCH_SCHEDULER))
    assert (pod.node_name, pod.requests["cpu"], pod.scheduler_name) == ("node-1", 100, "kopf-scheduler")
    assert census.served_pod(7, 3, "x")["metadata"]["uid"] == pod.uid  # a re-list's copy is the same pod
    assert NodeInfo(census.served_node(2)).name == "node-2"


def test_the_scheduling_process_keeps_a_pod_and_a_node_through_the_watch() -> None:
    results = asyncio.run(census.scheduling_census(census.Sizes.of(8, 80), initial_list=False))
    pod, node = results["bound_pod"], results["node"]
    assert (pod.count, node.count) == (40, 4)
    assert 1_000 < pod.total < 50_000 and 1_000 < node.total < 50_000
    assert any(name.endswith("pod_info.py") for name in pod.by_file)
