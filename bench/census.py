"""``python -m bench census``: the memory each of kopf-scheduler's two processes keeps per bound pod, per
node and per pending pod, measured in this process with ``tracemalloc`` and no cluster.

Objects shaped like the benchmark's (``workloads.default_pod`` bound to ``node-{i % nodes}``, as
``runner.populate`` creates them; ``devcluster.nodes.node_body``), with the fields kube-apiserver adds
(uid, resourceVersion, creationTimestamp, managedFields, the defaulted spec), go through the code each
process keeps them with:

- **intake** (the watch intake process): Kopf's ``process_resource_event`` with the intake's settings
  (``handlers.lifecycle.configure``: no diff base, no progress storage, no per-object memories) and its
  ``on.event`` handlers (``handlers.intake._forwarder``, writing frames to a pipe nobody reads), for
  objects that arrive as watch events (those listed at the start never pass through the intake: its
  watches go on from the scheduling process's lists). Kopf's watch and its per-object workers are not
  driven: a worker ends 0.5 s after its object's last event.
- **start-up** (the scheduling process as the benchmark starts it): the initial lists, decoded a page of
  ``service.START_PAGE`` objects at a time as the service lists them, into
  ``Scheduler.add_node``/``add_pod``, the snapshot refreshed.
- **watched** (objects that arrive while it runs): only the frames, through ``IntakeLink`` and the service.
- **pending**: unbound pods of a served scheduler name through the frames into the queue.

Each layer is measured at two sizes and the difference divided by the objects added, so what is paid
once (modules, profiles, the first table rows) drops out. Bytes are grouped by the first frame outside
the standard library that allocated them (``pod_info.py``: the PodInfo and its parsed fields;
``intake_link.py``: the objects ``pickle.loads`` rebuilt from the frames; ``census.py``: the objects as
``json.loads`` decoded the list pages, the API object the cache keeps).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import sys
import sysconfig
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.workloads import INIT_NAMESPACE, default_pod, init_pod_name, node_name

#: the pods per node of ``MemoryAtScale`` (5,000 nodes, 50,000 bound pods)
PODS_PER_NODE = 10
#: frames written to the pipe before the reading end drains it (under the pipe's 64 KiB)
FRAMES_PER_WRITE = 8
#: allocation sites reported per layer and object
TOP_SITES = 8
#: frames kept per allocation (enough to get past the standard library to the code that asked)
FRAMES = 16
CREATED = "2026-11-29T10:00:00Z"
STDLIB = tuple({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]})


# -- objects as kube-apiserver serves them ----------------------------------------------------------------
def _managed(manager: str, fields: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "time": CREATED,
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        }
    ]


def _served_meta(meta: dict[str, Any], serial: int) -> None:
    """The metadata the API server adds; the same for the same object every time (a re-list's copy)."""
    uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{meta.get('namespace', '')}/{meta['name']}"))
    meta.update(uid=uid, resourceVersion=str(1000 + serial), creationTimestamp=CREATED)


def served_node(index: int) -> dict[str, Any]:
    """``node-{index}`` as the API server returns the benchmark's fake node."""
    from kopf_scheduler.devcluster.nodes import node_body

    node = node_body(index, prefix="node-")
    meta = node["metadata"]
    _served_meta(meta, index)
    meta["managedFields"] = _managed(
        "Python-urllib",
        {"f:metadata": {"f:labels": {f"f:{k}": {} for k in meta["labels"]}}, "f:status": {"f:capacity": {}}},
    )
    return node


def served_pod(index: int, nodes: int, scheduler: str, *, bound: bool = True) -> dict[str, Any]:
    """``init-{index}`` as the API server returns the benchmark's default pod (bound to
    ``node-{index % nodes}`` when ``bound``): with the defaults and admission (Priority,
    DefaultTolerationSeconds) of the bench cluster."""
    pod = default_pod(init_pod_name(index), INIT_NAMESPACE, scheduler)
    meta, spec = pod["metadata"], pod["spec"]
    _served_meta(meta, 100_000 + index)
    meta["generation"] = 1
    meta["managedFields"] = _managed(
        "Python-urllib",
        {"f:spec": {"f:containers": {'k:{"name":"pause"}': {".": {}, "f:image": {}, "f:resources": {}}}}},
    )
    if bound:
        spec["nodeName"] = node_name(index % nodes)
    for container in spec["containers"]:
        container.update(
            imagePullPolicy="IfNotPresent",
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
        )
        for port in container.get("ports") or ():
            port.setdefault("protocol", "TCP")
    spec.update(
        restartPolicy="Always",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        enableServiceLinks=True,
        priority=0,
        preemptionPolicy="PreemptLowerPriority",
        tolerations=[
            {
                "key": f"node.kubernetes.io/{taint}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for taint in ("not-ready", "unreachable")
        ],
    )
    pod["status"] = {"phase": "Pending", "qosClass": "Guaranteed"}
    return pod


def list_pages(
    make: Callable[[int], dict[str, Any]], first: int, count: int
) -> Iterator[list[dict[str, Any]]]:
    """The objects ``first..first+count`` as ``KubeClient.list_pages`` yields them: each page one JSON
    body decoded at once (its repeated keys are then one string per page)."""
    from kopf_scheduler.service.service import START_PAGE  # the service's pages

    for start in range(first, first + count, START_PAGE):
        items = [make(i) for i in range(start, min(first + count, start + START_PAGE))]
        body = json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}).encode()
        del items
        data = json.loads(body)
        del body
        page = data["items"]
        del data
        yield page


