"""``python -m bench failover``: start-up and failover of a scheduler with leader election, side by side.

One run = one scheduler (kube-scheduler or kopf-scheduler) at one size, on a fresh API server and etcd
populated like MemoryAtScale (its nodes and bound pods) plus ``pending`` pods created before any
scheduler starts:

1. **Start-up.** Replica ``a`` starts (leader election on; the Lease is free, so it leads at once).
   From its process's start: to ready (kube-scheduler's ``/readyz``; kopf-scheduler's initial lists
   loaded), to the first pending pod a pod watch sees bound, and to the last. Then one more pod is
   created, and the time it takes to be bound says whether the scheduler's watch is live yet (its
   creation and binding are counted from the process's start too).
2. **Failover.** Replica ``b`` starts and stands by (ready, not leading); pods are created at ``rate``
   pods/s for ``seconds``; once ``kill_after`` of them are bound, the leader's process group gets
   SIGKILL (no chance to release the Lease). The Lease the standby then writes gives the moment it
   took over (``acquireTime``, the API server's record); the first binding the watch sees from then on is
   the standby's (a binding the leader sent just before it died is seen earlier, and counted apart).

Both schedulers use the same Lease timings, kube-scheduler's defaults: 15 s lease, 10 s renew deadline,
2 s retry period; each its own Lease (``kube-system/kube-scheduler``, ``kube-system/kopf-scheduler``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench import apimetrics, report, schedulers
from bench.loadgen import Measurement, PodLoad
from bench.runner import _encode, _loadavg, _post_all, populate, source_digest, up, wait_idle, wait_quiet
from bench.sampling import summarize
from bench.workloads import MEASURED_NAMESPACE, WORKLOADS, default_pod
from kopf_scheduler.devcluster import ApiClient, DevCluster
from kopf_scheduler.devcluster.cluster import default_crds_dir, scheduler_config
from kopf_scheduler.devcluster.processes import free_port, spawn

#: the cluster every run starts from: MemoryAtScale's nodes and bound pods
WORKLOAD = "MemoryAtScale"
SIZES = tuple(WORKLOADS[WORKLOAD].sizes)
MODE = "failover"
LEASE_NAMESPACE = "kube-system"
#: kube-scheduler's defaults (seconds), given to both schedulers explicitly
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 15.0, 10.0, 2.0
KINDS = (schedulers.KUBE_SCHEDULER, schedulers.KOPF_SCHEDULER)
#: seconds between reads of the Lease after the kill (its acquireTime, not this, times the takeover)
LEASE_POLL = 0.25
BENCH_DIR = Path(__file__).resolve().parent


class KubeReplica(schedulers.Scheduler):
    """kube-scheduler v1.37.2 with leader election, a process of its own (``DevCluster`` runs one)."""

    kind = schedulers.KUBE_SCHEDULER
    scheduler_name = "default-scheduler"
    lease_name = "kube-scheduler"

    def __init__(self, cluster: DevCluster, workdir: Path, name: str) -> None:
        super().__init__(cluster, workdir)
        self.name = name
        self.url = ""

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.kind}-{self.name}.log"

    def start(self, timeout: float = 180.0) -> None:
        port = free_port()
        config = self.workdir / f"{self.kind}-{self.name}.yaml"
        body = scheduler_config(self.cluster.kubeconfig, {"leaderElection": self.leader_election()})
        config.write_text(yaml.safe_dump(body, sort_keys=False))
        argv = [
            str(self.cluster.bin_dir / "kube-scheduler"),
            f"--config={config}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        ]
        self.url = f"https://127.0.0.1:{port}"
        self.component = spawn(f"{self.kind}-{self.name}", argv, self.log_file, die_with_parent=True)
        self._wait(self._ready, timeout, "ready")

    def leader_election(self) -> dict[str, Any]:
        """``leaderElection`` of its KubeSchedulerConfiguration."""
        return {
            "leaderElect": True,
            "leaseDuration": f"{LEASE_DURATION:g}s",
            "renewDeadline": f"{RENEW_DEADLINE:g}s",
            "retryPeriod": f"{RETRY_PERIOD:g}s",
            "resourceLock": "leases",
            "resourceName": self.lease_name,
            "resourceNamespace": LEASE_NAMESPACE,
        }

    def _ready(self) -> bool:
        try:
            return schedulers.http_get(self.url + "/readyz", timeout=2.0).strip() == "ok"
        except OSError:
            return False

    def leading(self) -> bool | None:
        text = self.metrics()
        if "leader_election_master_status" not in text:
            return None
        return apimetrics.metric_sum(text, "leader_election_master_status", {"name": self.lease_name}) > 0

    def metrics(self) -> str:
        try:
            return schedulers.http_get(self.url + "/metrics")
        except OSError:
            return ""


class KopfReplica(schedulers.KopfScheduler):
    """``kopf-scheduler run --leader-elect true`` with the same Lease timings; ready once its initial
    lists are loaded, leading or not."""

    lease_name = "kopf-scheduler"

    def __init__(self, cluster: DevCluster, workdir: Path, name: str) -> None:
        super().__init__(cluster, workdir)
        self.name = name
        self.leader_election = [
            "--leader-elect", "true",
            "--leader-elect-resource-namespace", LEASE_NAMESPACE,
            "--leader-elect-resource-name", self.lease_name,
            "--leader-elect-lease-duration", f"{LEASE_DURATION:g}s",
            "--leader-elect-renew-deadline", f"{RENEW_DEADLINE:g}s",
            "--leader-elect-retry-period", f"{RETRY_PERIOD:g}s",
        ]  # fmt: skip

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.kind}-{self.name}.log"

    def _health(self) -> dict[str, Any]:
        try:
            health = json.loads(schedulers.http_get(f"http://127.0.0.1:{self.liveness_port}/healthz", 2.0))
        except (OSError, ValueError):
            return {}
        return dict(health.get("scheduler") or {})

    def _ready(self) -> bool:
        return bool(self._health().get("synced"))

    def leading(self) -> bool | None:
        state = self._health()
        return bool(state["leading"]) if "leading" in state else None


Replica = KubeReplica | KopfReplica


def make_replica(kind: str, cluster: DevCluster, workdir: Path, name: str) -> Replica:
    return (
        KubeReplica(cluster, workdir, name)
        if kind == schedulers.KUBE_SCHEDULER
        else KopfReplica(cluster, workdir, name)
    )


class Starter(threading.Thread):
    """Starts a replica off the event loop, noting when its process was started and when it was ready;
    the thread then lives until ``release()``, because the process gets SIGTERM when the thread that
    started it ends (``PR_SET_PDEATHSIG`` follows the thread, not the process)."""

    def __init__(self, replica: Replica, timeout: float) -> None:
        super().__init__(name="starter", daemon=True)
        self.replica = replica
        self.timeout = timeout
        self.started: float | None = None
        self.ready: float | None = None
        self.error: str | None = None
        self.up = threading.Event()
        self._release = threading.Event()

    def run(self) -> None:
        self.started = time.monotonic()
        try:
            self.replica.start(self.timeout)
            self.ready = time.monotonic()
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
        self.up.set()
        self._release.wait()

    def release(self) -> None:
        self._release.set()

    def alive(self) -> bool:
        if self.error is not None:
            return False
        return self.replica.component is None or self.replica.alive()


class Killer(threading.Thread):
    """SIGKILLs ``replica``'s process group once ``after`` pods of ``result`` are bound, then reads the
    Lease until another holder has it (``lease``: that record; read before the run ends, since a replica
    that stops releases the Lease and overwrites its ``acquireTime``)."""

    def __init__(self, result: Measurement, replica: Replica, after: int, api: ApiClient) -> None:
        super().__init__(name="killer", daemon=True)
        self.result = result
        self.replica = replica
        self.after = after
        self.api = api
        self.holder = str(read_lease(api, replica.lease_name).get("holderIdentity") or "")
        self.at: float | None = None
        self.at_wall: float | None = None
        self.lease: dict[str, Any] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.02):
            if len(self.result.bound_at) >= self.after:
                self.at, self.at_wall = time.monotonic(), time.time()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.replica.pid, signal.SIGKILL)
                break
        while not self._halt.wait(LEASE_POLL):
            try:
                spec = read_lease(self.api, self.replica.lease_name)
            except OSError:
                continue
            if spec.get("holderIdentity") and spec.get("holderIdentity") != self.holder:
                self.lease = spec
                return

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)


def read_lease(api: ApiClient, name: str) -> dict[str, Any]:
    response = api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{name}")
    return dict(response.json().get("spec") or {}) if response.ok else {}


def micro_time_epoch(value: str) -> float:
    """``metav1.MicroTime`` (``2026-11-29T10:47:27.123456Z``) as seconds since the epoch."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def startup_fields(started: float, ready: float | None, bound: list[float]) -> dict[str, Any]:
    """Seconds from the process's start to ready, to the first pending pod bound and to the last."""
    return {
        "startup_seconds": _r(ready - started if ready is not None else None, 2),
        "first_binding_seconds": _r(min(bound) - started if bound else None, 2),
        "pending_bound_seconds": _r(max(bound) - started if bound else None, 2),
    }


