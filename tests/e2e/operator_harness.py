"""The operator as users run it, for the e2e tier: ``python -m kopf_scheduler run ...`` in a subprocess
with ``KUBECONFIG`` pointing at the session's control plane; plus blocking helpers that read back what
``kubectl`` would show (pods, conditions, events, profile status, leases), and ``fresh_cluster``, a
control plane of a test's own with kube-controller-manager and exactly the nodes it is given.

Guards:
- every operator runs in its own session (process group) and is tied to the test process
  (PR_SET_PDEATHSIG), its output goes to a log file; ``Operators.stop_all`` stops each one with SIGTERM
  (after a grace period SIGABRT for a stack dump, then SIGKILL) and reaps it, so no process outlives
  its test;
- an operator with metrics and liveness ports is handed back only once it listens on both (read from
  /proc: the sockets are its own); ports are picked free by the kernel, and one taken by another process
  in the meantime (the operator logs ``[Errno 98]``) makes the harness start it again on new ports;
- the lease timings are short (lease 4 s, renew deadline 3 s, retry 0.5 s) so takeovers take seconds;
- a test's objects carry its own run id: namespace, node names, a node label that its pods select, and
  profile and scheduler names. The API server is shared by the whole session, so nothing here assumes
  it holds only one test's objects; ``Scope.cleanup`` deletes what the test created, each kind even when
  deleting another failed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
import yaml

from kopf_scheduler.api.quantity import parse_quantity
from kopf_scheduler.devcluster import DevCluster, audit, create_nodes, find_bin_dir
from kopf_scheduler.devcluster.audit import AuditRecord
from kopf_scheduler.devcluster.cluster import default_crds_dir
from kopf_scheduler.devcluster.harness import ApiError, ClusterHarness, dumps, pod_manifest
from kopf_scheduler.devcluster.nodes import ZONE_LABEL, node_body
from kopf_scheduler.devcluster.processes import free_port

T = TypeVar("T")

#: short leader-election timings (kube-scheduler's defaults are 15 s / 10 s / 2 s)
LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 0.5
#: client-go's jitter: an acquire retry waits retry_period x (1 + up to 1.2)
MAX_ACQUIRE_WAIT = RETRY_PERIOD * 2.2
PROFILES = "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles"
LABEL_KEY = "e2e.kopf-scheduler.dev/run"
PROBLEM = re.compile(r"\[(ERROR|CRITICAL)\s*\]|Traceback \(most recent call last\)")
#: what the operator logs when its metrics or liveness port was taken after ``free_port`` picked it
ADDRESS_IN_USE = "[Errno 98]"
#: how often an operator is started again on new ports after losing one of them to another process
PORT_ATTEMPTS = 5
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
PDBS = "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"


def wait_until(
    check: Callable[[], T | Literal[False] | None], timeout: float, what: str, interval: float = 0.1
) -> T:
    """Poll ``check`` until it returns something truthy (returned); fail naming ``what`` after
    ``timeout`` seconds, with the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}; last seen: {value!r}"[:3000])
        time.sleep(interval)


# -- operator processes ----------------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it if the test process dies without stopping it."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


