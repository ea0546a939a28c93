"""The image ``make image`` builds, as a user meets it: loaded into podman from ``dist/image/image.tar``
and run as a container (host network, runc, read-only root filesystem, its own non-root user) against
the dev cluster with nothing but the RBAC of ``deploy/``: a ServiceAccount token mounted where a cluster
mounts it and the in-cluster configuration from the environment.

What a user checks: the image is the package's version with the labels that say so and nothing in it
but what runs (no package manager, shell or compiler); its SBOM lists what the running container has;
the container reads the in-cluster configuration, answers its probes (``/healthz``, and ``/readyz`` on the
secure port, whose ``/metrics`` answer only an authorised caller), accepts a SchedulingProfile and binds a
pod with its Scheduled event; a second container stands by while the first leads, and SIGTERM ends the
leader within its grace period with the Lease released, so that the second takes over at once. The
image's size and the container's start-up time are written to ``dist/image/measurements.json``.
"""

from __future__ import annotations

import json
import re
import tarfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from image_runtime import (
    SA_DIR,
    BuiltImage,
    Container,
    Podman,
    http_get,
    podman_with_image,
    record,
    run_container,
    run_once,
    service_account_volume,
    service_env,
)
from operator_harness import (
    Scope,
    condition,
    holder,
    kubectl,
    lease,
    settled_audit,
    wait_profile,
    wait_until,
)

from kopf_scheduler.devcluster.harness import ClusterHarness, dumps
from kopf_scheduler.devcluster.processes import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "kopf-scheduler"  # deploy/'s namespace: its Role grants the Lease there
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kopf-scheduler"
#: kube-scheduler's default lease duration, which the containers run with (nothing shortened)
LEASE_DURATION = 15.0
#: a pod's default terminationGracePeriodSeconds
GRACE = 30.0
FORBIDDEN = re.compile(
    r"(^|/)(s?bin)/(dpkg|apt|apt-get|pip[\d.]*|easy_install|sh|bash|dash|gcc[-\d.]*|cc|c\+\+|g\+\+|ld|as|make)$"
)


@pytest.fixture(scope="module")
def image() -> BuiltImage:
    return podman_with_image()[1]


@pytest.fixture(scope="module")
def podman() -> Podman:
    return podman_with_image()[0]


def layer_members(image: BuiltImage) -> dict[str, tarfile.TarInfo]:
    """Every path of the image (its layers applied in order) -> its tar header."""
    members: dict[str, tarfile.TarInfo] = {}
    with tarfile.open(image.archive) as outer:
        index = json.load(outer.extractfile("index.json"))  # type: ignore[arg-type]
        blob = "blobs/sha256/{}"
        manifest = json.load(outer.extractfile(blob.format(index["manifests"][0]["digest"][7:])))  # type: ignore[arg-type]
        for layer in manifest["layers"]:
            with tarfile.open(
                fileobj=outer.extractfile(blob.format(layer["digest"][7:])), mode="r|gz"
            ) as tar:
                for member in tar:
                    members[member.name.rstrip("/")] = member
    return members