def failover_fields(
    first_seen: dict[str, float], bound_at: dict[str, float], kill: float, acquired: float | None
) -> dict[str, Any]:
    """What the watch saw around the kill (monotonic ``kill``; ``acquired``: when the standby took the
    Lease, on the same clock): bindings in flight from the dead leader (seen before ``acquired``), the
    standby's first binding, and the latency of the pods created before, during and after the gap."""
    after_kill = sorted(t for t in bound_at.values() if t > kill)
    takeover = next((t for t in after_kill if acquired is not None and t >= acquired), None)
    latency = {n: bound_at[n] - first_seen[n] for n in bound_at if n in first_seen}
    before = [v for n, v in latency.items() if first_seen[n] < kill]
    by_leader = [v for n, v in latency.items() if bound_at[n] <= kill]
    unbound = sum(1 for n, t in first_seen.items() if t < kill and bound_at.get(n, kill + 1) > kill)
    gap = [v for n, v in latency.items() if takeover is not None and kill <= first_seen[n] < takeover]
    later = [v for n, v in latency.items() if takeover is not None and first_seen[n] >= takeover]
    backlog = [bound_at[n] for n in bound_at if n in first_seen and takeover and first_seen[n] < takeover]
    return {
        "lease_taken_seconds": _r(acquired - kill if acquired is not None else None),
        "failover_seconds": _r(takeover - kill if takeover is not None else None),
        "bound_in_flight_after_kill": sum(1 for t in after_kill if acquired is None or t < acquired),
        "pods_created_in_gap": len(gap),
        # created before the kill, whoever bound them (the standby, for those the kill left unbound)
        "latency_before_kill_p99_s": _r(summarize(before).get("p99")),
        # the leader's own: bound by the kill; and how many created pods it had not bound then
        "leader_latency_p99_s": _r(summarize(by_leader).get("p99")),
        "unbound_at_kill": unbound,
        "latency_gap_max_s": _r(summarize(gap).get("max")),
        "latency_after_takeover_p99_s": _r(summarize(later).get("p99")),
        "latency_max_s": _r(max(latency.values(), default=None)),
        "backlog_cleared_seconds": _r(max(backlog) - kill if backlog else None),
    }


