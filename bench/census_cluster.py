"""``python -m bench census --cluster``: the memory kube-scheduler and kopf-scheduler keep per node and per
bound pod, each started on the same dev cluster at three sizes.

One cluster grows through three points: A (half the nodes, half the pods), B (all the nodes, the same
pods), C (all the nodes, all the pods); the pods are ``MemoryAtScale``'s bound pods (``runner.populate``:
pod ``i`` bound to ``node-{i % nodes}`` at the time it is created). At each point each scheduler is started
anew, waited for until ready (its initial lists synced) and idle, measured and stopped. Bytes per node are
(B - A) / the nodes added; bytes per bound pod (C - B) / the pods added: one kind of object varied at a
time, so the two need no fit.

- kube-scheduler: its live Go heap, ``HeapAlloc`` as ``/debug/pprof/heap?gc=1&debug=1`` reports it
  (``net/http/pprof`` runs ``runtime.GC()`` first and the profile reads ``runtime.MemStats`` right after;
  profiling is on by default and the path is added to ``--authorization-always-allow-paths``), read twice
  and the second kept; ``go_memstats_heap_alloc_bytes`` of its /metrics just after, as a check; and its
  resident set (``VmRSS``) before the forced collection.
- kopf-scheduler: the resident set of each of its two processes (the scheduling process and its watch
  intake child). Python has no collection that hands memory back, so this is what the processes hold
  after the start-up's peak, not a live heap; the live bytes per object of each process are the
  tracemalloc census's (``python -m bench census``), whose newest results are copied into the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import procstats
from bench.runner import _encode, _post_all, populate, up, wait_idle
from bench.schedulers import KopfScheduler, http_get
from bench.workloads import INIT_NAMESPACE, WORKLOADS, Shape, init_pod_name, node_name
from kopf_scheduler.devcluster import ApiClient, DevCluster, create_nodes
from kopf_scheduler.devcluster.cluster import SCHEDULER, default_crds_dir

WORKLOAD = "MemoryAtScale"
HEAP_PATH = "/debug/pprof/heap?gc=1&debug=1"
#: only the heap profile, beside the probes and /metrics the dev cluster already allows (appended)
ALLOW_HEAP = "--authorization-always-allow-paths=/debug/pprof/heap"
KUBE = "kube-scheduler"
KOPF = "kopf-scheduler"


@dataclass(frozen=True)
class Point:
    nodes: int
    pods: int


def points(nodes: int, pods: int) -> tuple[Point, Point, Point]:
    """A (half, half), B (all nodes, half the pods), C (all, all)."""
    return Point(nodes // 2, pods // 2), Point(nodes, pods // 2), Point(nodes, pods)


def slopes(at: tuple[Point, Point, Point], values: tuple[float, float, float]) -> dict[str, int]:
    """Bytes per node (A to B: only nodes added) and per bound pod (B to C: only pods added)."""
    a, b, c = at
    if b.nodes == a.nodes or c.pods == b.pods or b.pods != a.pods or c.nodes != b.nodes:
        raise ValueError(f"points must add only nodes, then only pods: {at}")
    return {
        "per_node": round((values[1] - values[0]) / (b.nodes - a.nodes)),
        "per_bound_pod": round((values[2] - values[1]) / (c.pods - b.pods)),
    }


_HEAP_ALLOC = re.compile(r"^# HeapAlloc = (\d+)$", re.MULTILINE)


def heap_alloc(profile: str) -> int:
    """``HeapAlloc`` of a heap profile in text form (``debug=1``): the bytes of live heap objects."""
    found = _HEAP_ALLOC.search(profile)
    if found is None:
        raise ValueError("no '# HeapAlloc' line in the heap profile")
    return int(found.group(1))


def metric(text: str, name: str) -> float | None:
    """The value of an unlabelled sample ``name`` in Prometheus text, or None."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == name:
            return float(parts[1])
    return None


# -- the cluster ------------------------------------------------------------------------------------------
async def add_bound_pods(api: ApiClient, first: int, count: int, nodes: int, scheduler_name: str) -> None:
    """Initial pods ``first..first+count`` as ``runner.populate`` makes them, bound to ``i % nodes``."""
    workload = WORKLOADS[WORKLOAD]
    bodies = []
    for i in range(first, first + count):
        pod = workload.init_pod(init_pod_name(i), INIT_NAMESPACE, scheduler_name)
        pod["spec"]["nodeName"] = node_name(i % nodes)
        bodies.append(_encode(pod))
    await _post_all(api, f"/api/v1/namespaces/{INIT_NAMESPACE}/pods", bodies, 64)


