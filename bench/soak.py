"""``python -m bench soak``: kopf-scheduler's memory over a long run of churn that includes gangs and
credential rotation.

One run, kopf-scheduler only (memory flatness is about its own two processes; kube-scheduler has no gang
scheduling of these PodGroups), on a fresh API server and etcd with ``nodes`` nodes. kopf-scheduler runs
as the ServiceAccount of ``deploy/`` with the ClusterRole of ``deploy/rbac.yaml`` (least privilege),
through a kubeconfig with a ``tokenFile`` (``bench.rotation``). For ``minutes``, at once:

- pods (``pod-default``) created at ``pod_rate`` pods/s, each deleted ``pod_lifetime`` seconds after it is
  seen bound (``bench.loadgen.PodLoad``, as SchedulingWithMixedChurn), beside that workload's churn: a
  node, an unschedulable pod and a Service made and deleted on alternate seconds (``bench.churn``);
- gangs of 8 (PodGroups) made every ``gang_interval`` seconds, each bound whole and deleted
  ``gang_lifetime`` seconds later; every ``held_every``-th gang cannot fit: its members wait and are
  rejected until it is deleted (``bench.gang_churn``);
- the token rotated every ``rotate_every`` seconds, the old one refused at once (``bench.rotation``):
  the scheduler must reload its credentials after the 401 and go on binding;
- the resident set (``VmRSS``) of the scheduling process and of the watch intake process sampled every
  5 s; growth after warm-up as ``run`` computes it (``bench.runner.rss_growth``: the median of the last
  tenth of the phase over the median of its third tenth), the target under 5 % for each.

The phase ends once every pod is bound and every gang that fits is whole. The run is complete when all
were, no gang was ever stuck partly bound, no held gang had a member bound, at least one rotation
happened and each old token was refused, the scheduler logged no traceback and did not exit. Reloads are
counted from the scheduler's log: the scheduling process's client ("API credentials reloaded ... after a
401") and Kopf's re-authentication in the intake process ("Re-authentication has finished").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench import churn, gangs, procstats, report, rotation, schedulers
from bench.gang_churn import NAMESPACE as GANG_NAMESPACE
from bench.gang_churn import GangChurn
from bench.loadgen import PodLoad
from bench.runner import (
    RSS_INTERVAL,
    RssSampler,
    _encode,
    _loadavg,
    latency_windows,
    populate,
    rss_growth,
    source_digest,
    up,
    wait_idle,
    wait_quiet,
)
from bench.sampling import summarize
from bench.workloads import MEASURED_NAMESPACE, MIXED_CHURN, WORKLOADS, Shape, default_pod, large_cpu_pod
from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import default_crds_dir

MODE = "soak"
WORKLOAD = "SoakWithGangsAndRotation"
BENCH_DIR = Path(__file__).resolve().parent
#: the growth after warm-up a flat memory stays under, per process
GROWTH_TARGET = 0.05
INTAKE_MODULE = b"kopf_scheduler.handlers.intake"
#: log lines counted (see the module)
RELOADED = "API credentials reloaded from"
REAUTHENTICATED = "Re-authentication has finished"
RELOAD_FAILED = "credentials cannot be reloaded"
TRACEBACK = "Traceback (most recent call last)"


def intake_pid(pid: int) -> int:
    """The watch intake process among ``pid``'s children (0 when there is none)."""
    for child in procstats.children_of(pid):
        with contextlib.suppress(OSError):
            if INTAKE_MODULE in Path(f"/proc/{child}/cmdline").read_bytes():
                return child
    return 0


class ProcessRss:
    """The resident set of the scheduling process (alone) and of its watch intake process every
    ``interval`` seconds, each sampled by a ``runner.RssSampler`` of its own."""

    def __init__(self, pid: int, interval: float = RSS_INTERVAL, api_port: int | None = None) -> None:
        intake = 0

        def intake_rss() -> int:
            nonlocal intake
            if not intake or not procstats.alive(intake):
                intake = intake_pid(pid)
            return procstats.rss_bytes(intake, tree=False) if intake else 0

        self.samplers = {
            "scheduling": RssSampler(pid, interval, read=lambda: procstats.rss_bytes(pid, tree=False)),
            "intake": RssSampler(pid, interval, read=intake_rss),
        }
        #: the scheduling process's established TCP connections to the API server, sampled alike
        self.connections = RssSampler(
            pid, interval, read=lambda: procstats.tcp_connections(pid, remote_port=api_port)
        )

    @property
    def samples(self) -> dict[str, list[tuple[float, int]]]:
        return {name: sampler.samples for name, sampler in self.samplers.items()}

    def start(self) -> None:
        for sampler in (*self.samplers.values(), self.connections):
            sampler.start()

    def stop(self) -> None:
        for sampler in (*self.samplers.values(), self.connections):
            sampler.stop()