def test_the_image_is_the_package_version_deploy_and_the_chart_name(
    image: BuiltImage, podman: Podman
) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert image.version == version
    assert image.name.endswith(f":{version}")
    loaded = podman.inspect_image(image.name)
    assert loaded["Digest"] == image.digest, "podman loaded another image than dist/image/image.json names"
    assert loaded["Id"] == image.config_digest.split(":", 1)[1]
    config = loaded["Config"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == version
    assert labels["org.opencontainers.image.title"] == "kopf-scheduler"
    assert labels["org.opencontainers.image.revision"].startswith(image.revision[:40])
    assert labels["org.opencontainers.image.created"] == image.created
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/opt/kopf-scheduler/bin/kopf-scheduler"] and config["Cmd"] == ["run"]

    # deploy/ and the chart run exactly this image, and use it when it is loaded (no pull)
    [deployment] = [d for d in yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text()) if d]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["imagePullPolicy"]) == (image.name, "IfNotPresent")
    chart = yaml.safe_load((ROOT / "charts/kopf-scheduler/Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "charts/kopf-scheduler/values.yaml").read_text())
    assert chart["appVersion"] == version
    assert (values["image"]["repository"], values["image"]["pullPolicy"]) == (
        image.repository,
        "IfNotPresent",
    )

    record("image", image.name)
    record("compressed_size_mb", round(image.compressed_size / 1e6, 1))
    record("uncompressed_size_mb", round(image.uncompressed_size / 1e6, 1))
    record("layers_mb", {layer["name"]: round(layer["size"] / 1e6, 1) for layer in image.layers})
    record("build_seconds", image.build_seconds)


def test_the_image_holds_what_runs_and_nothing_to_install_or_compile_with(image: BuiltImage) -> None:
    members = layer_members(image)
    offenders = sorted(p for p in members if FORBIDDEN.search(p))
    assert offenders == [], "a package manager, shell or compiler is in the image"
    setuid = sorted(p for p, m in members.items() if m.isfile() and m.mode & 0o6000)
    assert setuid == []
    assert {m.uid for m in members.values() if not m.name.startswith("home/")} == {0}
    assert members["home/nonroot"].uid == 65532
    # every module of the package is compiled: a read-only root filesystem gets no __pycache__
    package = "opt/kopf-scheduler/lib/python3.11/site-packages/kopf_scheduler"
    sources = [p for p in members if p.startswith(package) and p.endswith(".py")]
    assert len(sources) > 100
    missing = [
        s for s in sources
        if f"{s.rsplit('/', 1)[0]}/__pycache__/{s.rsplit('/', 1)[1][:-3]}.cpython-311.pyc" not in members
    ]  # fmt: skip
    assert missing == []
    # the three layers: Debian, the dependencies, the package alone
    assert [layer["name"] for layer in image.layers] == ["debian", "python-dependencies", "kopf-scheduler"]


def test_the_sbom_lists_what_the_running_container_has(image: BuiltImage, podman: Podman) -> None:
    sbom = json.loads(image.sbom.read_text())
    assert sbom["spdxVersion"] == "SPDX-2.3" and sbom["dataLicense"] == "CC0-1.0"
    [described] = sbom["documentDescribes"]
    packages = {p["SPDXID"]: p for p in sbom["packages"]}
    assert packages[described]["checksums"] == [
        {"algorithm": "SHA256", "checksumValue": image.digest.split(":", 1)[1]}
    ]
    contained = {r["spdxElementId"] for r in sbom["relationships"] if r["relationshipType"] == "CONTAINED_BY"}
    assert contained == set(packages) - {described}
    listed_python = {
        re.sub(r"[-_.]+", "-", p["name"]).lower(): p["versionInfo"]
        for p in sbom["packages"]
        if p["SPDXID"].startswith("SPDXRef-pypi-")
    }
    listed_debian = {
        p["name"]: p["versionInfo"] for p in sbom["packages"] if p["SPDXID"].startswith("SPDXRef-deb-")
    }

    # what the container itself reports, with the image's own python
    script = """
import importlib.metadata, json, re, sys
status = open("/var/lib/dpkg/status").read()
debs = dict(re.findall(r"(?m)^Package: (\\S+)\\n(?:.+\\n)*?Version: (\\S+)", status))
dists = {
    re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version
    for d in importlib.metadata.distributions()
}
print(json.dumps({"python": sys.version.split()[0], "debs": debs, "dists": dists}))
"""
    report = json.loads(run_once(podman, image.name, ["/opt/kopf-scheduler/bin/python", "-c"], script))
    assert listed_python == report["dists"]
    assert listed_debian == report["debs"]
    assert report["python"].startswith("3.11.")
    assert listed_python["kopf-scheduler"] == image.version
    assert "python3.11" in listed_debian and "dpkg" not in listed_debian
    # the locked versions are the installed ones, and those make test tests (constraints.txt)
    locked = pins(ROOT / "hack/image/requirements.lock")
    assert {k: v for k, v in listed_python.items() if k != "kopf-scheduler"} == locked
    constraints = ROOT / "constraints.txt"
    if constraints.is_file():
        tested = pins(constraints)
        drifted = {k: (v, tested.get(k)) for k, v in locked.items() if tested.get(k) != v}
        assert drifted == {}, "requirements.lock and constraints.txt differ: run hack/image/lock.py"


def pins(path: Path) -> dict[str, str]:
    """name -> version of the ``name==version`` lines of a requirements file (names normalised)."""
    found = re.findall(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)", path.read_text())
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version in found}


# -- the container against the dev cluster ----------------------------------------------------------------


@pytest.fixture(scope="module")
def deploy_rbac(control_plane: ClusterHarness) -> Iterator[None]:
    """deploy/'s namespace, ServiceAccount and RBAC, applied as the README applies them."""
    for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
        kubectl(control_plane, "apply", "-f", str(DEPLOY / name))
    control_plane.delete(LEASE)
    yield
    control_plane.delete(LEASE)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("image")


class Replica:
    """One container of the image as deploy/ runs it, on ports of its own (they share the host's
    network): the Deployment's flags and environment, the in-cluster configuration, deploy/'s token."""

    def __init__(
        self, podman: Podman, image: BuiltImage, cp: ClusterHarness, workdir: Path, name: str
    ) -> None:
        self.name = name
        self.metrics_port, self.liveness_port = free_port(), free_port()
        token_dir = service_account_volume(cp, NAMESPACE, "kopf-scheduler", workdir / f"{name}-token")
        tmp = workdir / f"{name}-tmp"
        tmp.mkdir()
        tmp.chmod(0o1777)
        self.container: Container = run_container(
            podman,
            image.name,
            name=name,
            args=[
                "run",
                f"--metrics-port={self.metrics_port}",
                f"--liveness-port={self.liveness_port}",
                f"--lease-namespace={NAMESPACE}",
            ],
            env={**service_env(cp), "KOPF_SCHEDULER_IDENTITY": name},
            mounts=[f"type=bind,src={token_dir},dst={SA_DIR},ro", f"type=bind,src={tmp},dst=/tmp"],
            extra=["--cap-drop=ALL", "--security-opt=no-new-privileges"],
            grace=GRACE,
        )

    def healthz(self) -> int:
        return http_get(f"http://127.0.0.1:{self.liveness_port}/healthz")[0]

    def readyz(self) -> int:
        return http_get(f"https://127.0.0.1:{self.metrics_port}/readyz")[0]

    def metrics(self, token: str | None) -> tuple[int, str]:
        return http_get(f"https://127.0.0.1:{self.metrics_port}/metrics", token)

    def wait_ready(self, timeout: float = 120.0) -> float:
        def ready() -> bool:
            if not self.container.running:
                raise AssertionError(f"container {self.name} exited:\n{self.container.tail()}")
            return self.healthz() == 200 and self.readyz() == 200

        wait_until(ready, timeout, f"container {self.name} healthy and ready", interval=0.2)
        return time.monotonic() - self.container.started


@pytest.fixture(scope="module")
def leader(
    control_plane: ClusterHarness, deploy_rbac: None, podman: Podman, image: BuiltImage, workdir: Path
) -> Iterator[Replica]:
    """The first container: ready and holding the Lease (start-up times recorded)."""
    replica = Replica(podman, image, control_plane, workdir, f"kopf-scheduler-image-a-{int(time.time())}")
    try:
        ready = replica.wait_ready()
        wait_until(lambda: holder(control_plane, NAMESPACE) == replica.name, 30, f"{replica.name} leading")
        leading = time.monotonic() - replica.container.started
        record("container_ready_seconds", round(ready, 2))
        record("container_leading_seconds", round(leading, 2))
        yield replica
    finally:
        if replica.container.running:
            replica.container.terminate()
        print(f"--- container {replica.name}:\n{replica.container.tail(60)}")
        replica.container.remove()


def test_the_container_runs_in_cluster_as_its_non_root_user(leader: Replica, podman: Podman) -> None:
    state = json.loads(podman("inspect", "--format", "{{json .Config}}", leader.name).stdout)
    assert state["User"] == "65532:65532"
    env = dict(e.split("=", 1) for e in state["Env"])
    assert "KUBECONFIG" not in env and env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    log = leader.container.logs()
    assert f"leading as {leader.name}:" in log, log[-3000:]
    assert leader.healthz() == 200
    problems = [line for line in log.splitlines() if "Traceback" in line or "[ERROR" in line]
    assert problems == [], log[-5000:]
    forbidden = [line for line in log.splitlines() if "forbidden" in line.lower()]
    assert forbidden == [], forbidden


def test_a_profile_is_accepted_and_a_pod_binds_with_its_event(
    control_plane: ClusterHarness, leader: Replica, scope: Scope
) -> None:
    profile = scope.name("profile")
    scheduler = scope.name("sched")
    scope.create_profile(profile, {"schedulerName": scheduler})
    wait_profile(control_plane, profile, "True", timeout=30)
    [node] = scope.nodes(1)
    scope.create_pod("web", scheduler)
    bound = scope.wait_bound("web", timeout=30)
    assert bound["spec"]["nodeName"] == node
    event = scope.wait_event("Scheduled", "web")
    assert event.get("reportingInstance") == leader.name, dumps(event)
    assert condition(scope.get_pod("web"), "PodScheduled").get("status") == "True"
    # bound with the mounted token: as deploy/'s ServiceAccount
    [binding] = [
        r for r in settled_audit(control_plane, scope.namespace)
        if r.is_binding and r.namespace == scope.namespace and r.name == "web"
    ]  # fmt: skip
    assert (binding.user, binding.code) == (f"system:serviceaccount:{NAMESPACE}:kopf-scheduler", 201)


def test_the_secure_port_answers_probes_and_authorised_scrapers_only(
    control_plane: ClusterHarness, leader: Replica, scope: Scope
) -> None:
    assert leader.readyz() == 200
    assert leader.metrics(None)[0] in (401, 403)
    # a scraper's ServiceAccount bound to deploy/'s metrics-reader role
    account = "scraper"
    control_plane.post(
        f"/api/v1/namespaces/{scope.namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
    )
    binding = scope.name("scraper")
    scope.delete_later(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{binding}")
    control_plane.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "kopf-scheduler-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": scope.namespace}],
        },
    )
    token = kubectl(control_plane, "create", "token", account, "-n", scope.namespace).stdout.strip()
    _, body = wait_until(
        lambda: (answer := leader.metrics(token))[0] == 200 and answer,
        15,
        "metrics for the authorised scraper",
    )
    assert "scheduler_schedule_attempts_total" in body
    assert 'leader_election_master_status{name="kopf-scheduler"} 1.0' in body
    # a token the API server does not know
    assert leader.metrics("not-a-token")[0] == 401


