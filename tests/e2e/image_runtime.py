"""The image ``make image`` builds, run as a cluster would run it, for the image's e2e tests
(``test_image.py``, ``test_image_deploy.py``).

- ``built_image()``: ``dist/image/image.json`` and the archive beside it; a missing image fails the test
  and names ``make image`` (the e2e tier never skips).
- ``Podman``: podman with runc (``hack/image/containers.conf``) and storage of its own under the cache
  directory, so nothing of the host's podman is touched; ``load`` imports the archive once per session
  (the image of the same name loaded before is removed first, so the archive on disk is what runs).
- ``Kubelet``: what a kubelet does with a pod's container (no kubelet runs here): the image (present,
  never pulled), command and args, env (``fieldRef`` resolved, the ``KUBERNETES_SERVICE_*`` variables of
  the API server added), the service account's token, CA and namespace mounted read-only at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` as the projected volume is, emptyDir and optional
  Secret volumes, the pod's and the container's securityContext (user, read-only root filesystem, no
  privilege escalation, capabilities dropped), the memory limit, and the probes, polled until the
  startup probe passes and the readiness probe answers; ``Container.terminate`` sends SIGTERM and waits
  the pod's grace period, as the kubelet does before SIGKILL.
- Containers share the host's network (the dev API server listens on 127.0.0.1, which its certificate
  names), carry the label ``LABEL`` and are removed at the end of the session, or at the start of the
  next one when a session was killed.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from operator_harness import kubectl

from kopf_scheduler.devcluster.binaries import cache_dir
from kopf_scheduler.devcluster.harness import ClusterHarness

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "dist" / "image"
CONTAINERS_CONF = ROOT / "hack" / "image" / "containers.conf"
LABEL = "e2e.kopf-scheduler.dev/image-test"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: what a missing image tells the user
HOW_TO_BUILD = "build it with `make image` (hack/image/build.sh)"


@dataclass(frozen=True)
class BuiltImage:
    """What ``hack/image/build.sh`` wrote (image.json)."""

    name: str
    version: str
    revision: str
    digest: str
    config_digest: str
    archive: Path
    sbom: Path
    created: str
    compressed_size: int
    uncompressed_size: int
    build_seconds: int
    layers: list[dict[str, Any]]

    @property
    def repository(self) -> str:
        return self.name.rpartition(":")[0]


def built_image() -> BuiltImage:
    summary = BUILD / "image.json"
    if not summary.is_file():
        pytest.fail(f"no image: {summary} does not exist; {HOW_TO_BUILD}", pytrace=False)
    data = json.loads(summary.read_text())
    archive = BUILD / "image.tar"
    if not archive.is_file():
        pytest.fail(f"no image: {archive} does not exist; {HOW_TO_BUILD}", pytrace=False)
    return BuiltImage(
        name=data["name"],
        version=data["version"],
        revision=data["revision"],
        digest=data["digest"],
        config_digest=data["config_digest"],
        archive=archive,
        sbom=BUILD / "image.spdx.json",
        created=data["created"],
        compressed_size=data["compressed_size"],
        uncompressed_size=data["uncompressed_size"],
        build_seconds=data.get("build_seconds", 0),
        layers=data["layers"],
    )


def record(key: str, value: Any) -> None:
    """Add a measurement to ``dist/image/measurements.json`` (size, load and start-up times) of the image
    ``image.json`` names: those of an earlier image are dropped."""
    path = BUILD / "measurements.json"
    digest = built_image().digest
    data = json.loads(path.read_text()) if path.is_file() else {}
    if data.get("digest") != digest:
        data = {"digest": digest}
    data[key] = value
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


# -- podman ------------------------------------------------------------------------------------------------


class Podman:
    """podman with its own storage (under the cache directory) and runc."""

    def __init__(self) -> None:
        missing = [
            t for t in ("podman", "runc") if not shutil.which(t, path=f"{os.environ['PATH']}:/usr/sbin:/sbin")
        ]
        if missing:
            pytest.fail(f"{', '.join(missing)} not installed; `make image` installs them", pytrace=False)
        base = cache_dir() / "image" / "podman"
        self.argv = [
            "podman",
            "--root", str(base / "storage"),
            "--runroot", f"/run/kopf-scheduler-podman-{os.getuid()}",
            "--runtime", "runc",
            "--cgroup-manager", "cgroupfs",
            "--events-backend", "file",
        ]  # fmt: skip
        self.env = {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}

    def __call__(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*self.argv, *args], capture_output=True, text=True, timeout=timeout, env=self.env, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"podman {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return done

    def remove_stale(self) -> None:
        """Containers of an earlier session that did not end cleanly."""
        ids = self("ps", "-aq", "--filter", f"label={LABEL}").stdout.split()
        if ids:
            self("rm", "-f", "-t", "0", *ids)

    def load(self, image: BuiltImage) -> float:
        """Import the archive (the image of the same name removed first); returns the seconds it took."""
        self("rmi", "-f", image.name, check=False)
        started = time.monotonic()
        out = self("load", "-i", str(image.archive), timeout=600).stdout
        seconds = time.monotonic() - started
        assert f"Loaded image: {image.name}" in out or f"Loaded image(s): {image.name}" in out, out
        return seconds

    def inspect_image(self, name: str) -> dict[str, Any]:
        [data] = json.loads(self("image", "inspect", name).stdout)
        return dict(data)


@functools.cache
def podman_with_image() -> tuple[Podman, BuiltImage]:
    """podman with the built image loaded (once per session); its containers removed at the end."""
    image = built_image()
    podman = Podman()
    podman.remove_stale()
    seconds = podman.load(image)
    record("podman_load_seconds", round(seconds, 2))
    atexit.register(podman.remove_stale)
    return podman, image


# -- containers ----------------------------------------------------------------------------------------------


@dataclass
class Container:
    podman: Podman
    name: str
    argv: list[str]
    started: float
    grace: float = 30.0
    exit_code: int | None = None

    def state(self) -> dict[str, Any]:
        done = self.podman("inspect", "--format", "{{json .State}}", self.name, check=False)
        return json.loads(done.stdout) if done.returncode == 0 else {}

    @property
    def running(self) -> bool:
        return bool(self.state().get("Running"))

    def logs(self) -> str:
        done = self.podman("logs", self.name, check=False)
        return done.stdout + done.stderr

    def tail(self, lines: int = 200) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def wait_for_log(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.logs():
            if not self.running:
                raise AssertionError(f"container {self.name} exited before logging {text!r}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"container {self.name} did not log {text!r} in {timeout} s:\n{self.tail()}"
                )
            time.sleep(0.2)

    def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state()
            if state and not state.get("Running") and state.get("Status") in ("exited", "stopped"):
                self.exit_code = int(state["ExitCode"])
                return self.exit_code
            time.sleep(0.1)
        return None

    def terminate(self) -> tuple[int | None, float]:
        """SIGTERM, then up to the grace period for it to exit (the kubelet's SIGKILL comes after it):
        (exit code or None when it had to be killed, seconds it took)."""
        started = time.monotonic()
        self.podman("kill", "--signal", "TERM", self.name, check=False)
        code = self.wait_exit(self.grace)
        seconds = time.monotonic() - started
        if code is None:
            self.podman("kill", "--signal", "KILL", self.name, check=False)
            self.wait_exit(10)
        return code, seconds

    def remove(self) -> None:
        self.podman("rm", "-f", "-t", "0", self.name, check=False)


def run_container(
    podman: Podman,
    image: str,
    *,
    name: str,
    args: list[str],
    env: Mapping[str, str],
    mounts: list[str] = (),  # type: ignore[assignment]
    user: str | None = None,
    read_only: bool = True,
    entrypoint: list[str] | None = None,
    extra: list[str] = (),  # type: ignore[assignment]
    grace: float = 30.0,
) -> Container:
    """``podman run -d`` on the host's network, never pulling; the container's hostname is ``name``
    (a pod's hostname is its name)."""
    argv = ["run", "-d", "--pull=never", "--network=host", f"--name={name}", f"--hostname={name}",
            f"--label={LABEL}=1"]  # fmt: skip
    if user:
        argv.append(f"--user={user}")
    if read_only:
        argv.append("--read-only")
    if entrypoint is not None:
        argv.append(f"--entrypoint={json.dumps(entrypoint)}")
    for key, value in env.items():
        argv.append(f"--env={key}={value}")
    for mount in mounts:
        argv.append(f"--mount={mount}")
    argv += [*extra, image, *args]
    started = time.monotonic()
    podman(*argv)
    return Container(podman, name, argv, started, grace=grace)


def run_once(podman: Podman, image: str, entrypoint: list[str], *args: str) -> str:
    """The output of a short command in the image (read-only root filesystem, the image's user)."""
    done = podman(
        "run", "--rm", "--pull=never", "--network=none", "--read-only", f"--label={LABEL}=1",
        f"--entrypoint={json.dumps(entrypoint)}", image, *args,
    )  # fmt: skip
    return done.stdout


# -- the API server as a pod sees it ---------------------------------------------------------------------


def service_env(cp: ClusterHarness) -> dict[str, str]:
    """The variables a kubelet gives every container for the ``kubernetes`` Service: here the API
    server's own address (127.0.0.1, which its serving certificate names)."""
    url = urlparse(cp.server)
    host, port = url.hostname or "127.0.0.1", str(url.port or 443)
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP": f"tcp://{host}:{port}",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_ADDR": host,
        "KUBERNETES_PORT_443_TCP_PORT": port,
    }


def service_account_volume(cp: ClusterHarness, namespace: str, account: str, directory: Path) -> Path:
    """``directory`` holding what the projected ``kube-api-access`` volume holds: a token of the
    ServiceAccount (``kubectl create token``, the TokenRequest API), the cluster's CA and the namespace;
    files readable by any user (mode 0644, as the kubelet writes them), the directory read-only."""
    token = kubectl(cp, "create", "token", account, "-n", namespace, "--duration=1h").stdout.strip()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(cp.ca_file.read_bytes())
    (directory / "namespace").write_text(namespace)
    for path in (*directory.iterdir(), directory):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return directory


def http_get(url: str, token: str | None = None, timeout: float = 2.0) -> tuple[int, str]:
    """(status, body) of a GET; HTTPS without verifying the certificate, as a kubelet's probe does;
    (0, error) when nothing answered."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as e:
        return 0, str(e)


def port_free(port: int) -> bool:
    """Nothing listens on ``port`` (connections of an earlier container in TIME_WAIT do not count: the
    operator binds with SO_REUSEADDR too)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


# -- a kubelet's part --------------------------------------------------------------------------------------


@dataclass
class Probe:
    """An ``httpGet`` probe of a container spec, its named port resolved."""

    url: str
    period: float
    failure_threshold: int
    initial_delay: float = 0.0

    @classmethod
    def of(cls, spec: Mapping[str, Any], ports: Mapping[str, int]) -> Probe:
        get = spec["httpGet"]
        port = get["port"]
        number = ports[port] if isinstance(port, str) else int(port)
        scheme = str(get.get("scheme", "HTTP")).lower()
        return cls(
            url=f"{scheme}://127.0.0.1:{number}{get.get('path', '/')}",
            period=float(spec.get("periodSeconds", 10)),
            failure_threshold=int(spec.get("failureThreshold", 3)),
            initial_delay=float(spec.get("initialDelaySeconds", 0)),
        )

    def passes(self) -> bool:
        status, _ = http_get(self.url)
        return 200 <= status < 400

    @property
    def budget(self) -> float:
        """How long a kubelet lets it fail before acting (restarting the container, for a startup probe)."""
        return self.initial_delay + self.period * self.failure_threshold


@dataclass
class Kubelet:
    """Runs one container of a pod spec (a Deployment's template) as a kubelet on this host would."""

    podman: Podman
    image: BuiltImage
    cp: ClusterHarness
    namespace: str
    workdir: Path
    started: list[Container] = field(default_factory=list)

    def run(
        self, pod_spec: Mapping[str, Any], pod_name: str | None = None
    ) -> tuple[Container, dict[str, Probe]]:
        [container] = pod_spec["containers"]
        pod_name = pod_name or f"kopf-scheduler-{uuid.uuid4().hex[:10]}-{uuid.uuid4().hex[:5]}"
        assert container["image"] == self.image.name, (
            f"the pod runs {container['image']}, make image builds {self.image.name}"
        )
        # a loaded image is used as it is: IfNotPresent (or Never), not Always
        assert container.get("imagePullPolicy", "IfNotPresent") in ("IfNotPresent", "Never"), container
        pod_security = pod_spec.get("securityContext") or {}
        security = {**pod_security, **(container.get("securityContext") or {})}
        user = security.get("runAsUser")
        group = security.get("runAsGroup", user)
        config = self.podman.inspect_image(self.image.name)["Config"]
        if security.get("runAsNonRoot"):  # the kubelet refuses a container that would run as root
            effective = user if user is not None else str(config.get("User", "0")).split(":")[0]
            assert str(effective).isdigit() and int(effective) != 0, f"runAsNonRoot but user {effective!r}"
        fields = {
            "metadata.name": pod_name,
            "metadata.namespace": self.namespace,
            "spec.serviceAccountName": pod_spec.get("serviceAccountName", "default"),
            "spec.nodeName": socket.gethostname(),
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        env = service_env(self.cp)
        for item in container.get("env") or ():
            if "value" in item:
                env[item["name"]] = item["value"]
            else:
                ref = item["valueFrom"]["fieldRef"]["fieldPath"]  # KeyError: a source this kubelet lacks
                env[item["name"]] = fields[ref]
        mounts = self._volumes(pod_spec, container, pod_name)
        extra = []
        if security.get("allowPrivilegeEscalation") is False:
            extra.append("--security-opt=no-new-privileges")
        for cap in (security.get("capabilities") or {}).get("drop") or ():
            extra.append(f"--cap-drop={cap}")
        memory = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if memory:
            extra.append(f"--memory={memory.replace('Gi', 'g').replace('Mi', 'm')}")
        ports = {p["name"]: int(p["containerPort"]) for p in container.get("ports") or () if "name" in p}
        taken = [p for p in ports.values() if not port_free(p)]
        assert not taken, (
            f"ports {taken} of the container are taken on this host (it shares the host's network)"
        )
        probes = {
            kind: Probe.of(container[f"{kind}Probe"], ports)
            for kind in ("startup", "liveness", "readiness")
            if container.get(f"{kind}Probe")
        }
        run = run_container(
            self.podman,
            container["image"],
            name=pod_name,
            args=list(container.get("args") or ()),
            entrypoint=container.get("command"),
            env=env,
            mounts=mounts,
            user=f"{user}:{group}" if user is not None else None,
            read_only=bool(security.get("readOnlyRootFilesystem")),
            extra=extra,
            grace=float(pod_spec.get("terminationGracePeriodSeconds", 30)),
        )
        self.started.append(run)
        return run, probes

    def _volumes(self, pod_spec: Mapping[str, Any], container: Mapping[str, Any], pod_name: str) -> list[str]:
        base = Path(tempfile.mkdtemp(prefix=f"{pod_name}-", dir=self.workdir))
        base.chmod(0o755)
        volumes = {v["name"]: v for v in pod_spec.get("volumes") or ()}
        mounts = []
        for mount in container.get("volumeMounts") or ():
            volume = volumes[mount["name"]]
            source = base / mount["name"]
            source.mkdir()
            if "emptyDir" in volume:
                source.chmod(0o1777)  # world-writable as the kubelet makes an emptyDir
            elif "secret" in volume:
                # no such Secret here; optional ones are mounted empty (a required one would keep the pod
                # from starting)
                assert volume["secret"].get("optional"), f"Secret volume {mount['name']} is not optional"
                source.chmod(0o755)
            else:
                raise AssertionError(f"volume {mount['name']}: a kind this kubelet does not make: {volume}")
            ro = ",ro" if mount.get("readOnly") else ""
            mounts.append(f"type=bind,src={source},dst={mount['mountPath']}{ro}")
        if pod_spec.get("automountServiceAccountToken", True):
            account = pod_spec.get("serviceAccountName", "default")
            token_dir = service_account_volume(self.cp, self.namespace, account, base / "kube-api-access")
            mounts.append(f"type=bind,src={token_dir},dst={SA_DIR},ro")
        return mounts

    def stop_all(self) -> None:
        for container in self.started:
            if container.exit_code is None and container.running:
                container.terminate()
            container.remove()


def wait_probe(container: Container, probe: Probe, what: str) -> float:
    """Poll ``probe`` (more often than a kubelet, within the kubelet's budget) until it passes; the
    seconds from the container's start. Fails with the container's log if it exits or runs out."""
    deadline = container.started + probe.budget
    while not probe.passes():
        if not container.running:
            raise AssertionError(
                f"container {container.name} exited before its {what} probe passed:\n{container.tail()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what} probe {probe.url} failed for {probe.budget} s (a kubelet would give up):\n"
                + container.tail()
            )
        time.sleep(0.2)
    return time.monotonic() - container.started


@contextlib.contextmanager
def kubelet(cp: ClusterHarness, namespace: str) -> Any:
    podman, image = podman_with_image()
    with tempfile.TemporaryDirectory(prefix="kubelet-") as tmp:
        k = Kubelet(podman, image, cp, namespace, Path(tmp))
        try:
            yield k
        finally:
            k.stop_all()