def run_startup(api: ApiClient, starter: Starter, pending: int, timeout: float) -> dict[str, Any]:
    """Phase 1: the pending pods exist; the replica starts while a pod watch runs."""
    load = PodLoad(api, MEASURED_NAMESPACE, [], [], target=pending)
    result = asyncio.run(load.run(timeout=timeout, alive=starter.alive, on_start=starter.start))
    starter.up.wait(timeout=timeout)
    if starter.error is not None:
        raise RuntimeError(f"start-up: {starter.error}")
    assert starter.started is not None
    out = startup_fields(starter.started, starter.ready, list(result.bound_at.values()))
    out["pending_bound"] = result.bound
    if result.outcome != "complete":
        raise RuntimeError(f"start-up: {result.outcome}: {result.bound} of {pending} pending pods bound")
    return out


def probe_fields(started: float, created: float, bound: float | None) -> dict[str, Any]:
    """Seconds from the process's start to the probe pod's creation, and from its creation to its
    binding (None: not bound in time)."""
    return {
        "probe_created_seconds": _r(created - started, 2),
        "probe_bound_after_seconds": _r(bound - created if bound is not None else None, 2),
    }


def probe_new_pod(api: ApiClient, scheduler_name: str, started: float, timeout: float) -> dict[str, Any]:
    """Creates one pod (``probe``) and polls it until it is bound: a scheduler whose watch is not live yet
    leaves it pending."""
    path = f"/api/v1/namespaces/{MEASURED_NAMESPACE}/pods"
    created = time.monotonic()
    answer = api.request("POST", path, default_pod("probe", MEASURED_NAMESPACE, scheduler_name))
    if not answer.ok:
        raise RuntimeError(f"probe pod: {answer.status} {answer.text()[:200]}")
    bound = None
    while time.monotonic() - created < timeout:
        pod = api.request("GET", f"{path}/probe")
        if pod.ok and (pod.json().get("spec") or {}).get("nodeName"):
            bound = time.monotonic()
            break
        time.sleep(0.1)
    return probe_fields(started, created, bound)