@dataclass
class OperatorProcess:
    """One ``kopf-scheduler run`` process."""

    name: str
    identity: str
    argv: list[str]
    log_file: Path
    popen: subprocess.Popen[bytes]
    metrics_port: int = 0
    liveness_port: int = 0
    exit_code: int | None = None
    #: True when SIGTERM alone did not stop it within the grace period
    ignored_sigterm: bool = False

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 200) -> str:
        with contextlib.suppress(FileNotFoundError), open(self.log_file, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
        return ""

    def problems(self) -> list[str]:
        """ERROR and CRITICAL lines and tracebacks."""
        return [line for line in self.log().splitlines() if PROBLEM.search(line)]

    def wait_for_log(self, text: str, timeout: float = 20.0) -> None:
        """Until ``text`` appears in the log; fails early, with the log, if the process exits."""
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if not self.alive:
                raise AssertionError(
                    f"operator {self.name} exited with {self.popen.returncode} before logging {text!r}:\n"
                    f"{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"operator {self.name} did not log {text!r} in {timeout} s:\n{self.tail()}"
                )
            time.sleep(0.05)

    def wait_leading(self, timeout: float = 20.0) -> None:
        self.wait_for_log(f"leading as {self.identity}:", timeout)

    def listening_ports(self) -> set[int]:
        """The TCP ports this process listens on: its own sockets (``/proc/<pid>/fd``) matched with the
        kernel's table of listening sockets, so a port some other process serves never counts."""
        inodes = set()
        with contextlib.suppress(FileNotFoundError):
            for fd in Path(f"/proc/{self.popen.pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[len("socket:[") : -1])
        ports = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError), open(table) as f:
                for line in list(f)[1:]:
                    fields = line.split()
                    if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        return ports

    def wait_serving(self, timeout: float = 60.0) -> bool:
        """Until it listens on its metrics and liveness ports (True), or says one was taken (False); fails
        early, with the log, if it exits for another reason."""
        wanted = {self.metrics_port, self.liveness_port} - {0}
        deadline = time.monotonic() + timeout
        while not wanted <= self.listening_ports():
            if ADDRESS_IN_USE in self.log():
                return False
            if not self.alive:
                raise AssertionError(
                    f"operator {self.name} exited with {self.popen.returncode} before serving ports "
                    f"{sorted(wanted)}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"operator {self.name} did not listen on ports {sorted(wanted)} in {timeout} s:\n"
                    f"{self.tail()}"
                )
            time.sleep(0.05)
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.exit_code = self.popen.wait(timeout=10)

    def terminate(self, grace: float = 15.0) -> int | None:
        """SIGTERM, as the kubelet does. Returns the exit code of a graceful exit; None when it was still
        running after ``grace`` seconds: it is then sent SIGABRT, so that Python's faulthandler
        (``PYTHONFAULTHANDLER``) writes every thread's stack to the log, and SIGKILL if that was not the
        end of it either."""
        if not self.alive:
            self.exit_code = self.popen.wait()
            return self.exit_code
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.exit_code = self.popen.wait(timeout=grace)
            return self.exit_code
        except subprocess.TimeoutExpired:
            self.ignored_sigterm = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGABRT)
        try:
            self.exit_code = self.popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        return None


class Operators:
    """Starts operators for one test and stops every one of them at the end."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.started: list[OperatorProcess] = []

    def start(
        self,
        name: str,
        *,
        lease_namespace: str,
        identity: str | None = None,
        ports: bool = False,
        leader_elect: bool = True,
        kubeconfig: Path | None = None,
        env: Mapping[str, str] | None = None,
        args: Iterable[str] = (),
        secure_metrics: bool = False,
        one_process: bool = False,
    ) -> OperatorProcess:
        """Start ``kopf-scheduler run`` with leader election in ``lease_namespace``. ``identity`` (default:
        ``name``) is the lease holder identity and the events' reporting instance (``POD_NAME``, as the
        downward API would set it). ``ports``: serve metrics and liveness on free ports (else 0: off); it
        is then returned once it listens on both; metrics are plain HTTP on loopback (``--insecure-metrics``)
        unless ``secure_metrics`` (HTTPS, delegated authentication and authorization, as deployed).
        ``kubeconfig``: another identity than the session's admin. ``one_process``: run it as ``kopf run -m
        kopf_scheduler.handlers`` instead (the watches in the scheduling process), configured by
        ``KOPF_SCHEDULER_*`` variables; ``args`` are then Kopf's."""
        spawn = functools.partial(
            self._spawn,
            name,
            identity or name,
            lease_namespace=lease_namespace,
            leader_elect=leader_elect,
            kubeconfig=kubeconfig,
            env=env,
            args=list(args) if secure_metrics or one_process else ["--insecure-metrics", *args],
            one_process=one_process,
        )
        if not ports:
            return spawn(0, 0)
        for attempt in range(PORT_ATTEMPTS):
            # free a moment ago, but another process may bind either port before the operator does
            process = spawn(free_port(), free_port())
            if process.wait_serving():
                return process
            process.terminate()
            self.started.remove(process)
            process.log_file.rename(process.log_file.with_suffix(f".port-taken-{attempt}.log"))
        raise AssertionError(f"operator {name}: a port was taken {PORT_ATTEMPTS} times in a row")

    def _spawn(
        self,
        name: str,
        identity: str,
        metrics_port: int,
        liveness_port: int,
        *,
        lease_namespace: str,
        leader_elect: bool,
        kubeconfig: Path | None,
        env: Mapping[str, str] | None,
        args: list[str],
        one_process: bool = False,
    ) -> OperatorProcess:
        argv = [
            sys.executable, "-m", "kopf", "run", "-m", "kopf_scheduler.handlers", "-A", "--standalone",
            *([f"--liveness=http://0.0.0.0:{liveness_port}/healthz"] if liveness_port else []),
            *args,
        ] if one_process else [
            sys.executable, "-m", "kopf_scheduler", "run",
            "--metrics-port", str(metrics_port),
            "--liveness-port", str(liveness_port),
            "--lease-namespace", lease_namespace,
            "--leader-elect", "true" if leader_elect else "false",
            *args,
        ]  # fmt: skip
        environment = {
            k: v for k, v in os.environ.items() if not k.startswith("KOPF_SCHEDULER_") and k != "POD_NAME"
        }
        environment.update(
            KUBECONFIG=str(kubeconfig or self.kubeconfig),
            KOPF_SCHEDULER_LEASE_DURATION=str(LEASE_DURATION),
            KOPF_SCHEDULER_RENEW_DEADLINE=str(RENEW_DEADLINE),
            KOPF_SCHEDULER_RETRY_PERIOD=str(RETRY_PERIOD),
            KOPF_SCHEDULER_IDENTITY=identity,
            POD_NAME=identity,
            PYTHONUNBUFFERED="1",
            PYTHONFAULTHANDLER="1",  # stacks in the log if it has to be aborted (see terminate)
        )
        if one_process:  # what ``kopf-scheduler run`` would set from its flags
            environment.update(
                KOPF_SCHEDULER_METRICS_PORT=str(metrics_port),
                KOPF_SCHEDULER_INSECURE_METRICS="true",
                KOPF_SCHEDULER_LEASE_NAMESPACE=lease_namespace,
                KOPF_SCHEDULER_LEADER_ELECT="true" if leader_elect else "false",
            )
        environment.update(env or {})
        log_file = self.workdir / f"operator-{name}.log"
        with open(log_file, "ab") as log:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,  # no checkout on sys.path: the installed package runs
                env=environment,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        process = OperatorProcess(name, identity, argv, log_file, popen, metrics_port, liveness_port)
        self.started.append(process)
        return process

    def stop_all(self) -> list[str]:
        """SIGTERM each running operator (see ``terminate``); returns the names of those still running
        after the grace period."""
        for process in self.started:
            process.terminate()
        return [p.name for p in self.started if p.ignored_sigterm]

    def report(self, lines: int = 300) -> list[tuple[str, str]]:
        """(title, log tail) per operator, for a failed test's report."""
        return [
            (f"operator {p.name} ({p.identity}), last {lines} lines of {p.log_file}", p.tail(lines))
            for p in self.started
        ]


