"""The three schedulers a workload runs against, each started the way it is run for real and each
stopped for certain (SIGTERM to its process group, SIGKILL after a grace period; tied to this process
with PR_SET_PDEATHSIG as well, so a killed benchmark leaves none behind).

- ``kube-scheduler``: the upstream binary (``DevCluster.start_kube_scheduler``: profile
  ``default-scheduler``, client QPS/burst 5000 as scheduler_perf, no leader election); ready at /readyz.
- ``kopf-scheduler``: ``kopf-scheduler run --leader-elect false`` with ``KUBECONFIG``; ready when its
  liveness probe reports the initial lists synced and the loop running.
- ``raw-binder``: ``python -m bench.raw_binder``: binds pending pods round-robin, no scheduling at all;
  ready when it has listed the nodes and opened its watch.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from kopf_scheduler.devcluster import DevCluster
from kopf_scheduler.devcluster.cluster import SCHEDULER
from kopf_scheduler.devcluster.processes import Component, free_port, log_tail, spawn, stop

KUBE_SCHEDULER = "kube-scheduler"
KOPF_SCHEDULER = "kopf-scheduler"
RAW_BINDER = "raw-binder"
ALL = (KUBE_SCHEDULER, KOPF_SCHEDULER, RAW_BINDER)
STOP_GRACE = 15.0
REPO_ROOT = Path(__file__).resolve().parents[1]


class SchedulerFailed(Exception):
    """A scheduler did not come up or died; the message carries its log tail."""


def http_get(url: str, timeout: float = 5.0) -> str:
    ctx = ssl._create_unverified_context() if url.startswith("https://") else None
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
        return str(resp.read().decode(errors="replace"))


class Scheduler:
    kind = ""
    #: spec.schedulerName of the pods it serves
    scheduler_name = ""

    def __init__(self, cluster: DevCluster, workdir: Path) -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.component: Component | None = None
        #: applied to the environment it starts with (``--profile-format cpu`` sets kopf-scheduler's)
        self.wrap_env: Callable[[dict[str, str]], dict[str, str]] | None = None

    @property
    def pid(self) -> int:
        return self.component.pid if self.component else 0

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.kind}.log"

    def alive(self) -> bool:
        return self.component is not None and self.component.alive()

    def exit_code(self) -> int | None:
        return self.component.exit_code() if self.component else None

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_file, lines) if self.component else ""

    def start(self, timeout: float = 180.0) -> None:
        raise NotImplementedError

    def metrics(self) -> str:
        """Its own Prometheus metrics ('' when it has none or they cannot be read)."""
        return ""

    def stop(self) -> None:
        if self.component is not None:
            stop(self.component, timeout=STOP_GRACE)

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if not self.alive():
                raise SchedulerFailed(
                    f"{self.kind} exited with {self.exit_code()} before {what}; last lines of "
                    f"{self.log_file}:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise SchedulerFailed(f"{self.kind} not {what} after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.1)


class KubeScheduler(Scheduler):
    kind = KUBE_SCHEDULER
    scheduler_name = "default-scheduler"

    @property
    def log_file(self) -> Path:
        return self.cluster.log_file(SCHEDULER)

    def start(self, timeout: float = 180.0) -> None:
        self.cluster.start_kube_scheduler(timeout=timeout)  # waits for /readyz (informers synced)
        self.component = self.cluster.components[SCHEDULER]

    def metrics(self) -> str:
        try:
            return http_get(self.cluster.urls[SCHEDULER] + "/metrics")
        except (OSError, KeyError):
            return ""

    def stop(self) -> None:
        self.cluster.stop_kube_scheduler()


class KopfScheduler(Scheduler):
    kind = KOPF_SCHEDULER
    scheduler_name = "kopf-scheduler"

    def __init__(self, cluster: DevCluster, workdir: Path) -> None:
        super().__init__(cluster, workdir)
        self.metrics_port = 0
        self.liveness_port = 0
        #: ``run``'s leader election flags (``bench.failover`` runs two replicas with it on)
        self.leader_election: list[str] = ["--leader-elect", "false"]
        #: the kubeconfig it runs with (None: the cluster's admin one; ``bench.soak`` gives a
        #: ServiceAccount's, whose token it rotates)
        self.kubeconfig: Path | None = None

    def start(self, timeout: float = 180.0) -> None:
        self.metrics_port, self.liveness_port = free_port(), free_port()
        exe = Path(sys.executable).parent / "kopf-scheduler"
        command = [str(exe)] if exe.exists() else [sys.executable, "-m", "kopf_scheduler"]
        argv = [
            *command, "run",
            *self.leader_election,
            "--metrics-port", str(self.metrics_port),
            "--insecure-metrics",  # as kube-scheduler's /metrics is scraped here: no credentials on loopback
            "--liveness-port", str(self.liveness_port),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("KOPF_SCHEDULER_")}
        env.update(
            KUBECONFIG=str(self.kubeconfig or self.cluster.kubeconfig),
            PYTHONUNBUFFERED="1",
            POD_NAME="kopf-scheduler-bench",
        )
        if self.wrap_env is not None:
            env = self.wrap_env(env)
        self.component = spawn(self.kind, argv, self.log_file, env=env, die_with_parent=True)
        self._wait(self._ready, timeout, "synced and leading")

    def _ready(self) -> bool:
        try:
            health = json.loads(http_get(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2.0))
        except (OSError, ValueError):
            return False
        state = health.get("scheduler") or {}
        return bool(state.get("synced") and state.get("leading"))

    def metrics(self) -> str:
        try:
            return http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        except OSError:
            return ""


class RawBinder(Scheduler):
    kind = RAW_BINDER
    scheduler_name = "raw-binder"
    concurrency = 128

    def start(self, timeout: float = 180.0) -> None:
        argv = [
            sys.executable, "-m", "bench.raw_binder",
            "--kubeconfig", str(self.cluster.kubeconfig),
            "--scheduler-name", self.scheduler_name,
            "--concurrency", str(self.concurrency),
        ]  # fmt: skip
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        self.component = spawn(self.kind, argv, self.log_file, env=env, die_with_parent=True)
        self._wait(lambda: "raw-binder ready" in log_tail(self.log_file, 5), timeout, "ready")


def make(kind: str, cluster: DevCluster, workdir: Path) -> Scheduler:
    return {KUBE_SCHEDULER: KubeScheduler, KOPF_SCHEDULER: KopfScheduler, RAW_BINDER: RawBinder}[kind](
        cluster, workdir
    )