def run_failover(kind: str, opts: Any) -> dict[str, Any]:
    """One run (see the module's docstring); always returns a record (``error`` set when it failed).
    ``opts``: the ``failover`` subcommand's arguments (size, pending, rate, seconds, kill_after,
    timeout, quiet_wait, results_dir) and ``stamp``."""
    workload = WORKLOADS[WORKLOAD]
    shape = workload.shape(opts.size)
    count = round(opts.rate * opts.seconds)
    record: dict[str, Any] = {
        "workload": WORKLOAD,
        "size": opts.size,
        "mode": MODE,
        "scheduler": kind,
        "nodes": shape.nodes,
        "init_pods": shape.init_pods,
        "pending_pods": opts.pending,
        "pods": count,
        "creation_rate": opts.rate,
        "kill_after_bound": opts.kill_after,
        "lease": {"duration_s": LEASE_DURATION, "renew_deadline_s": RENEW_DEADLINE, "retry_s": RETRY_PERIOD},
        "complete": False,
        "error": None,
    }
    record["background_cores_before"] = wait_quiet(opts.quiet_wait)
    record["kopf_scheduler_source"] = source_digest()
    record["loadavg_before"] = _loadavg()
    workdir = Path(tempfile.mkdtemp(prefix="kopf-scheduler-failover-"))
    cluster = DevCluster(workdir / "cluster", crds_dir=default_crds_dir(), die_with_parent=True)
    leader = make_replica(kind, cluster, workdir, "a")
    standby = make_replica(kind, cluster, workdir, "b")
    starter = Starter(leader, opts.timeout)
    record["scheduler_name"] = leader.scheduler_name
    try:
        started = time.monotonic()
        up(cluster)
        api = cluster.client()
        asyncio.run(populate(api, workload, shape, leader.scheduler_name))
        bodies = [
            _encode(default_pod(f"pending-{i}", MEASURED_NAMESPACE, leader.scheduler_name))
            for i in range(opts.pending)
        ]
        asyncio.run(_post_all(api, f"/api/v1/namespaces/{MEASURED_NAMESPACE}/pods", bodies, 64))
        record["setup_seconds"] = round(time.monotonic() - started, 1)

        record.update(run_startup(api, starter, opts.pending, opts.timeout))
        assert starter.started is not None
        record.update(probe_new_pod(api, leader.scheduler_name, starter.started, opts.timeout))
        record["settle_seconds"] = round(wait_idle(leader.pid, leader.alive), 1)
        started = time.monotonic()
        standby.start(opts.timeout)
        record["standby_ready_seconds"] = round(time.monotonic() - started, 2)
        wait_idle(standby.pid, standby.alive)
        record["leading_before"] = {"a": leader.leading(), "b": standby.leading()}
        if record["leading_before"]["a"] is False or record["leading_before"]["b"]:
            raise RuntimeError(f"replica a should lead, b stand by: {record['leading_before']}")
        names = [f"failover-{i}" for i in range(count)]
        pod_bodies = [_encode(default_pod(n, MEASURED_NAMESPACE, leader.scheduler_name)) for n in names]
        load = PodLoad(api, MEASURED_NAMESPACE, names, pod_bodies, rate=opts.rate)
        killer = Killer(load.result, leader, opts.kill_after, api)

        def alive() -> bool:
            return standby.alive() and (killer.at is not None or leader.alive())

        try:
            result = asyncio.run(load.run(timeout=opts.timeout, alive=alive, on_start=killer.start))
        finally:
            killer.stop()
        record["lease_holder_before"] = killer.holder
        record["lease_taken"] = killer.lease
        record["bound"] = result.bound
        record["created"] = result.created
        if killer.at is None or killer.at_wall is None:
            raise RuntimeError(f"the leader was never killed: {result.bound} of {count} pods bound")
        acquired = None
        if killer.lease.get("acquireTime"):
            acquired = killer.at + micro_time_epoch(killer.lease["acquireTime"]) - killer.at_wall
        record.update(failover_fields(result.first_seen, result.bound_at, killer.at, acquired))
        record["leading_after"] = {"b": standby.leading()}
        if result.outcome != "complete":
            record["error"] = f"failover: {result.outcome}: {result.bound} of {count} pods bound"
        elif acquired is None:
            record["error"] = f"the Lease held by {killer.holder!r} was not taken over"
        elif result.create_errors:
            record["error"] = f"{len(result.create_errors)} pod creations failed: {result.create_errors[0]}"
        else:
            record["complete"] = True
    except Exception as e:  # a failed run is reported, not fatal for the others
        record["error"] = f"{type(e).__name__}: {e}"
    finally:
        for replica in (leader, standby):
            if (opts.keep_logs or not record["complete"]) and replica.component is not None:
                logs = opts.results_dir / "logs" / opts.stamp
                logs.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError):
                    shutil.copy(replica.log_file, logs / f"failover-{opts.size}-{replica.log_file.name}")
        try:
            for replica in (leader, standby):
                replica.stop()
            starter.release()
        finally:
            cluster.down()
            shutil.rmtree(workdir, ignore_errors=True)
        record["loadavg_after"] = _loadavg()
    return record