OPERATORS_KEY = pytest.StashKey[Operators]()


# -- a test's own objects --------------------------------------------------------------------------------


@dataclass
class Scope:
    """A test's run id, namespace, node label and names; ``cleanup`` deletes what it created."""

    cp: ClusterHarness
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    namespace: str = ""
    profiles: list[str] = field(default_factory=list)
    #: more namespaces of this test (``create_namespace``): their pods and budgets are deleted too
    namespaces: list[str] = field(default_factory=list)
    #: other objects to delete, by API path (``delete_later``)
    paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.namespace:
            self.namespace = self.cp.create_namespace(f"op-{self.run}")

    def create_namespace(self, what: str) -> str:
        """Another namespace of this test (``<what>-<random>``), cleaned up as its own."""
        name = self.cp.create_namespace(what)
        self.namespaces.append(name)
        return name

    def delete_later(self, path: str) -> str:
        """Delete the object at ``path`` at cleanup (registered before it is created, so that a failing
        create or assertion cannot leave it behind); returns the path."""
        self.paths.append(path)
        return path

    @property
    def label(self) -> dict[str, str]:
        """The label on this test's nodes (its pods select it)."""
        return {LABEL_KEY: self.run}

    def name(self, what: str) -> str:
        """A cluster-wide unique name for this test (nodes, profiles, schedulerNames)."""
        return f"e2e-{self.run}-{what}"

    # nodes

    def nodes(
        self, count: int, what: str = "node", *, labels: Mapping[str, str] | None = None, **resources: str
    ) -> list[str]:
        """``count`` fake Ready nodes ``e2e-<run>-<what>-<i>`` with this test's label (plus ``labels``);
        ``resources`` override capacity = allocatable (cpu 4, memory 32Gi, pods 110)."""
        template: dict[str, Any] = {"metadata": {"labels": {**self.label, **(labels or {})}}}
        if resources:
            template["status"] = {"capacity": dict(resources), "allocatable": dict(resources)}
        result = asyncio.run(
            create_nodes(self.cp.api, count, prefix=f"{self.name(what)}-", template=template, concurrency=16)
        )
        return result.names

    def all_node_names(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.cp.get("/api/v1/nodes")["items"]]

    # pods

    def pod(
        self,
        name: str,
        scheduler_name: str = "kopf-scheduler",
        *,
        requests: dict[str, str] | None = None,
        selector: Mapping[str, str] | None = None,
        **spec: Any,
    ) -> dict[str, Any]:
        """A pause pod of this test: ``scheduler_name``, selecting this test's nodes (or ``selector``)."""
        return pod_manifest(
            name,
            self.namespace,
            requests=requests or {"cpu": "100m", "memory": "100Mi"},
            schedulerName=scheduler_name,
            nodeSelector=dict(selector if selector is not None else self.label),
            **spec,
        )

    def create_pod(self, name: str, scheduler_name: str = "kopf-scheduler", **options: Any) -> dict[str, Any]:
        return dict(
            self.cp.post(
                f"/api/v1/namespaces/{self.namespace}/pods", self.pod(name, scheduler_name, **options)
            )
        )

    def create_pods(self, bodies: list[dict[str, Any]], concurrency: int = 16) -> float:
        """Create many pods concurrently; returns the seconds it took."""
        return asyncio.run(
            post_all(self.cp, f"/api/v1/namespaces/{self.namespace}/pods", bodies, concurrency)
        )

    def get_pod(self, name: str) -> dict[str, Any]:
        return dict(self.cp.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}"))

    def pods(self) -> dict[str, dict[str, Any]]:
        items = self.cp.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def unbound(self) -> list[str]:
        """Names of this test's pods without spec.nodeName (a field selector: cheap with many pods)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%3D"
        return [p["metadata"]["name"] for p in self.cp.get(path)["items"]]

    def bound(self) -> list[str]:
        """Names of this test's pods with spec.nodeName."""
        path = f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%21%3D"
        return [p["metadata"]["name"] for p in self.cp.get(path)["items"]]

    def wait_bound(self, name: str, timeout: float = 15.0) -> dict[str, Any]:
        return wait_until(
            lambda: (pod := self.get_pod(name))["spec"].get("nodeName") and pod,
            timeout,
            f"pod {self.namespace}/{name} bound",
        )

    def wait_all_bound(self, timeout: float) -> None:
        wait_until(lambda: not self.unbound(), timeout, f"every pod in {self.namespace} bound", interval=0.3)

    # events (the core/v1 view, what `kubectl describe pod` and `kubectl get events` show)

    def events(self, reason: str | None = None, pod: str | None = None) -> list[dict[str, Any]]:
        items = self.cp.get(f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return [
            e
            for e in items
            if (reason is None or e.get("reason") == reason)
            and (pod is None or e["involvedObject"].get("name") == pod)
        ]

    def wait_event(self, reason: str, pod: str, timeout: float = 15.0) -> dict[str, Any]:
        events = wait_until(
            lambda: self.events(reason, pod), timeout, f"a {reason} event for {self.namespace}/{pod}"
        )
        return events[-1]

    # SchedulingProfiles

    def create_profile(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        self.profiles.append(name)
        body = {
            "apiVersion": "kopf-scheduler.io/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": name},
            "spec": spec,
        }
        return dict(self.cp.post(PROFILES, body))

    def cleanup(self) -> None:
        """Delete this test's pods, budgets, PodGroups and leases, its nodes, profiles and the objects
        registered with ``delete_later``; every step is tried even when one before failed (the first
        failure is raised at the end). The namespaces stay: without a namespace controller a deleted
        namespace would stay Terminating anyway."""
        cp = self.cp
        steps: list[Callable[[], object]] = []
        for ns in (self.namespace, *self.namespaces):
            steps += [
                functools.partial(
                    cp.request, "DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}
                ),
                functools.partial(cp.request, "DELETE", PDBS.format(namespace=ns), expect=(200,)),
                # 404: a cluster without the PodGroup CRD
                functools.partial(cp.request, "DELETE", PODGROUPS.format(namespace=ns), expect=(200, 404)),
            ]
        steps.append(functools.partial(cp.request, "DELETE", LEASES.format(namespace=self.namespace)))
        steps.append(
            functools.partial(cp.request, "DELETE", f"/api/v1/nodes?labelSelector={LABEL_KEY}%3D{self.run}")
        )
        steps += [functools.partial(cp.delete, f"{PROFILES}/{name}") for name in self.profiles]
        steps += [functools.partial(cp.delete, path) for path in reversed(self.paths)]
        failures: list[Exception] = []
        for step in steps:
            try:
                _retry_busy(step)
            except Exception as e:  # the others still run
                failures.append(e)
        if failures:
            raise failures[0]


def _retry_busy(step: Callable[[], object], timeout: float = 30.0) -> None:
    """Run ``step``, again while the API server answers 429 (a custom resource's storage is still
    initializing just after the control plane came up)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            step()
            return
        except ApiError as e:
            if "HTTP 429" not in str(e) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


# -- a control plane of a test's own --------------------------------------------------------------------


def sized_nodes(
    sizes: Mapping[str, tuple[str | None, str, str]],
) -> list[dict[str, Any]]:
    """Fake Ready nodes, one per ``name: (zone, cpu, memory)`` (110 pods each, capacity = allocatable), in
    that order. A name ends in its position (``b-medium-1`` is the second), as ``dev-cluster nodes``
    names them; a zone of None leaves the default one (``zone-<position mod 3>``)."""
    bodies = []
    for index, (name, (zone, cpu, memory)) in enumerate(sizes.items()):
        prefix, _, number = name.rpartition("-")
        assert number == str(index), f"node {name!r} is number {index}: its name must end in -{index}"
        resources = {"cpu": cpu, "memory": memory, "pods": "110"}
        template: dict[str, Any] = {"status": {"capacity": resources, "allocatable": resources}}
        if zone is not None:
            template["metadata"] = {"labels": {ZONE_LABEL: zone}}
        bodies.append(node_body(index, prefix=f"{prefix}-", template=template))
    return bodies


@contextlib.contextmanager
def fresh_cluster(
    state_dir: Path,
    nodes: Iterable[dict[str, Any]] = (),
    namespaces: Iterable[str] = (),
    objects: Iterable[tuple[str, dict[str, Any]]] = (),
    *,
    controller_manager: bool = True,
    bin_dir: Path | None = None,
    apiserver_args: Sequence[str] = (),
) -> Iterator[ClusterHarness]:
    """A control plane of the caller's own: etcd, kube-apiserver (the CRDs applied) and, unless
    ``controller_manager`` is false, kube-controller-manager, holding exactly ``nodes``, the
    ``namespaces`` and the ``objects`` (``(collection path, body)``, created in order); its binaries from
    ``bin_dir`` when given (another kube-scheduler among them); ``apiserver_args`` added to kube-apiserver's
    flags (an API it does not serve by default). Comparisons of two schedulers run each on
    such a cluster, identical and fresh, one after the other (``side_by_side``); everything is stopped on
    exit, also when the session ends without it."""
    cluster = DevCluster(
        state_dir,
        bin_dir=bin_dir,
        crds_dir=default_crds_dir(),
        die_with_parent=True,
        with_controller_manager=controller_manager,
        apiserver_args=apiserver_args,
    )
    atexit.register(cluster.down)
    try:
        try:
            cluster.up()
        except Exception as e:  # ClusterError carries the failing component's log tail
            pytest.fail(f"control plane did not come up: {e}", pytrace=False)
        cp = ClusterHarness.of(cluster)
        for node in nodes:
            cp.post("/api/v1/nodes", node)
        for namespace in namespaces:
            cp.post(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
        for path, body in objects:
            cp.post(path, body)
        yield cp
    finally:
        cluster.down()
        atexit.unregister(cluster.down)


async def post_all(cp: ClusterHarness, path: str, bodies: list[dict[str, Any]], concurrency: int) -> float:
    started = time.monotonic()
    errors: list[str] = []
    async with cp.api.session(concurrency) as session:
        pending = iter(bodies)

        async def worker() -> None:
            for body in pending:
                async with session.post(path, data=json.dumps(body).encode()) as resp:
                    if resp.status != 201:
                        errors.append(f"{body['metadata']['name']}: HTTP {resp.status}: {await resp.text()}")

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(bodies))))))
    assert not errors, "; ".join(errors[:3])
    return time.monotonic() - started


# -- reading objects as kubectl shows them ------------------------------------------------------------


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The status condition of type ``kind`` ({} when absent)."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return {}


def pod_outcome(cp: ClusterHarness, namespace: str, name: str) -> str:
    """The pod's node, or ``unschedulable: <message>`` once its PodScheduled condition is False with a
    message; "" until either."""
    pod = cp.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    scheduled = condition(pod, "PodScheduled")
    if scheduled.get("status") == "False" and scheduled.get("message"):
        return f"unschedulable: {scheduled['message']}"
    return str(pod["spec"].get("nodeName") or "")


def get_profile(cp: ClusterHarness, name: str) -> dict[str, Any]:
    return dict(cp.get(f"{PROFILES}/{name}"))


def wait_profile(
    cp: ClusterHarness, name: str, accepted: str, timeout: float = 10.0, reason: str | None = None
) -> dict[str, Any]:
    """Until the profile's ``Accepted`` condition has ``accepted`` status (and ``reason``) for its current
    generation; returns the profile."""

    def check() -> dict[str, Any] | None:
        profile = get_profile(cp, name)
        c = condition(profile, "Accepted")
        if (
            c.get("status") == accepted
            and c.get("observedGeneration") == profile["metadata"]["generation"]
            and (reason is None or c.get("reason") == reason)
        ):
            return profile
        return None

    try:
        return wait_until(check, timeout, f"SchedulingProfile {name} Accepted={accepted}")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{dumps(get_profile(cp, name))}") from None


def admin_kubeconfig(cp: ClusterHarness, scope: Scope, user: str) -> Path:
    """A kubeconfig of the dev user ``user``, who may do anything until the test ends (cluster-admin), so
    that the audit log tells this identity's requests apart."""
    name = scope.name(f"admin-{user}")
    scope.delete_later(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")
    cp.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    return cp.cluster.user_kubeconfig(user)


def kubeconfig_token(kubeconfig: Path) -> str:
    return str(yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"])


def over_allocatable(cp: ClusterHarness, scope: Scope) -> dict[str, str]:
    """The nodes whose bound pods of this test request more CPU or more pods than the node's allocatable
    (node -> what is over), read from the API server: empty when none is."""
    cpu: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for pod in scope.pods().values():
        node = pod["spec"].get("nodeName")
        if node:
            count[node] += 1
            cpu[node] += sum(
                float(parse_quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")))
                for c in pod["spec"]["containers"]
            )
    over: dict[str, str] = {}
    for node in cp.get("/api/v1/nodes")["items"]:
        name, allocatable = node["metadata"]["name"], node["status"]["allocatable"]
        if cpu[name] > float(parse_quantity(allocatable["cpu"])):
            over[name] = f"cpu {cpu[name]} > {allocatable['cpu']}"
        elif count[name] > int(allocatable["pods"]):
            over[name] = f"pods {count[name]} > {allocatable['pods']}"
    return over


def bind_latencies(records: Iterable[AuditRecord], namespace: str, names: Iterable[str]) -> list[float]:
    """Seconds from each pod's creation (received by the API server) to its successful binding (answered),
    from the audit log, for the pods ``names`` in ``namespace``; sorted."""
    wanted = set(names)
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    for r in records:
        if r.namespace != namespace or r.name not in wanted or not r.succeeded or r.resource != "pods":
            continue
        if r.verb == "create" and not r.subresource:
            created[r.name] = r.received.timestamp()
        elif r.is_binding:
            bound[r.name] = r.completed.timestamp()
    assert created.keys() == bound.keys() == wanted, sorted(wanted - (created.keys() & bound.keys()))[:10]
    return sorted(bound[n] - created[n] for n in wanted)


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (nearest rank)."""
    return values[min(len(values), max(1, math.ceil(q * len(values)))) - 1]


def lease(cp: ClusterHarness, namespace: str) -> dict[str, Any]:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/kopf-scheduler"
    resp = cp.api.request("GET", path)
    return dict(resp.json()) if resp.status == 200 else {}


def holder(cp: ClusterHarness, namespace: str) -> str:
    return str((lease(cp, namespace).get("spec") or {}).get("holderIdentity") or "")


def binding_requests(cp: ClusterHarness) -> dict[str, int]:
    """The API server's own count of ``POST pods/binding`` requests by response code, from its
    ``apiserver_request_total`` metric: the ground truth on how often anything tried to bind."""
    counts: dict[str, int] = {}
    text = cp.api.request("GET", "/metrics", timeout=30).text()
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'subresource="binding"' in line:
            labels, _, value = line.rpartition(" ")
            if 'verb="POST"' in labels and 'resource="pods"' in labels:
                code = re.search(r'code="(\d+)"', labels)
                if code:
                    counts[code.group(1)] = counts.get(code.group(1), 0) + int(float(value))
    return counts


def delta(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {
        k: after.get(k, 0) - before.get(k, 0)
        for k in set(after) | set(before)
        if after.get(k, 0) != before.get(k, 0)
    }


def kubectl(
    cp: ClusterHarness,
    *args: str,
    input: str | None = None,
    check: bool = True,
    kubeconfig: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """The kubectl from the control-plane build, against the session's cluster (as its admin, or as
    ``kubeconfig`` says)."""
    argv = [str(find_bin_dir() / "kubectl"), f"--kubeconfig={kubeconfig or cp.kubeconfig}", *args]
    result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=120, check=False)
    if check and result.returncode != 0:
        raise AssertionError(
            f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stdout}{result.stderr}"
        )
    return result


def settled_audit(cp: ClusterHarness, namespace: str, timeout: float = 15.0) -> list[AuditRecord]:
    """The audit log once it holds every request answered so far. The API server writes a request's
    record when its response is complete, so a request just answered (a binding whose pod a test already
    sees bound) may not be in the log yet: a barrier write is made now (an annotation on ``namespace``)
    and the log is read until the barrier's record is in it."""
    path = f"/api/v1/namespaces/{namespace}"

    def barriers(records: list[AuditRecord]) -> int:
        return sum(
            1 for r in records if r.verb == "patch" and r.resource == "namespaces" and r.name == namespace
        )

    before = barriers(audit.read(cp.cluster.audit_log))
    marker = {"metadata": {"annotations": {"e2e.kopf-scheduler.dev/audit-barrier": uuid.uuid4().hex}}}
    response = cp.api.request("PATCH", path, marker, content_type="application/merge-patch+json")
    assert response.status == 200, response.text()
    return wait_until(
        lambda: (records := audit.read(cp.cluster.audit_log)) and barriers(records) > before and records,
        timeout,
        f"the audit barrier on namespace {namespace} in the log",
    )


def bind_as_extender(cp: ClusterHarness, args: Mapping[str, Any]) -> None:
    """What an honest bind verb does with its ``ExtenderBindingArgs``: POST the pod's binding."""
    cp.post(
        f"/api/v1/namespaces/{args['PodNamespace']}/pods/{args['PodName']}/binding",
        {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": args["PodName"], "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": args["Node"]},
        },
    )