def connection_fields(samples: list[tuple[float, int]]) -> dict[str, Any]:
    """The scheduling process's connections to the API server: the samples (``[s, count]``), the first,
    the peak, and the medians of the third tenth and of the last tenth of the phase (as ``rss_growth``
    reads the resident set), so its growth can be read against theirs."""
    if not samples:
        return {}
    span = samples[-1][0]

    def median(lo: float, hi: float) -> float | None:
        values = [v for t, v in samples if lo * span <= t <= hi * span]
        return statistics.median(values) if values else None

    return {
        "progress": [[round(t, 1), v] for t, v in samples],
        "start": samples[0][1],
        "peak": max(v for _, v in samples),
        "after_warmup": median(0.2, 0.3),
        "end": median(0.9, 1.0),
    }


def memory_fields(samples: dict[str, list[tuple[float, int]]]) -> dict[str, Any]:
    """Per process: the samples (``[s, MiB]``), the first sample, the peak and the growth after warm-up
    (``rss_growth``); and whether each stayed under ``GROWTH_TARGET``."""
    out: dict[str, Any] = {}
    for name, series in samples.items():
        fields: dict[str, Any] = {
            "rss_progress": [[round(t, 1), round(v / 2**20, 1)] for t, v in series],
            "rss_start_mib": round(series[0][1] / 2**20, 1) if series else None,
            "rss_peak_mib": round(max(v for _, v in series) / 2**20, 1) if series else None,
        }
        fields.update(rss_growth(series))
        growth = fields.get("rss_growth_after_warmup")
        fields["flat"] = None if growth is None else growth < GROWTH_TARGET
        out[name] = fields
    return out


def log_counts(text: str) -> dict[str, int]:
    """What the scheduler's log says about its credentials and its health (see the module)."""
    return {
        "credential_reloads": text.count(RELOADED),
        "kopf_reauthentications": text.count(REAUTHENTICATED),
        "credential_reload_failures": text.count(RELOAD_FAILED),
        "tracebacks": text.count(TRACEBACK),
    }


def problems(record: dict[str, Any]) -> list[str]:
    """Why a finished run is not a proof (nothing: it is)."""
    out = list(record.get("gang_problems") or [])
    if record.get("rotations", 0) < 1:
        out.append("no credential rotation happened")
    if record.get("old_token_refused", 0) < record.get("rotations", 0):
        out.append("an old token was not refused after its Secret was deleted")
    out += [f"rotation: {e}" for e in record.get("rotation_errors") or []]
    if record.get("rotations", 0) and not record.get("credential_reloads"):
        out.append("the scheduler never reloaded its credentials after a 401")
    if record.get("credential_reload_failures"):
        out.append(f"{record['credential_reload_failures']} credential reloads failed")
    if record.get("tracebacks"):
        out.append(f"{record['tracebacks']} tracebacks in the scheduler's log")
    if record.get("churn_errors"):
        out.append(f"churn: {record['churn_errors'][0]}")
    return out