def summary(record: dict[str, Any]) -> str:
    """One line for the console."""
    if not record["complete"]:
        return f"FAILED: {record['error']}"
    return (
        f"ready {record['startup_seconds']} s, first binding {record['first_binding_seconds']} s, "
        f"{record['pending_pods']} pending bound {record['pending_bound_seconds']} s; a pod created at "
        f"{record['probe_created_seconds']} s bound {record['probe_bound_after_seconds']} s later; "
        f"standby ready {record['standby_ready_seconds']} s; "
        f"failover: Lease taken {record['lease_taken_seconds']} s, "
        f"first binding {record['failover_seconds']} s after the kill "
        f"({record['bound_in_flight_after_kill']} in flight), max latency {record['latency_max_s']} s"
    )


def cmd_failover(args: argparse.Namespace) -> int:
    """Each scheduler in turn, the order rotating per repeat; one results file for them all."""
    from bench.__main__ import new_results

    args.results_dir, args.stamp, out_file, document = new_results(args.results_dir)
    order = list(args.scheduler or KINDS)
    runs = [kind for i in range(args.repeat) for kind in order[i % len(order) :] + order[: i % len(order)]]
    print(f"bench failover: {len(runs)} runs at size {args.size}; results in {out_file}", flush=True)
    failed = 0
    for i, kind in enumerate(runs, 1):
        print(f"[{i}/{len(runs)}] start-up and failover ({args.size}) {kind} ...", flush=True)
        record = run_failover(kind, args)
        document["runs"].append(record)
        document["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
        out_file.write_text(json.dumps(document, indent=1) + "\n")
        failed += not record["complete"]
        print(f"    {summary(record)}", flush=True)
    if not args.no_report:
        report.write(args.results_dir, BENCH_DIR / "RESULTS.md")
        print(f"bench: wrote {BENCH_DIR / 'RESULTS.md'}", flush=True)
    return 1 if failed else 0


def register(sub: Any, results_dir: Path) -> None:
    """The ``failover`` subcommand of ``python -m bench``."""
    p = sub.add_parser("failover", help="start-up and failover of two replicas with leader election")
    p.add_argument("--size", choices=SIZES, default="small", help="MemoryAtScale's nodes and bound pods")
    p.add_argument("--scheduler", action="append", choices=KINDS, help="repeatable; default: both")
    p.add_argument("--repeat", type=int, default=1, help="runs of each scheduler")
    p.add_argument("--pending", type=int, default=1000, help="pods created before the scheduler starts")
    p.add_argument("--rate", type=float, default=50.0, help="pods/s created in the failover phase")
    p.add_argument("--seconds", type=float, default=40.0, help="how long the failover phase creates pods")
    p.add_argument("--kill-after", type=int, default=250, help="SIGKILL the leader once this many are bound")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for each phase")
    p.add_argument("--quiet-wait", type=float, default=60.0, help="as for run")
    p.add_argument("--results-dir", default=str(results_dir))
    p.add_argument("--no-report", action="store_true", help="do not regenerate bench/RESULTS.md")
    p.add_argument(
        "--keep-logs",
        action="store_true",
        help="keep both replicas' logs in results/logs (always when a run fails)",
    )
    p.set_defaults(func=cmd_failover)