# -- measuring --------------------------------------------------------------------------------------------
def _site(trace: tracemalloc.Traceback) -> tracemalloc.Frame:
    """The most recent frame outside the standard library (the code that asked for the memory)."""
    for frame in reversed(trace):  # tracemalloc orders them oldest first
        if not frame.filename.startswith(STDLIB):
            return frame
    return trace[0]


def _short(path: str) -> str:
    for marker in ("site-packages/", "operator/", "/bench/"):
        if marker in path:
            return ("bench/" if marker == "/bench/" else "") + path.split(marker, 1)[1]
    return path


def _taken() -> tracemalloc.Snapshot:
    gc.collect()
    return tracemalloc.take_snapshot()


@dataclass
class Growth:
    """What was allocated and is still alive between two snapshots, per ``count`` objects added."""

    count: int
    total: float = 0.0
    by_file: dict[str, float] = field(default_factory=dict)
    sites: list[tuple[str, float, float]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "objects_added": self.count,
            "bytes_per_object": round(self.total),
            "by_file": {k: round(v) for k, v in self.by_file.items()},
            "top_sites": [
                {"site": site, "bytes_per_object": round(b), "blocks_per_object": round(n, 2)}
                for site, b, n in self.sites
            ],
        }


def growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, count: int) -> Growth:
    sizes: dict[tuple[str, int], list[int]] = {}
    for sign, snap in ((-1, before), (1, after)):
        for stat in snap.filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)]).statistics(
            "traceback"
        ):
            frame = _site(stat.traceback)
            slot = sizes.setdefault((frame.filename, frame.lineno), [0, 0])
            slot[0] += sign * stat.size
            slot[1] += sign * stat.count
    out = Growth(count)
    per_site: list[tuple[str, float, float]] = []
    for (filename, lineno), (size, blocks) in sizes.items():
        if not size:
            continue
        name = _short(filename)
        out.total += size / count
        out.by_file[name] = out.by_file.get(name, 0.0) + size / count
        per_site.append((f"{name}:{lineno}", size / count, blocks / count))
    out.by_file = {k: v for k, v in sorted(out.by_file.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 1}
    out.sites = sorted(per_site, key=lambda s: -abs(s[1]))[:TOP_SITES]
    return out


async def measured(feed: Callable[[int, int], Awaitable[None]], first: int, second: int) -> Growth:
    """Feeds objects ``0..first``, then ``first..second``: the growth of the second step per object.
    Only what is allocated from the first step on is traced (the modules and the process's set-up are
    not), so a snapshot is quick; what the second step frees of the first's is seen."""
    tracemalloc.start(FRAMES)
    try:
        await feed(0, first)
        before = _taken()
        await feed(first, second - first)
        after = _taken()
    finally:
        tracemalloc.stop()
    return growth(before, after, second - first)


# -- the intake process -----------------------------------------------------------------------------------
class _NoReader:
    """The pipe's writing end, its reader gone: frames are made and dropped."""

    def write(self, data: bytes) -> None:
        return None


class IntakeProcess:
    """Kopf's handling of watch events as the intake process runs it, without the watch."""

    def __init__(self) -> None:
        import kopf
        from kopf._cogs.structs import ephemera, references
        from kopf._core.actions import lifecycles
        from kopf._core.engines import indexing, posting

        from kopf_scheduler.handlers.intake import _forwarder
        from kopf_scheduler.handlers.lifecycle import NoMemories, configure, new_registry
        from kopf_scheduler.service.intake_link import NODES, PODS, FrameWriter

        self.settings = kopf.OperatorSettings()
        configure(self.settings)
        self.registry = new_registry()
        self.pipe = FrameWriter()
        self.pipe.transport = _NoReader()  # type: ignore[assignment]
        self.resources = {}
        for plural, channel, kind in (("pods", PODS, "Pod"), ("nodes", NODES, "Node")):
            kopf.on.event("", "v1", plural, id=f"{plural}_intake", registry=self.registry)(
                _forwarder(channel, self.pipe)
            )
            self.resources[plural] = references.Resource(
                "", "v1", plural, kind=kind, namespaced=plural == "pods", verbs=frozenset({"list", "watch"})
            )
        self.memories = NoMemories()
        self.memobase = ephemera.AnyMemo(ephemera.Memo())
        self.indexers = indexing.OperatorIndexers()
        self.lifecycle = lifecycles.get_default_lifecycle()
        self.event_queue: posting.K8sEventQueue = asyncio.Queue()

    async def event(self, plural: str, kind: str | None, obj: dict[str, Any]) -> None:
        from kopf._core.reactor import processing

        await processing.process_resource_event(
            lifecycle=self.lifecycle,
            indexers=self.indexers,
            registry=self.registry,
            settings=self.settings,
            memories=self.memories,
            memobase=self.memobase,
            resource=self.resources[plural],
            raw_event={"type": kind, "object": obj},  # type: ignore[typeddict-item]
            event_queue=self.event_queue,
            no_throttling=True,
        )

    async def close(self) -> None:
        await asyncio.sleep(0)  # the last frames' flush


# -- the scheduling process -------------------------------------------------------------------------------
class _NoAPI:
    """The API client of a service that is never started: nothing here reaches it."""


class SchedulingProcess:
    """``SchedulerService`` with its scheduler, fed by an ``IntakeLink`` reading frames from a pipe."""

    def __init__(self) -> None:
        from kopf_scheduler.k8s import KubeClient
        from kopf_scheduler.service.config import ServiceConfig
        from kopf_scheduler.service.intake_link import IntakeLink
        from kopf_scheduler.service.service import SchedulerService
        from kopf_scheduler.service.supervision import Supervisor

        self.service = SchedulerService(
            ServiceConfig(leader_elect=False),
            client=KubeClient(_NoAPI()),  # type: ignore[arg-type]
            supervisor=Supervisor(),
        )
        self.scheduler = self.service.scheduler
        self.scheduler.use_default_profiles()
        self.link = IntakeLink(self.service, on_failure=lambda line: None)
        read_fd, self._write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self.link._fd = read_fd

    def frames(self, channel: str, kind: str | None, objects: Iterator[dict[str, Any]]) -> None:
        """``objects`` as the intake process sends them, read and delivered by the link."""
        from kopf_scheduler.service.intake_link import frame

        batch: list[bytes] = []
        for obj in objects:
            batch.append(frame(channel, kind, obj))
            if len(batch) == FRAMES_PER_WRITE:
                self._through_pipe(b"".join(batch))
                batch = []
        if batch:
            self._through_pipe(b"".join(batch))

    def _through_pipe(self, data: bytes) -> None:
        os.write(self._write_fd, data)
        self.link._readable()  # reads up to READ_SIZE, more than was written

    def refresh(self) -> None:
        self.scheduler.cache.update_snapshot(self.scheduler.snapshot)

    async def close(self) -> None:
        self.link._close_pipe()
        os.close(self._write_fd)
        self.service.supervisor.stopping = True  # the resync's pending task is cancelled, as in ``stop``
        await self.service.resync.stop()


# -- the census -------------------------------------------------------------------------------------------
#: the benchmark's scheduler name of kopf-scheduler (``schedulers.py``); pending pods use a served one
BENCH_SCHEDULER = "kopf-scheduler"


@dataclass(frozen=True)
class Sizes:
    """Nodes and pods at the two points of each measurement."""

    nodes: tuple[int, int]
    pods: tuple[int, int]

    @classmethod
    def of(cls, nodes: int, pods: int) -> Sizes:
        return cls((nodes // 2, nodes), (pods // 2, pods))


async def intake_census(sizes: Sizes) -> dict[str, Growth]:
    proc = IntakeProcess()
    all_nodes = sizes.nodes[1]

    async def listed(plural: str, make: Callable[[int], dict[str, Any]], first: int, count: int) -> None:
        for i in range(first, first + count):
            await proc.event(plural, "ADDED", make(i))
            if i % 64 == 0:
                await asyncio.sleep(0)  # the frames' flush, as the event loop runs it
        await asyncio.sleep(0)

    out = {
        "node": await measured(lambda a, n: listed("nodes", served_node, a, n), *sizes.nodes),
        "bound_pod": await measured(
            lambda a, n: listed("pods", lambda i: served_pod(i, all_nodes, BENCH_SCHEDULER), a, n),
            *sizes.pods,
        ),
    }
    await proc.close()
    return out


async def scheduling_census(sizes: Sizes, *, initial_list: bool) -> dict[str, Growth]:
    """With ``initial_list``: as at start-up (the lists); without: the objects arrive as watch events."""
    from kopf_scheduler.service.intake_link import NODES, PODS

    proc = SchedulingProcess()
    all_nodes = sizes.nodes[1]

    def pod(i: int) -> dict[str, Any]:
        return served_pod(i, all_nodes, BENCH_SCHEDULER)

    def through(channel: str, make: Callable[[int], dict[str, Any]]) -> Callable[[int, int], Awaitable[None]]:
        async def feed(first: int, count: int) -> None:
            if initial_list:
                add = proc.scheduler.add_node if channel == NODES else proc.scheduler.add_pod
                for page in list_pages(make, first, count):
                    for obj in page:
                        add(obj)
                    del page
            else:
                proc.frames(channel, "ADDED", (make(i) for i in range(first, first + count)))
            proc.refresh()

        return feed

    out = {
        "node": await measured(through(NODES, served_node), *sizes.nodes),
        "bound_pod": await measured(through(PODS, pod), *sizes.pods),
    }
    await proc.close()
    return out


async def pending_census(sizes: Sizes) -> dict[str, Growth]:
    """Unbound pods of a served scheduler name, from watch events into the queue."""
    from kopf_scheduler.scheduling.scheduler import DEFAULT_SCHEDULER_NAMES
    from kopf_scheduler.service.intake_link import PODS

    proc = SchedulingProcess()

    async def feed(first: int, count: int) -> None:
        objects = (
            served_pod(i, 1, DEFAULT_SCHEDULER_NAMES[0], bound=False) for i in range(first, first + count)
        )
        proc.frames(PODS, "ADDED", objects)

    out = {"pending_pod": await measured(feed, *sizes.pods)}
    await proc.close()
    return out


LAYERS = {
    "intake": "watch intake process: what Kopf and the intake's handlers keep of watch events",
    "scheduling_startup": "scheduling process, objects from the initial lists",
    "scheduling_watched": "scheduling process, objects from watch events only",
    "scheduling_pending": "scheduling process, unbound pods in the queue",
}


async def census(sizes: Sizes) -> dict[str, dict[str, Growth]]:
    return {
        "intake": await intake_census(sizes),
        "scheduling_startup": await scheduling_census(sizes, initial_list=True),
        "scheduling_watched": await scheduling_census(sizes, initial_list=False),
        "scheduling_pending": await pending_census(sizes),
    }


def summary(results: dict[str, dict[str, Growth]]) -> str:
    lines = [f"{'layer':22} {'object':12} {'bytes/object':>12}   largest files"]
    for layer, per in results.items():
        for what, g in per.items():
            files = ", ".join(f"{name} {round(b)}" for name, b in list(g.by_file.items())[:4])
            lines.append(f"{layer:22} {what:12} {round(g.total):>12}   {files}")
    return "\n".join(lines)


def cmd_census(args: argparse.Namespace) -> int:
    from bench.__main__ import commit, versions

    if args.nodes < 2 or args.pods < 2:
        print("census: --nodes and --pods must be at least 2", file=sys.stderr)
        return 2
    if args.cluster:
        from bench.census_cluster import cmd_census_cluster

        return cmd_census_cluster(args)
    sizes = Sizes.of(args.nodes, args.pods)
    logging.getLogger("kopf_scheduler").setLevel(logging.ERROR)  # the service is stopped unstarted
    results = asyncio.run(census(sizes))
    print(summary(results))
    out_dir = Path(args.results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = out_dir / f"census-{stamp}.json"
    document = {
        "commit": commit(),
        "versions": {k: v for k, v in versions().items() if k in ("kopf-scheduler", "kopf")},
        "python": sys.version.split()[0],
        "sizes": {"nodes": list(sizes.nodes), "pods": list(sizes.pods)},
        "layers": LAYERS,
        "results": {layer: {what: g.as_json() for what, g in per.items()} for layer, per in results.items()},
    }
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"census: wrote {out}")
    return 0


def register(sub: Any, results_dir: Path) -> None:
    """The ``census`` subcommand of ``python -m bench``."""
    p = sub.add_parser("census", help="memory per node and pod in each process (tracemalloc, no cluster)")
    p.add_argument("--nodes", type=int, default=1000, help="nodes at the second point (half at the first)")
    p.add_argument("--pods", type=int, default=10000, help="pods at the second point (half at the first)")
    p.add_argument(
        "--cluster",
        action="store_true",
        help="on a dev cluster instead: kube-scheduler's live Go heap and both schedulers' RSS "
        "(half the nodes and pods, all the nodes, all the pods)",
    )
    p.add_argument("--results-dir", default=str(results_dir))
    p.set_defaults(func=cmd_census)