def run_soak(opts: Any) -> dict[str, Any]:
    """One run (see the module); always returns a record (``error`` set when it failed). ``opts``: the
    ``soak`` subcommand's arguments and ``stamp``."""
    seconds = opts.minutes * 60
    pods = round(opts.pod_rate * seconds)
    record: dict[str, Any] = {
        "workload": WORKLOAD,
        "size": f"{opts.nodes}-nodes-{opts.minutes:g}-min",
        "mode": MODE,
        "scheduler": schedulers.KOPF_SCHEDULER,
        "nodes": opts.nodes,
        "minutes": opts.minutes,
        "pods": pods,
        "creation_rate": opts.pod_rate,
        "lifetime_s": opts.pod_lifetime,
        "complete": False,
        "error": None,
    }
    record["background_cores_before"] = wait_quiet(opts.quiet_wait)
    record["kopf_scheduler_source"] = source_digest()
    record["loadavg_before"] = _loadavg()
    workdir = Path(tempfile.mkdtemp(prefix="kopf-scheduler-soak-"))
    cluster = DevCluster(workdir / "cluster", crds_dir=default_crds_dir(), die_with_parent=True)
    sched = schedulers.KopfScheduler(cluster, workdir)
    record["scheduler_name"] = sched.scheduler_name
    churner: churn.Churner | None = None
    rotator: rotation.Rotator | None = None
    gang_churn: GangChurn | None = None
    rss: ProcessRss | None = None
    try:
        started = time.monotonic()
        up(cluster)
        api = cluster.client()
        templates = (churn.NODES, churn.pods(large_cpu_pod), churn.SERVICES)
        workload = dataclasses.replace(
            WORKLOADS[MIXED_CHURN], extras=churn.Churn(templates, mode="recreate", interval=1.0)
        )
        shape = Shape(opts.nodes, 0, pods, WORKLOAD, rate=opts.pod_rate, lifetime=opts.pod_lifetime)
        setup = asyncio.run(populate(api, workload, shape, sched.scheduler_name))
        profile = yaml.safe_load(gangs.PROFILE_FILE.read_text())
        for path, body in (
            (gangs.PROFILES, profile),
            (
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": GANG_NAMESPACE}},
            ),
        ):
            made = api.request("POST", path, body)
            if not made.ok:
                raise RuntimeError(f"POST {path}: HTTP {made.status}: {made.text()[:200]}")
        rotation.install_service_account(api)
        token_file = workdir / "token"
        rotator = rotation.Rotator(api, token_file, opts.rotate_every)
        rotator.first()
        sched.kubeconfig = workdir / "sa-kubeconfig"
        config = rotation.token_file_kubeconfig(
            cluster.server, cluster.ca_file.read_bytes(), token_file, "kopf-scheduler-soak"
        )
        sched.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        record["setup_seconds"] = round(time.monotonic() - started, 1)

        started = time.monotonic()
        sched.start(timeout=180.0)
        record["startup_seconds"] = round(time.monotonic() - started, 2)
        record["settle_seconds"] = round(wait_idle(sched.pid, sched.alive), 1)

        assert workload.extras is not None
        companion = workload.extras.companion(api, setup)
        assert isinstance(companion, churn.Churner)
        churner = companion
        gang_churn = GangChurn(api, opts.gang_interval, opts.gang_lifetime, opts.held_every)
        rss = ProcessRss(sched.pid, api_port=urlsplit(cluster.server).port)
        names = [f"soak-{i}" for i in range(pods)]
        bodies = [_encode(default_pod(n, MEASURED_NAMESPACE, sched.scheduler_name)) for n in names]
        load = PodLoad(api, MEASURED_NAMESPACE, names, bodies, rate=opts.pod_rate, lifetime=opts.pod_lifetime)
        begun = [0.0]

        def on_start() -> None:
            begun[0] = time.monotonic()
            for part in (rss, churner, gang_churn, rotator):
                assert part is not None
                part.start()

        result = asyncio.run(load.run(timeout=seconds + opts.timeout, alive=sched.alive, on_start=on_start))
        gangs_done = gang_churn.finish(timeout=opts.timeout) if result.outcome == "complete" else False
        for part in (rotator, churner):
            part.stop()
        rss.stop()
        record["measured_seconds"] = round(time.monotonic() - begun[0], 1)
        record["scheduler_alive_at_end"] = sched.alive()
        record["cpu_seconds_total"] = round(procstats.cpu_seconds(sched.pid), 2)
        record["peak_rss_bytes"] = procstats.peak_rss_bytes(sched.pid)
        sched.stop()
        latency = summarize(result.latencies())
        record.update(
            {
                "bound": result.bound,
                "created": result.created,
                "expired": result.expired,
                "latency_p50_s": _r(latency.get("p50")),
                "latency_p99_s": _r(latency.get("p99")),
                "latency_max_s": _r(latency.get("max")),
                "latency_windows": latency_windows(result),
            }
        )
        record["memory"] = memory_fields(rss.samples)
        record["api_connections"] = connection_fields(rss.connections.samples)
        record.update(gang_churn.summary())
        record["gang_problems"] = gang_churn.problems()
        record.update(rotator.summary())
        record.update(churner.summary())
        record.update(log_counts(sched.log_file.read_text(errors="replace")))
        found = problems(record)
        if result.outcome != "complete":
            record["error"] = f"{result.outcome}: {result.bound} of {pods} pods bound" + (
                f"; log tail:\n{sched.log_tail(15)}" if result.outcome == "scheduler exited" else ""
            )
        elif result.create_errors:
            record["error"] = f"{len(result.create_errors)} pod creations failed: {result.create_errors[0]}"
        elif not gangs_done or found:
            record["error"] = f"every pod bound, but {len(found)} problems: " + "; ".join(found[:5])
        else:
            record["complete"] = True
    except Exception as e:  # reported, not raised: the record says what went wrong
        record["error"] = f"{type(e).__name__}: {e}"
    finally:
        for stoppable in (rotator, churner, rss):
            if stoppable is not None:
                with contextlib.suppress(RuntimeError):  # a thread never started
                    stoppable.stop()
        if gang_churn is not None:
            gang_churn.finish(timeout=0)
        if not record["complete"] and sched.component is not None:
            logs = opts.results_dir / "logs" / opts.stamp
            logs.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copy(sched.log_file, logs / f"soak-{sched.log_file.name}")
        try:
            sched.stop()
        finally:
            cluster.down()
            shutil.rmtree(workdir, ignore_errors=True)
        record["loadavg_after"] = _loadavg()
    return record


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def summary(record: dict[str, Any]) -> str:
    """A few lines for the console."""
    memory = record.get("memory") or {}
    parts = []
    for name in ("scheduling", "intake"):
        m = memory.get(name) or {}
        growth = m.get("rss_growth_after_warmup")
        parts.append(
            f"{name} RSS {m.get('rss_start_mib')} -> {m.get('rss_after_warmup_mib')} -> "
            f"{m.get('rss_end_mib')} MiB ({'-' if growth is None else f'{100 * growth:+.1f}%'})"
        )
    conns = record.get("api_connections") or {}
    parts.append(
        f"API connections {conns.get('start')} -> {conns.get('after_warmup')} -> {conns.get('end')} "
        f"(peak {conns.get('peak')})"
    )
    head = "complete" if record["complete"] else f"FAILED: {record['error']}"
    return (
        f"{head}\n    {'; '.join(parts)}\n    pods {record.get('bound')}/{record['pods']} bound, "
        f"gangs {record.get('gangs_bound_whole')}/{record.get('gangs_fitting')} whole "
        f"({record.get('gangs_held')} held), rotations {record.get('rotations')}, reloads "
        f"{record.get('credential_reloads')} (+{record.get('kopf_reauthentications')} Kopf)"
    )