def test_a_second_container_stands_by_and_takes_over_at_sigterm(
    control_plane: ClusterHarness,
    leader: Replica,
    podman: Podman,
    image: BuiltImage,
    workdir: Path,
    scope: Scope,
) -> None:
    standby = Replica(podman, image, control_plane, workdir, f"kopf-scheduler-image-b-{int(time.time())}")
    try:
        standby.wait_ready()  # ready while standing by: caches synced, campaigning for the Lease
        time.sleep(3)
        assert holder(control_plane, NAMESPACE) == leader.name
        before = lease(control_plane, NAMESPACE)["spec"]
        [node] = scope.nodes(1)

        code, seconds = leader.container.terminate()
        assert code == 0, (
            f"exit code {code} after SIGTERM (None: still running after {GRACE} s):\n"
            + leader.container.tail()
        )
        assert seconds < GRACE
        record("sigterm_to_exit_seconds", round(seconds, 2))
        exited = time.monotonic()
        # released: the standby acquires it long before the lease would have expired
        wait_until(
            lambda: holder(control_plane, NAMESPACE) == standby.name,
            LEASE_DURATION,
            f"{standby.name} leading",
        )
        takeover = time.monotonic() - exited
        record("takeover_after_exit_seconds", round(takeover, 2))
        assert takeover < LEASE_DURATION / 2, f"took {takeover:.1f} s: the Lease was not released"
        after = lease(control_plane, NAMESPACE)["spec"]
        assert after["leaseTransitions"] == before.get("leaseTransitions", 0) + 1, dumps(after)

        scope.create_pod("after-takeover")
        assert scope.wait_bound("after-takeover", timeout=30)["spec"]["nodeName"] == node
        assert scope.wait_event("Scheduled", "after-takeover").get("reportingInstance") == standby.name

        code, seconds = standby.container.terminate()
        assert code == 0, standby.container.tail()
        assert holder(control_plane, NAMESPACE) == "", dumps(lease(control_plane, NAMESPACE))
    finally:
        if standby.container.running:
            standby.container.terminate()
        print(f"--- container {standby.name}:\n{standby.container.tail(60)}")
        standby.container.remove()