def measure_kube(cluster: DevCluster, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    cluster.start_kube_scheduler(extra_args=[ALLOW_HEAP], timeout=timeout)  # /readyz: informers synced
    try:
        component = cluster.components[SCHEDULER]
        ready = time.monotonic() - started
        settle = wait_idle(component.pid, component.alive)
        rss = procstats.rss_bytes(component.pid, tree=False)
        url = cluster.urls[SCHEDULER]
        heap = [heap_alloc(http_get(url + HEAP_PATH, timeout=60.0)) for _ in range(2)]
        checked = metric(http_get(url + "/metrics", timeout=60.0), "go_memstats_heap_alloc_bytes")
    finally:
        cluster.stop_kube_scheduler()
    return {
        "ready_seconds": round(ready, 1),
        "settle_seconds": round(settle, 1),
        "heap_alloc_bytes": heap[-1],
        "heap_alloc_first_bytes": heap[0],
        "metrics_heap_alloc_bytes": None if checked is None else int(checked),
        "rss_bytes": rss,
    }


def measure_kopf(cluster: DevCluster, workdir: Path, timeout: float) -> dict[str, Any]:
    sched = KopfScheduler(cluster, workdir)
    started = time.monotonic()
    try:
        sched.start(timeout=timeout)  # ready: the initial lists synced
        ready = time.monotonic() - started
        settle = wait_idle(sched.pid, sched.alive)  # both processes: the intake's listing taken in too
        children = procstats.children_of(sched.pid)
        scheduling = procstats.rss_bytes(sched.pid, tree=False)
        intake = sum(procstats.rss_bytes(pid) for pid in children)
    finally:
        sched.stop()
    return {
        "ready_seconds": round(ready, 1),
        "settle_seconds": round(settle, 1),
        "intake_processes": len(children),
        "rss_bytes": {"scheduling": scheduling, "intake": intake, "both": scheduling + intake},
    }


def run(nodes: int, pods: int, log: Any = print) -> dict[str, Any]:
    """Grows one cluster through the three points; each scheduler measured at each."""
    at = points(nodes, pods)
    workload = WORKLOADS[WORKLOAD]
    workdir = Path(tempfile.mkdtemp(prefix="kopf-scheduler-census-"))
    cluster = DevCluster(workdir / "cluster", crds_dir=default_crds_dir(), die_with_parent=True)
    measured: list[dict[str, Any]] = []
    try:
        up(cluster)
        api = cluster.client()
        for index, point in enumerate(at):
            started = time.monotonic()
            if index == 0:
                asyncio.run(populate(api, workload, Shape(point.nodes, point.pods, 0, ""), KOPF))
            else:
                before = at[index - 1]
                if point.nodes > before.nodes:
                    asyncio.run(
                        create_nodes(
                            api, point.nodes - before.nodes, start=before.nodes, zones=workload.zones
                        )
                    )
                if point.pods > before.pods:
                    asyncio.run(add_bound_pods(api, before.pods, point.pods - before.pods, point.nodes, KOPF))
            grown = time.monotonic() - started
            timeout = max(180.0, (point.nodes + point.pods) / 250)
            record: dict[str, Any] = {
                "nodes": point.nodes,
                "pods": point.pods,
                "setup_seconds": round(grown, 1),
            }
            log(f"census: {point.nodes} nodes, {point.pods} bound pods: kube-scheduler ...")
            record[KUBE] = measure_kube(cluster, timeout)
            log(f"census: {point.nodes} nodes, {point.pods} bound pods: kopf-scheduler ...")
            record[KOPF] = measure_kopf(cluster, workdir, timeout)
            measured.append(record)
    finally:
        cluster.down()
        shutil.rmtree(workdir, ignore_errors=True)
    return {"points": measured, "slopes": per_object(at, measured)}


def per_object(at: tuple[Point, Point, Point], measured: list[dict[str, Any]]) -> dict[str, Any]:
    def of(scheduler: str, *keys: str) -> dict[str, int]:
        values = []
        for record in measured:
            value: Any = record[scheduler]
            for key in keys:
                value = value[key]
            values.append(float(value))
        return slopes(at, (values[0], values[1], values[2]))

    return {
        KUBE: {"go_heap": of(KUBE, "heap_alloc_bytes"), "rss": of(KUBE, "rss_bytes")},
        KOPF: {
            "rss_scheduling": of(KOPF, "rss_bytes", "scheduling"),
            "rss_intake": of(KOPF, "rss_bytes", "intake"),
            "rss_both": of(KOPF, "rss_bytes", "both"),
        },
    }


def latest_census(results_dir: Path) -> dict[str, Any] | None:
    """Bytes per node and bound pod of each layer in the newest tracemalloc census (its file named)."""
    for path in sorted(results_dir.glob("census-2*.json"), reverse=True):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("results"), dict):
            return {
                "file": path.name,
                "sizes": doc.get("sizes"),
                "bytes_per_object": {
                    layer: {what: g["bytes_per_object"] for what, g in per.items()}
                    for layer, per in doc["results"].items()
                },
            }
    return None


def summary(result: dict[str, Any]) -> str:
    lines = [f"{'scheduler, method':34} {'bytes/node':>11} {'bytes/bound pod':>16}"]
    for scheduler, methods in result["slopes"].items():
        for method, s in methods.items():
            lines.append(f"{scheduler + ', ' + method:34} {s['per_node']:>11,} {s['per_bound_pod']:>16,}")
    return "\n".join(lines)


def cmd_census_cluster(args: argparse.Namespace) -> int:
    from bench.__main__ import new_document

    document = new_document()
    del document["runs"]  # not a run of ``bench run``: RESULTS.md leaves the file out
    document["workload"] = WORKLOAD
    document["method"] = __doc__
    result = run(args.nodes, args.pods)
    document.update(result)
    out_dir = Path(args.results_dir)
    document["tracemalloc_census"] = latest_census(out_dir)
    document["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"census-cluster-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(summary(result))
    print(f"census: wrote {out}")
    return 0