def cmd_soak(args: argparse.Namespace) -> int:
    from bench.__main__ import new_results

    args.results_dir, args.stamp, out_file, document = new_results(args.results_dir)
    print(f"bench soak: {args.minutes:g} min at {args.nodes} nodes; results in {out_file}", flush=True)
    record = run_soak(args)
    document["runs"].append(record)
    document["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    out_file.write_text(json.dumps(document, indent=1) + "\n")
    print(f"    {summary(record)}", flush=True)
    if not args.no_report:
        report.write(args.results_dir, BENCH_DIR / "RESULTS.md")
        print(f"bench: wrote {BENCH_DIR / 'RESULTS.md'}", flush=True)
    return 0 if record["complete"] else 1


def register(sub: Any, results_dir: Path) -> None:
    """The ``soak`` subcommand of ``python -m bench``."""
    p = sub.add_parser("soak", help="kopf-scheduler's memory under pod and gang churn and token rotation")
    p.add_argument("--minutes", type=float, default=10.0, help="how long pods and gangs are made")
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--pod-rate", type=float, default=30.0, help="pods/s created")
    p.add_argument("--pod-lifetime", type=float, default=20.0, help="seconds a pod lives once bound")
    p.add_argument("--gang-interval", type=float, default=3.0, help="seconds between two gangs")
    p.add_argument("--gang-lifetime", type=float, default=20.0, help="seconds a gang lives once bound")
    p.add_argument("--held-every", type=int, default=5, help="every N-th gang cannot fit (0: none)")
    p.add_argument("--rotate-every", type=float, default=30.0, help="seconds between token rotations")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds after the phase to finish binding")
    p.add_argument("--quiet-wait", type=float, default=60.0, help="as for run")
    p.add_argument("--results-dir", default=str(results_dir))
    p.add_argument("--no-report", action="store_true", help="do not regenerate bench/RESULTS.md")
    p.set_defaults(func=cmd_soak)
