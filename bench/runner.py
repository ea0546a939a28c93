"""One run = one workload at one size against one scheduler, on a fresh API server and etcd.

Sequence: ``DevCluster.up()`` in a temporary state dir (with kube-controller-manager when the workload
needs its controllers or ``--with-controller-manager`` asks); namespaces, PriorityClasses, the fake
nodes, the workload's extra objects (``bench.objects``) and the initial pods (created already bound);
kube-controller-manager, if any, waited for until idle; a scrape of the API server's request counter;
the scheduler started and waited for (ready, then idle: its CPU use settles after the initial lists);
the workload's companion (a provisioner, a churn) started; the measured phase (``loadgen``); the scheduler's
own metrics and peak RSS read; the scheduler and the companion stopped; a second scrape; the workload's
check of the state the scheduler left; the cluster torn down. Whatever happens (an error, a timeout,
Ctrl-C), the scheduler and the cluster are stopped and the temporary directory is removed; a failed run
keeps its scheduler log under ``<results>/logs/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from bench import apimetrics, procstats, schedulers
from bench.cpu_sampler import CpuProfiler
from bench.loadgen import Measurement, PodLoad
from bench.objects import Companion, Extras, Loader, Setup
from bench.sampling import summarize
from bench.workloads import (
    INIT_NAMESPACE,
    MEASURED_NAMESPACE,
    Shape,
    Workload,
    init_namespace,
    init_pod_name,
    measured_pod_name,
    node_name,
)
from kopf_scheduler.devcluster import ApiClient, DevCluster, create_nodes
from kopf_scheduler.devcluster.cluster import (
    APISERVER,
    CONTROLLER_MANAGER,
    ETCD,
    ClusterError,
    default_crds_dir,
)

SETTLE_WINDOW = 1.0
#: idle = less CPU than this fraction of one core over a window, twice in a row
SETTLE_THRESHOLD = 0.10
SETTLE_TIMEOUT = 180.0
#: seconds between samples of the scheduler's resident set during the measured phase
RSS_INTERVAL = 5.0
#: a measured phase shorter than this has no warm-up to measure RSS growth after
RSS_GROWTH_MIN_SECONDS = 60.0
#: seconds of creation time per latency window
LATENCY_WINDOW = 60.0


@dataclass
class RunOptions:
    size: str
    timeout: float
    results_dir: Path
    stamp: str
    create_concurrency: int = 64
    #: pods per second for the latency mode; None: as fast as the API server takes them
    rate: float | None = None
    rate_seconds: float = 30.0
    profile: bool = False
    profile_format: str = "flamegraph"
    #: seconds to wait for the machine to be quiet before a run (0: measure the background only)
    quiet_wait: float = 60.0
    #: also run kube-controller-manager (its API requests then count as the scheduler's, its CPU as foreign)
    controller_manager: bool = False
    log: Callable[[str], None] = print


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def _post_all(api: ApiClient, path: str, bodies: list[bytes], concurrency: int) -> None:
    errors: list[str] = []
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=api.ssl_context())
    async with aiohttp.ClientSession(
        base_url=api.server, connector=connector, headers=api.headers()
    ) as session:
        pending = iter(bodies)

        async def worker() -> None:
            for body in pending:
                for attempt in range(5):
                    async with session.post(path, data=body) as resp:
                        text = await resp.text()
                        if resp.status in (200, 201):
                            break
                        if resp.status not in (429, 500, 503):
                            errors.append(f"HTTP {resp.status}: {text[:200]}")
                            break
                    await asyncio.sleep(0.1 * 2**attempt)

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bodies))))))
    if errors:
        raise RuntimeError(f"{len(errors)} of {len(bodies)} creations under {path} failed: {errors[0]}")


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


async def populate(
    api: ApiClient,
    workload: Workload,
    shape: Shape,
    scheduler_name: str,
    measured_pods: int = 0,
) -> Setup:
    """Namespaces, PriorityClasses, nodes, the workload's extra objects, and the initial pods bound to
    node ``i % nodes``."""
    nodes = shape.nodes
    namespaces = {INIT_NAMESPACE, MEASURED_NAMESPACE}
    namespaces |= {init_namespace(i, shape) for i in range(shape.init_pods)}
    for ns in sorted(namespaces):
        meta: dict[str, Any] = {"name": ns}
        if workload.namespace_labels:
            meta["labels"] = dict(workload.namespace_labels)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
        await _post_all(api, "/api/v1/namespaces", [_encode(body)], 1)
    for name, value in workload.priority_classes:
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await _post_all(api, "/apis/scheduling.k8s.io/v1/priorityclasses", [_encode(body)], 1)
    await create_nodes(
        api, nodes, prefix="node-", zones=workload.zones, template=workload.node_template or None
    )
    async with Loader(api) as loader:
        setup = Setup(
            loader=loader,
            nodes=[node_name(i) for i in range(nodes)],
            init_namespace=INIT_NAMESPACE,
            measured_namespace=MEASURED_NAMESPACE,
            init_pods=[init_pod_name(i) for i in range(shape.init_pods)],
            measured_pods=[measured_pod_name(i) for i in range(measured_pods)],
            scheduler_name=scheduler_name,
        )
        if workload.extras is not None:
            await workload.extras.before_pods(setup)
        by_namespace: dict[str, list[bytes]] = {}
        for i, name in enumerate(setup.init_pods):
            ns = init_namespace(i, shape)
            pod = workload.init_pod(name, ns, scheduler_name)
            pod["spec"]["nodeName"] = node_name(i % nodes)
            by_namespace.setdefault(ns, []).append(_encode(pod))
        for ns, bodies in by_namespace.items():
            await _post_all(api, f"/api/v1/namespaces/{ns}/pods", bodies, 64)
        if workload.extras is not None:
            await workload.extras.after_init_pods(setup)
    return setup


def source_digest() -> str:
    """A digest of the kopf_scheduler sources this run executes (the work tree may change between runs)."""
    import hashlib

    import kopf_scheduler

    root = Path(kopf_scheduler.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def wait_quiet(max_wait: float, threshold: float = 0.5, window: float = 3.0) -> float:
    """Waits (at most ``max_wait`` seconds) until the machine, with nothing of the benchmark running,
    is busier than ``threshold`` cores no more; returns the last measured background load in cores.
    Other programs on the machine (another test suite, a build) would otherwise share its 2 cores."""
    deadline = time.monotonic() + max_wait
    window = min(window, max(1.0, max_wait))
    while True:
        before = procstats.machine_busy_seconds()
        time.sleep(window)
        cores = (procstats.machine_busy_seconds() - before) / window
        if cores < threshold or time.monotonic() >= deadline:
            return round(cores, 2)


def up(cluster: DevCluster, attempts: int = 3) -> None:
    """``cluster.up()``, retried: ``kubectl wait`` for the CRDs now and then fails when it reads a CRD
    before its status has any conditions."""
    for attempt in range(1, attempts + 1):
        try:
            cluster.up()
            return
        except ClusterError:
            cluster.down()
            if attempt == attempts:
                raise


def wait_idle(pid: int, alive: Callable[[], bool]) -> float:
    """Seconds until ``pid`` uses under SETTLE_THRESHOLD of a core for two windows in a row."""
    started = time.monotonic()
    quiet = 0
    last = procstats.cpu_seconds(pid)
    while quiet < 2 and time.monotonic() - started < SETTLE_TIMEOUT and alive():
        time.sleep(SETTLE_WINDOW)
        now = procstats.cpu_seconds(pid)
        quiet = quiet + 1 if now - last < SETTLE_THRESHOLD * SETTLE_WINDOW else 0
        last = now
    return time.monotonic() - started


class Profiler:
    """``py-spy record`` attached to a pid and its children (the intake process) for the measured phase
    (SIGINT makes it write the file)."""

    def __init__(self, pid: int, output: Path, fmt: str) -> None:
        exe = Path(sys.executable).parent / "py-spy"
        self.argv = [
            str(exe if exe.exists() else "py-spy"), "record", "--pid", str(pid), "--rate", "100",
            "--nonblocking", "--subprocesses", "--format", fmt, "--output", str(output),
        ]  # fmt: skip
        self.output = output
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.popen = subprocess.Popen(
            self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        time.sleep(1.0)  # attached before the first pod
        if self.popen.poll() is not None:
            err = self.popen.stderr.read().decode(errors="replace") if self.popen.stderr else ""
            raise RuntimeError(f"py-spy failed: {err.strip()}")

    def stop(self) -> None:
        if self.popen is None or self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGINT)
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


def _profile_path(workload: Workload, opts: RunOptions, latency_mode: bool, suffix: str) -> Path:
    mode = f"rate{opts.rate:g}" if latency_mode else "throughput"
    return opts.results_dir / f"profile-{workload.name}-{opts.size}-{mode}-{opts.stamp}.{suffix}"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def run_one(workload: Workload, kind: str, opts: RunOptions) -> dict[str, Any]:
    """Runs one scheduler on one workload; always returns a record (with ``error`` when it failed)."""
    shape = workload.shape(opts.size)
    latency_mode = opts.rate is not None
    measured = round(opts.rate * opts.rate_seconds) if opts.rate is not None else shape.measured_pods
    rate = opts.rate if latency_mode else shape.rate
    record: dict[str, Any] = {
        "workload": workload.name,
        "size": opts.size,
        "mode": "latency" if latency_mode else "throughput",
        "rate": opts.rate,
        "scheduler": kind,
        "upstream_shape": shape.upstream,
        "nodes": shape.nodes,
        "init_pods": shape.init_pods,
        "pods": measured,
        "creation_rate": rate,
        "lifetime_s": shape.lifetime,
        "complete": False,
        "error": None,
        "controller_manager": opts.controller_manager,
        "workload_controllers": list(workload.controllers),
    }
    record["background_cores_before"] = wait_quiet(opts.quiet_wait)
    record["kopf_scheduler_source"] = source_digest()
    record["loadavg_before"] = _loadavg()
    workdir = Path(tempfile.mkdtemp(prefix="kopf-scheduler-bench-"))
    cluster = DevCluster(
        workdir / "cluster",
        crds_dir=default_crds_dir(),
        die_with_parent=True,
        with_controller_manager=opts.controller_manager or bool(workload.controllers),
    )
    sched = schedulers.make(kind, cluster, workdir)
    # the pods' schedulerName: the scheduler's own, or a profile the workload applies
    pod_scheduler = workload.scheduler_name or sched.scheduler_name
    record["scheduler_name"] = pod_scheduler
    profiler: Profiler | CpuProfiler | None = None
    companion: Companion | None = None
    try:
        started = time.monotonic()
        up(cluster)
        api = cluster.client()
        setup = asyncio.run(populate(api, workload, shape, pod_scheduler, measured))
        record["setup_seconds"] = round(time.monotonic() - started, 1)
        names = setup.measured_pods
        bodies = [_encode(workload.measured_pod(n, MEASURED_NAMESPACE, pod_scheduler)) for n in names]
        manager_pid = cluster.components[CONTROLLER_MANAGER].pid if cluster.with_controller_manager else 0
        if manager_pid:  # e.g. its TTL controller annotates every new node: done before the scheduler starts
            record["controller_manager_settle_seconds"] = round(wait_idle(manager_pid, lambda: True), 1)
        manager_before = _controller_manager_requests(cluster)
        before = apimetrics.parse(api.request("GET", "/metrics", timeout=60).text())
        started = time.monotonic()
        cpu_profiler = None
        if opts.profile and kind == schedulers.KOPF_SCHEDULER and opts.profile_format == "cpu":
            cpu_profiler = CpuProfiler(_profile_path(workload, opts, latency_mode, "cpu.txt"))
            sched.wrap_env = cpu_profiler.env
        # every listed object is synced before the scheduler is ready: 150,000 pods take minutes
        sched.start(timeout=max(180.0, (shape.nodes + shape.init_pods) / 250))
        record["startup_seconds"] = round(time.monotonic() - started, 2)
        record["settle_seconds"] = round(wait_idle(sched.pid, sched.alive), 1)
        # after the scheduler settled: a churn would keep it from ever being idle
        if workload.extras is not None:
            companion = workload.extras.companion(api, setup)
        if companion is not None:
            companion.start()
        pid = sched.pid
        apiserver_pid, etcd_pid = cluster.components[APISERVER].pid, cluster.components[ETCD].pid
        if cpu_profiler is not None:
            profiler = cpu_profiler
        elif opts.profile and kind == schedulers.KOPF_SCHEDULER:
            suffix = {"flamegraph": "svg", "raw": "txt", "speedscope": "json"}[opts.profile_format]
            profiler = Profiler(pid, _profile_path(workload, opts, latency_mode, suffix), opts.profile_format)
        if profiler is not None:
            profiler.start()
            record["profile"] = str(profiler.output)

        marks: dict[str, dict[str, float]] = {}

        def mark(name: str) -> Callable[[], None]:
            def take() -> None:
                marks[name] = {
                    "time": time.monotonic(),
                    "scheduler": procstats.cpu_seconds(pid),
                    "apiserver": procstats.cpu_seconds(apiserver_pid),
                    "etcd": procstats.cpu_seconds(etcd_pid),
                    "controller_manager": procstats.cpu_seconds(manager_pid) if manager_pid else 0.0,
                    # this process alone: the cluster and the scheduler are its children
                    "harness": procstats.cpu_seconds(os.getpid(), tree=False),
                    "machine": procstats.machine_busy_seconds(),
                }

            return take

        target = workload.expected_bound(shape.nodes, measured) if workload.expected_bound else None
        if target is not None:
            record["expected_bound"] = target
        load = PodLoad(
            api,
            MEASURED_NAMESPACE,
            names,
            bodies,
            concurrency=opts.create_concurrency,
            rate=rate,
            target=target,
            lifetime=shape.lifetime,
        )
        rss = RssSampler(pid)
        start_mark = mark("start")

        def on_start() -> None:
            start_mark()
            rss.start()

        try:
            result = asyncio.run(
                load.run(timeout=opts.timeout, alive=sched.alive, on_start=on_start, on_end=mark("end"))
            )
        finally:
            rss.stop()
        record.update(rss.fields())
        if profiler is not None:
            profiler.stop()
        own_metrics = sched.metrics()
        record["peak_rss_bytes"] = procstats.peak_rss_bytes(pid)
        record["cpu_seconds_total"] = round(procstats.cpu_seconds(pid), 2)
        sched.stop()
        harness_requests = Counter(result.requests)
        if companion is not None:
            companion.stop()
            harness_requests.update(companion.requests)
            record.update(companion.summary())
        after = apimetrics.parse(api.request("GET", "/metrics", timeout=60).text())
        if manager_pid:
            manager_after = _controller_manager_requests(cluster)
            record["controller_manager_requests_by_method"] = {
                k: manager_after.get(k, 0) - manager_before.get(k, 0) for k in sorted(manager_after)
            }
        requests = apimetrics.scheduler_requests(before, after, harness_requests)
        problems: list[str] = []
        if workload.extras is not None and kind != schedulers.RAW_BINDER:  # binding alone is all it does
            problems = asyncio.run(_check(workload.extras, setup))
            record["check_problems"] = len(problems)
        record.update(_measurement_fields(result, marks))
        record.update({k: _round(v, 3) for k, v in apimetrics.breakdown(requests, measured).items()})
        record["api_requests_by_kind"] = {apimetrics.label(k): n for k, n in sorted(requests.items())}
        record["harness_requests_by_kind"] = {
            apimetrics.label(k): n for k, n in sorted(harness_requests.items())
        }
        record["scheduler_metrics"] = _own_metrics(own_metrics)
        if result.outcome != "complete":
            record["error"] = f"{result.outcome}: {result.bound} of {target or measured} pods bound" + (
                f"; scheduler exit code {sched.exit_code()}; log tail:\n{sched.log_tail(15)}"
                if result.outcome == "scheduler exited"
                else f" after {opts.timeout:.0f} s"
            )
        elif result.create_errors:
            record["error"] = f"{len(result.create_errors)} pod creations failed: {result.create_errors[0]}"
        elif problems:
            record["error"] = f"every pod bound, but {len(problems)} problems: " + "; ".join(problems[:5])
        else:
            record["complete"] = True
    except Exception as e:  # a failed run is reported, not fatal for the others
        record["error"] = f"{type(e).__name__}: {e}"
    finally:
        if profiler is not None:
            profiler.stop()
        if companion is not None:
            companion.stop()
        if not record["complete"] and sched.component is not None:
            logs = opts.results_dir / "logs" / opts.stamp
            logs.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copy(sched.log_file, logs / f"{workload.name}-{opts.size}-{record['mode']}-{kind}.log")
        try:
            sched.stop()
        finally:
            cluster.down()
            shutil.rmtree(workdir, ignore_errors=True)
        record["loadavg_after"] = _loadavg()
    return record


def _measurement_fields(result: Measurement, marks: dict[str, dict[str, float]]) -> dict[str, Any]:
    throughput = result.collector.summary()
    latency = summarize(result.latencies())
    start, end = marks.get("start", {}), marks.get("end", {})

    def used(what: str) -> float | None:
        return round(end[what] - start[what], 2) if what in start and what in end else None

    cpu = used("scheduler")
    ours = [used(w) for w in ("scheduler", "apiserver", "etcd", "harness", "controller_manager")]
    machine = used("machine")
    foreign = round(machine - sum(x for x in ours if x), 2) if machine is not None else None
    first_seen = min(result.first_seen.values()) if result.first_seen else None
    return {
        "bound": result.bound,
        "created": result.created,
        "throughput_avg": _round(throughput.get("avg"), 1),
        "throughput_p50": _round(throughput.get("p50"), 1),
        "throughput_p90": _round(throughput.get("p90"), 1),
        "throughput_p95": _round(throughput.get("p95"), 1),
        "throughput_p99": _round(throughput.get("p99"), 1),
        "throughput_samples": int(throughput.get("count", 0)),
        "throughput_overall": _round(result.overall_throughput(), 1),
        "latency_avg_s": _round(latency.get("avg")),
        "latency_p50_s": _round(latency.get("p50")),
        "latency_p90_s": _round(latency.get("p90")),
        "latency_p99_s": _round(latency.get("p99")),
        "latency_max_s": _round(latency.get("max")),
        "cpu_seconds": cpu,
        "cpu_ms_per_pod": round(1000 * cpu / result.bound, 3) if cpu is not None and result.bound else None,
        "apiserver_cpu_seconds": used("apiserver"),
        "etcd_cpu_seconds": used("etcd"),
        "controller_manager_cpu_seconds": used("controller_manager") or None,
        "harness_cpu_seconds": used("harness"),
        "machine_busy_seconds": machine,
        "foreign_cpu_seconds": foreign,
        "measured_seconds": used("time"),
        "create_seconds": _round(result.create_finished - result.create_started, 2)
        if result.create_finished
        else None,
        "schedule_seconds": _round(result.all_bound - first_seen, 2)
        if result.all_bound is not None and first_seen is not None
        else None,
        "force_deleted": result.force_deleted,
        "expired": result.expired,
        "latency_windows": latency_windows(result),
        "latency_worst": worst_latencies(result),
        "throughput_progress": [
            [round(t - result.create_started, 2), n] for t, n in result.collector.progress
        ],
    }


def latency_windows(result: Measurement, window: float = LATENCY_WINDOW) -> list[list[float]]:
    """``[start s, pods, p50 s, p99 s]`` per ``window`` seconds of creation time (pods by when they were
    first seen): whether latency drifts during a long run."""
    if not result.first_seen:
        return []
    origin = min(result.first_seen.values())
    buckets: dict[int, list[float]] = {}
    for name, bound in result.bound_at.items():
        seen = result.first_seen.get(name)
        if seen is not None:
            buckets.setdefault(int((seen - origin) // window), []).append(bound - seen)
    out = []
    for k in sorted(buckets):
        stats = summarize(buckets[k])
        out.append([k * window, int(stats["count"]), round(stats["p50"], 4), round(stats["p99"], 4)])
    return out


def worst_latencies(result: Measurement, count: int = 20) -> list[list[float]]:
    """``[s after the first pod was seen, latency s]`` of the ``count`` slowest pods: when the pauses
    behind the p99 happened."""
    if not result.first_seen:
        return []
    origin = min(result.first_seen.values())
    slowest = sorted(
        ((bound - result.first_seen[n], result.first_seen[n]) for n, bound in result.bound_at.items()
         if n in result.first_seen),
        reverse=True,
    )[:count]  # fmt: skip
    return [[round(seen - origin, 3), round(latency, 4)] for latency, seen in slowest]


class RssSampler:
    """The scheduler's resident set every ``interval`` seconds of the measured phase, in its own thread;
    ``fields()`` gives the samples and, for a phase long enough to have a warm-up, the growth after it:
    the median of the last tenth of the phase over the median of its third tenth, minus one."""

    def __init__(
        self, pid: int, interval: float = RSS_INTERVAL, read: Callable[[], int] | None = None
    ) -> None:
        self.pid = pid
        self.interval = interval
        #: what is sampled (bytes; 0: no sample): by default the process and its children
        self.read = read if read is not None else lambda: procstats.rss_bytes(pid)
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        started = time.monotonic()
        while True:
            value = self.read()
            if value:
                self.samples.append((time.monotonic() - started, value))
            if self._stop.wait(self.interval):
                return

    def fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rss_progress": [[round(t, 1), round(v / 2**20, 1)] for t, v in self.samples]}
        out.update(rss_growth(self.samples))
        return out


def rss_growth(samples: list[tuple[float, int]]) -> dict[str, Any]:
    """``(seconds, bytes)`` samples -> the resident set after warm-up (the median of the third tenth of
    the span), at the end (the median of the last tenth) and the growth between them; {} for a span
    shorter than ``RSS_GROWTH_MIN_SECONDS``."""
    if not samples or samples[-1][0] < RSS_GROWTH_MIN_SECONDS:
        return {}
    span = samples[-1][0]

    def median(lo: float, hi: float) -> float | None:
        values = [v for t, v in samples if lo * span <= t <= hi * span]
        return statistics.median(values) if values else None

    warm, last = median(0.2, 0.3), median(0.9, 1.0)
    if not warm or not last:
        return {}
    return {
        "rss_after_warmup_mib": round(warm / 2**20, 1),
        "rss_end_mib": round(last / 2**20, 1),
        "rss_growth_after_warmup": round(last / warm - 1, 4),
    }


async def _check(extras: Extras, setup: Setup) -> list[str]:
    async with Loader(setup.api) as loader:
        return await extras.check(dataclasses.replace(setup, loader=loader))


def _controller_manager_requests(cluster: DevCluster) -> dict[str, int]:
    """kube-controller-manager's own count of its requests by method ({} when it does not run)."""
    url = cluster.urls.get(CONTROLLER_MANAGER)
    if not cluster.with_controller_manager or not url:
        return {}
    try:
        return apimetrics.client_requests(schedulers.http_get(url + "/metrics", timeout=30))
    except OSError:
        return {}


def _own_metrics(text: str) -> dict[str, float]:
    """What the scheduler says about itself (the same metric names in both schedulers)."""
    if not text:
        return {}
    out = {
        "schedule_attempts_scheduled": apimetrics.metric_sum(
            text, "scheduler_schedule_attempts_total", {"result": "scheduled"}
        ),
        "schedule_attempts_unschedulable": apimetrics.metric_sum(
            text, "scheduler_schedule_attempts_total", {"result": "unschedulable"}
        ),
        "schedule_attempts_error": apimetrics.metric_sum(
            text, "scheduler_schedule_attempts_total", {"result": "error"}
        ),
        "attempt_duration_seconds_sum": apimetrics.metric_sum(
            text, "scheduler_scheduling_attempt_duration_seconds_sum"
        ),
        "attempt_duration_count": apimetrics.metric_sum(
            text, "scheduler_scheduling_attempt_duration_seconds_count"
        ),
    }
    client = apimetrics.client_requests(text)
    if client:
        out["client_requests_by_method"] = client  # type: ignore[assignment]
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in out.items()}
