"""`DevCluster`: a real etcd + kube-apiserver on loopback, optionally with the upstream kube-scheduler and
kube-controller-manager.

The state directory holds everything a cluster needs and is the only handle on it: ``state.json``
(pids, command lines, URLs, token), ``pki/``, ``kubeconfig``, one log file per component (and
kube-controller-manager's ``flexvolume/``). Any process can therefore attach to a running cluster
(``DevCluster(state_dir).status()``) and stop it (``down()``).
Invariants: a component is recorded in state.json as soon as it is spawned, so ``down`` always finds it;
if ``up`` fails half-way it stops what it started before raising.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import kubeconfig, pki
from kopf_scheduler.devcluster.apiclient import ApiClient, probe
from kopf_scheduler.devcluster.binaries import find_bin_dir, require
from kopf_scheduler.devcluster.processes import (
    Component,
    free_port,
    log_tail,
    path_in_use,
    spawn,
    stop,
    wait_until,
)

ETCD = "etcd"
APISERVER = "kube-apiserver"
SCHEDULER = "kube-scheduler"
CONTROLLER_MANAGER = "kube-controller-manager"
#: start order; `down` stops them in reverse
COMPONENTS = (ETCD, APISERVER, SCHEDULER, CONTROLLER_MANAGER)
#: kube-controller-manager's controllers left off, and why:
#: - nodelifecycle: no kubelet heartbeats the fake nodes, so it would mark each one NotReady after its
#:   grace period, taint it (not-ready/unreachable NoSchedule and NoExecute) and evict its pods;
#: - serviceaccount-token: it mints token Secrets for ServiceAccounts; this cluster runs without the
#:   ServiceAccount admission plugin, so no pod mounts one (without a private-key flag it would only
#:   skip itself, so switching it off says so in the command line).
CONTROLLERS_OFF = ("nodelifecycle", "serviceaccount-token")
#: kube-controller-manager's /healthz answers 200 as soon as it listens; the per-controller checks
#: ("[+]deployment-controller ok", ...) are added in one go once every controller has been started
CONTROLLERS_STARTED_MARK = "-controller ok"
#: in the state dir: kube-controller-manager's flex volume plugin dir (it creates the dir at start-up)
FLEX_VOLUME_DIR = "flexvolume"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
STATE_FILE = "state.json"
ETCD_DIR_PREFIX = "kopf-scheduler-etcd-"


def default_state_dir() -> Path:
    """``${XDG_RUNTIME_DIR:-/tmp}/kopf-scheduler/dev-cluster``."""
    return Path(os.environ.get("XDG_RUNTIME_DIR") or "/tmp") / "kopf-scheduler" / "dev-cluster"


def default_crds_dir() -> Path | None:
    """The repository's ``crds/`` folder when running from a source checkout, else None. The dev cluster
    applies it with its subfolders: the SchedulingProfile CRD and ``podgroup/`` (gang scheduling)."""
    candidate = Path(__file__).resolve().parents[3] / "crds"
    return candidate if candidate.is_dir() else None


AUDIT_POLICY_FILE = "audit-policy.yaml"
AUDIT_LOG_FILE = "audit.log"
# Writes at Metadata level (who, what, when, answer), reads not at all: enough to check who bound or
# deleted which pod when, at a cost a 10,000-pod benchmark does not notice.
AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "verbs": ["get", "list", "watch"]},
        {"level": "Metadata"},
    ],
}


class ClusterError(Exception):
    """A component did not come up (or misbehaved); the message carries the tail of its log."""


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    alive: bool
    log_file: Path
    url: str


class DevCluster:
    """A local control plane rooted in ``state_dir``; see the module docstring."""

    def __init__(
        self,
        state_dir: Path | str | None = None,
        *,
        bin_dir: Path | None = None,
        crds_dir: Path | None = None,
        startup_timeout: float = 120.0,
        die_with_parent: bool = False,
        with_controller_manager: bool = False,
        audit: bool = True,
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self._bin_dir = bin_dir
        self.crds_dir = crds_dir
        self.startup_timeout = startup_timeout
        # True for test fixtures: the components die with this process even if it is killed.
        self.die_with_parent = die_with_parent
        # `up` also starts kube-controller-manager (Deployments, ReplicaSets, GC, PDB status, PV binding...).
        self.with_controller_manager = with_controller_manager
        # kube-apiserver writes every write request (not reads) to `audit_log` (see `devcluster.audit`).
        self.audit = audit
        # laid after kube-apiserver's own flags (``--runtime-config``, ``--feature-gates``, ...)
        self.apiserver_args = list(apiserver_args)
        self.user_tokens: dict[str, str] = {}
        self.components: dict[str, Component] = {}
        self.urls: dict[str, str] = {}
        self.token = ""
        self.etcd_data_dir: Path | None = None
        self.timings: dict[str, float] = {}
        self._load()

    # -- paths and credentials ---------------------------------------------------------------------

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = find_bin_dir()
        return self._bin_dir

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.state_dir / AUDIT_LOG_FILE

    def user_kubeconfig(self, user: str) -> Path:
        """A kubeconfig for one of the ordinary users (`pki.DEV_USERS`), who can do nothing until a test
        binds a role to them; written next to the admin's on first use."""
        token = self.user_tokens.get(user)
        if token is None:
            raise UsageError(f"no dev-cluster user {user!r}; the users are {', '.join(self.user_tokens)}")
        path = self.state_dir / f"kubeconfig-{user}"
        if not path.exists():
            kubeconfig.write(
                path, kubeconfig.build(self.server, self.ca_file.read_bytes(), token, name=f"dev-{user}")
            )
        return path

    @property
    def ca_file(self) -> Path:
        return self.state_dir / "pki" / "ca.crt"

    @property
    def server(self) -> str:
        return self.urls.get(APISERVER, "")

    def client(self) -> ApiClient:
        if not self.server:
            raise UsageError(
                f"no dev cluster recorded in {self.state_dir}; run `kopf-scheduler dev-cluster up`"
            )
        return ApiClient(server=self.server, token=self.token, ca_file=self.ca_file)

    def log_file(self, component: str) -> Path:
        return self.state_dir / f"{component}.log"

    def log_tail(self, component: str, lines: int = 40) -> str:
        return log_tail(self.log_file(component), lines)

    # -- state file --------------------------------------------------------------------------------

    def _load(self) -> None:
        path = self.state_dir / STATE_FILE
        if not path.exists():
            return
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise UsageError(f"{path}: unreadable dev-cluster state ({e}); remove {self.state_dir}") from None
        self.components = {c["name"]: Component.from_json(c) for c in data.get("components", [])}
        self.urls = dict(data.get("urls", {}))
        self.token = data.get("token", "")
        self.user_tokens = dict(data.get("user_tokens", {}))
        self.etcd_data_dir = Path(data["etcd_data_dir"]) if data.get("etcd_data_dir") else None
        if data.get("bin_dir") and self._bin_dir is None:
            self._bin_dir = Path(data["bin_dir"])

    def _save(self) -> None:
        data = {
            "components": [c.to_json() for c in self.components.values()],
            "urls": self.urls,
            "token": self.token,
            "user_tokens": self.user_tokens,
            "etcd_data_dir": str(self.etcd_data_dir) if self.etcd_data_dir else None,
            "bin_dir": str(self._bin_dir) if self._bin_dir else None,
            "kubeconfig": str(self.kubeconfig),
        }
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
        tmp.replace(self.state_dir / STATE_FILE)

    # -- lifecycle ---------------------------------------------------------------------------------

    def running(self) -> bool:
        """Whether etcd and kube-apiserver are both alive."""
        return all(name in self.components and self.components[name].alive() for name in (ETCD, APISERVER))

    def status(self) -> list[ComponentStatus]:
        return [
            ComponentStatus(c.name, c.pid, c.alive(), c.log_file, self.urls.get(c.name, ""))
            for c in self.components.values()
        ]

    def up(self) -> None:
        """Start etcd and kube-apiserver, write the kubeconfig, apply CRDs, then kube-controller-manager
        when asked for; return once ready."""
        if self.components:
            if self.running():
                raise UsageError(f"a dev cluster is already running in {self.state_dir}; run `down` first")
            self.down()  # leftovers of a crashed cluster
        bin_dir = self.bin_dir  # fail before creating anything when the binaries are missing
        if self.with_controller_manager:
            require(bin_dir, CONTROLLER_MANAGER)
        started = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)
        try:
            creds = pki.create(self.state_dir / "pki")
            self.token = creds.token
            self.user_tokens = dict(creds.user_tokens)
            self._save()
            self._start_etcd(bin_dir)
            self._start_apiserver(bin_dir, creds)
            kubeconfig.write(
                self.kubeconfig, kubeconfig.build(self.server, creds.ca_cert.read_bytes(), self.token)
            )
            self._apply_crds()
            if self.with_controller_manager:
                self.start_controller_manager()
        except BaseException:
            self.down(remove_state=False)
            raise
        self.timings["up"] = time.monotonic() - started

    def down(self, *, remove_state: bool = True) -> None:
        """Stop every recorded component (controller manager and scheduler first, etcd last) and delete
        the state."""
        for name in reversed(COMPONENTS):
            component = self.components.get(name)
            if component is not None:
                stop(component)
        for name in [n for n in self.components if n not in COMPONENTS]:
            stop(self.components[name])
        if self.etcd_data_dir is not None:
            shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
        if remove_state:
            self.components.clear()
            self.urls.clear()
            self.etcd_data_dir = None
            self._remove_state()

    def _remove_state(self) -> None:
        """Delete what `up` created in the state dir, then the dir if that left it empty. Only known
        names are removed, so a mistaken ``--state-dir`` (say, a home directory) loses nothing else."""
        d = self.state_dir
        for name in ("pki", "etcd-data", FLEX_VOLUME_DIR):
            shutil.rmtree(d / name, ignore_errors=True)
        names = [STATE_FILE, STATE_FILE + ".tmp", "kubeconfig", "kube-scheduler.yaml"]
        names += [f"{component}.log" for component in COMPONENTS]
        names += [AUDIT_POLICY_FILE, AUDIT_LOG_FILE, *(f"kubeconfig-{user}" for user in pki.DEV_USERS)]
        for name in names:
            (d / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            d.rmdir()

    def __enter__(self) -> DevCluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- components --------------------------------------------------------------------------------

    def _start(self, name: str, argv: list[str], url: str) -> Component:
        component = spawn(name, argv, self.log_file(name), die_with_parent=self.die_with_parent)
        self.components[name] = component
        self.urls[name] = url
        self._save()
        return component

    def _wait_ready(
        self,
        name: str,
        check_url: str,
        *,
        verify: bool,
        timeout: float | None = None,
        contains: str | None = None,
    ) -> None:
        component = self.components[name]
        started = time.monotonic()
        ok = wait_until(
            lambda: probe(
                check_url,
                token=self.token if verify else None,
                cafile=self.ca_file if verify else None,
                contains=contains,
            ),
            self.startup_timeout if timeout is None else timeout,
            alive=component.alive,
        )
        self.timings[name] = time.monotonic() - started
        if not ok:
            code = component.exit_code()
            how = f"exited with code {code}" if code is not None else "is not alive"
            if component.alive():
                how = f"not ready after {self.timings[name]:.0f} s"
            raise ClusterError(
                f"{name} {how} ({check_url}); last lines of {component.log_file}:\n{self.log_tail(name)}"
            )

    def _start_etcd(self, bin_dir: Path) -> None:
        # tmpfs when available: fsync latency otherwise dominates everything on a small machine.
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            sweep_stale_etcd_dirs(shm)
            self.etcd_data_dir = Path(tempfile.mkdtemp(prefix=ETCD_DIR_PREFIX, dir=shm))
        else:
            self.etcd_data_dir = self.state_dir / "etcd-data"
            self.etcd_data_dir.mkdir(mode=0o700)
        self._save()
        client, peer = free_port(), free_port()
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        argv = [
            str(bin_dir / "etcd"),
            "--name=dev",
            f"--data-dir={self.etcd_data_dir}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=dev={peer_url}",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ]
        self._start(ETCD, argv, client_url)
        self._wait_ready(ETCD, f"{client_url}/health", verify=False, timeout=30.0)

    def _start_apiserver(self, bin_dir: Path, creds: pki.Pki) -> None:
        port = free_port()
        server = f"https://127.0.0.1:{port}"
        argv = [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={self.urls[ETCD]}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={self.state_dir / 'pki' / 'generated'}",
            f"--tls-cert-file={creds.serving_cert}",
            f"--tls-private-key-file={creds.serving_key}",
            f"--client-ca-file={creds.ca_cert}",
            f"--token-auth-file={creds.token_file}",
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={creds.sa_pub}",
            f"--service-account-signing-key-file={creds.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # No controller-manager: nobody creates ServiceAccounts, nobody removes the not-ready taint
            # TaintNodesByCondition puts on every new node. Priority stays on (priorityClassName works).
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            "--enable-admission-plugins=Priority",
            # The loopback advertise address makes the `kubernetes` endpoints reconciler complain.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--v=1",
            *self._audit_args(),
            *self.apiserver_args,
        ]
        self._start(APISERVER, argv, server)
        self._wait_ready(APISERVER, f"{server}/readyz", verify=True)

    def _audit_args(self) -> list[str]:
        if not self.audit:
            return []
        policy = self.state_dir / AUDIT_POLICY_FILE
        policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        # Blocking mode: no record is dropped under load. A request's ResponseComplete record is written
        # once its response has been sent, so a client can see the effect a moment before the record:
        # readers that need every request so far write a barrier first (tests/e2e: settled_audit).
        return [
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxbackup=0",
            "--audit-log-maxsize=0",
        ]

    def _kubectl(self, *args: str) -> None:
        argv = [str(self.bin_dir / "kubectl"), f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
        if result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)} failed:\n{result.stdout}{result.stderr}")

    def _apply_crds(self) -> None:
        """Apply every manifest in the crds folder and its subfolders (the repository's ``crds/podgroup/``,
        kept apart from ``deploy/``), if any, and wait for the CRDs to be Established."""
        d = self.crds_dir
        if d is None or not d.is_dir():
            return
        # Every manifest but a kustomization (which kustomize reads, not the API server).
        files = sorted(
            p
            for p in d.rglob("*")
            if p.is_file() and p.suffix in (".yaml", ".yml", ".json") and p.stem != "kustomization"
        )
        if not files:
            return
        started = time.monotonic()
        targets = [arg for p in files for arg in ("-f", str(p))]
        manager = "--field-manager=kopf-scheduler-dev-cluster"
        self._kubectl("apply", "--server-side", "--force-conflicts", manager, *targets)
        self._kubectl("wait", "--for=condition=Established", "--timeout=60s", *targets)
        self.timings["crds"] = time.monotonic() - started

    def start_kube_scheduler(
        self,
        extra_args: list[str] | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> None:
        """Start the upstream kube-scheduler (profile ``default-scheduler``) and wait up to ``timeout``
        seconds for its /readyz (its informers synced: longer on a large cluster).
        ``config``: top-level fields laid over its KubeSchedulerConfiguration (``extenders``, ...)."""
        if not self.running():
            raise UsageError(f"no running dev cluster in {self.state_dir}; run `up` first")
        existing = self.components.get(SCHEDULER)
        if existing is not None and existing.alive():
            return
        port = free_port()
        config_file = self.state_dir / "kube-scheduler.yaml"
        config_file.write_text(yaml.safe_dump(scheduler_config(self.kubeconfig, config), sort_keys=False))
        argv = [
            str(self.bin_dir / "kube-scheduler"),
            f"--config={config_file}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
            # No delegated authn/authz kubeconfigs: the probes and /metrics are always allowed, and
            # delegation would want a request-header CA this apiserver does not have.
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            *(extra_args or []),
        ]
        url = f"https://127.0.0.1:{port}"
        self._start(SCHEDULER, argv, url)
        try:
            self._wait_ready(SCHEDULER, f"{url}/readyz", verify=False, timeout=timeout)
        except BaseException:
            self.stop_kube_scheduler()
            raise

    def stop_kube_scheduler(self) -> None:
        self._stop_component(SCHEDULER)

    def start_controller_manager(self, extra_args: list[str] | None = None) -> None:
        """Start kube-controller-manager (see `controller_manager_argv`) and wait until every controller
        has been started: its /healthz lists the per-controller checks only from then on."""
        binary = require(self.bin_dir, CONTROLLER_MANAGER)
        if not self.running():
            raise UsageError(f"no running dev cluster in {self.state_dir}; run `up` first")
        existing = self.components.get(CONTROLLER_MANAGER)
        if existing is not None and existing.alive():
            return
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        flex_dir = self.state_dir / FLEX_VOLUME_DIR
        argv = controller_manager_argv(binary, self.kubeconfig, port, flex_dir, extra_args)
        self._start(CONTROLLER_MANAGER, argv, url)
        try:
            self._wait_ready(
                CONTROLLER_MANAGER,
                f"{url}/healthz?verbose",
                verify=False,
                timeout=60.0,
                contains=CONTROLLERS_STARTED_MARK,
            )
        except BaseException:
            self.stop_controller_manager()
            raise

    def restart(self, name: str, *, down_for: float = 0.0) -> None:
        """Stop etcd or kube-apiserver (SIGTERM) and start it again as before: same address, data,
        credentials and flags, so every client reconnects to the same URL. ``down_for`` seconds pass
        in between. Returns once it is ready again. For fault tests: a crash and restart."""
        if name not in (ETCD, APISERVER):
            raise UsageError(f"restart: {name!r} is not one of {ETCD}, {APISERVER}")
        old = self.components[name]
        stop(old)
        time.sleep(down_for)
        self._start(name, old.argv, self.urls[name])
        if name == ETCD:
            self._wait_ready(ETCD, f"{self.urls[ETCD]}/health", verify=False, timeout=30.0)
        else:
            self._wait_ready(APISERVER, f"{self.server}/readyz", verify=True)

    def stop_controller_manager(self) -> None:
        self._stop_component(CONTROLLER_MANAGER)

    def _stop_component(self, name: str) -> None:
        component = self.components.pop(name, None)
        self.urls.pop(name, None)
        if component is not None:
            stop(component)
            with contextlib.suppress(FileNotFoundError):
                self._save()


def sweep_stale_etcd_dirs(base: Path, min_age: float = 120.0) -> None:
    """Remove etcd data dirs in ``base`` (tmpfs: they hold RAM) left by clusters whose owner was killed
    before it could run ``down``: no process uses them and they are older than ``min_age`` seconds
    (a younger one may belong to a cluster that is starting right now)."""
    now = time.time()
    for d in base.glob(ETCD_DIR_PREFIX + "*"):
        try:
            old = now - d.stat().st_mtime > min_age
        except OSError:
            continue
        if old and not path_in_use(d):
            shutil.rmtree(d, ignore_errors=True)


def scheduler_config(kubeconfig_path: Path, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """KubeSchedulerConfiguration for the upstream scheduler (``--kubeconfig`` is ignored with --config);
    ``extra`` fields are laid over it."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig_path), "qps": 5000, "burst": 5000},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
        **(extra or {}),
    }


def controller_manager_argv(
    binary: Path,
    kubeconfig_path: Path,
    port: int,
    flex_volume_dir: Path,
    extra_args: list[str] | None = None,
) -> list[str]:
    """kube-controller-manager's command line for the dev cluster; ``extra_args`` come last (and win)."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig_path}",
        "--leader-elect=false",
        # Every controller acts with the kubeconfig's admin token instead of a token for a ServiceAccount
        # of its own: nothing to create or authorize per controller.
        "--use-service-account-credentials=false",
        "--controllers=" + ",".join(["*", *(f"-{name}" for name in CONTROLLERS_OFF)]),
        # client-go's default (20 QPS, burst 30) would make the ReplicaSet controller create pods at
        # 20/s, slower than the schedulers it feeds; the same limits kube-scheduler gets here.
        "--kube-api-qps=5000",
        "--kube-api-burst=5000",
        # Serving on a loopback port only for /healthz (readiness) and /metrics; no delegated authn/authz
        # kubeconfigs, as for kube-scheduler.
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        # The volume controllers create (and watch) this directory at start-up; its default is under
        # /usr/libexec, outside anything the dev cluster owns.
        f"--flex-volume-plugin-dir={flex_volume_dir}",
        *(extra_args or []),
    ]
