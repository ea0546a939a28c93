"""The README's "Install", "Verify" and "Uninstall" run as written (``readme_steps`` reads them), with
kubectl and helm from the control-plane build on PATH, on a cluster of this module's own, as a user's
would be: etcd, kube-apiserver and kube-controller-manager (namespaces are emptied and deleted,
Deployments get ReplicaSets, dependents are collected), no CRD to start with, one node, and objects of
other schedulers: kube-scheduler's Lease, its ClusterRole and binding, a pod it bound, a namespace of
theirs, and once the PodGroup CRD is there a PodGroup of another gang scheduler.

No kubelet runs, so the test stands in for it (``image_runtime.Kubelet``): after the install commands it
starts one replica of the Deployment the API server stored, from the image ``make image`` built (loaded,
as the README's ``ctr import`` loads it: ``test_image_archive.py`` proves that and ``skopeo copy``; the
image block is the one block not run here), and polls its probes as a kubelet does; it confirms the
deletion of a pod bound to its node (grace 0), and stops the container with SIGTERM once the Deployment
is gone. Two replicas cannot share one host's ports, so ``get deployment`` shows fewer than 2/2 here:
the readiness probe a kubelet reports as READY is what is checked.

Verify: each command succeeds and shows what its comment says (the leading pod, every profile ACCEPTED
True, the pod's node, its Scheduled event). Uninstall: every object the install made answers 404
(rendered again with ``kubectl kustomize`` / ``helm template``), the namespace included; the other
schedulers' objects and the PodGroup CRD keep their uid and resourceVersion.

The README's command line: ``make release``, its ``pip install`` in a fresh virtualenv, ``kubectl krew
install`` with krew built from the Go module proxy (``hack/release/build-krew.sh``) in a KREW_ROOT of the
test's own, then ``kubectl kopf-scheduler --version`` through krew's link, and ``simulate`` from it.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import readme_steps
import yaml
from image_runtime import Container, kubelet, wait_probe
from operator_harness import Scope, holder, wait_until

from kopf_scheduler import __version__
from kopf_scheduler.devcluster import DevCluster, find_bin_dir
from kopf_scheduler.devcluster.binaries import built_tool, cache_dir
from kopf_scheduler.devcluster.harness import ClusterHarness, pod_manifest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "kopf-scheduler"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kopf-scheduler"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODGROUP_CRD = f"{CRDS}/podgroups.scheduling.x-k8s.io"
PROFILES = "/apis/kopf-scheduler.io/v1alpha1/schedulingprofiles"
HELLO = "/api/v1/namespaces/default/pods/hello"
HELLO_EVENTS = "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dhello"
PLURALS = {
    "Namespace": "namespaces",
    "CustomResourceDefinition": "customresourcedefinitions",
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "Service": "services",
    "Deployment": "deployments",
    "SchedulingProfile": "schedulingprofiles",
    "PodDisruptionBudget": "poddisruptionbudgets",
}
CLUSTER_SCOPED = {
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "SchedulingProfile",
}


# -- the cluster, the shell ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHarness]:
    made = DevCluster(
        tmp_path_factory.mktemp("readme-cluster"),
        crds_dir=None,
        die_with_parent=True,
        with_controller_manager=True,
    )
    atexit.register(made.down)
    try:
        try:
            made.up()
        except Exception as e:  # the failing component's log tail
            pytest.fail(f"control plane did not come up: {e}", pytrace=False)
        yield ClusterHarness.of(made)
    finally:
        made.down()
        atexit.unregister(made.down)


@pytest.fixture(scope="module")
def node(cluster: ClusterHarness) -> Iterator[str]:
    scope = Scope(cluster)
    try:
        [name] = scope.nodes(1)
        yield name
    finally:
        scope.cleanup()


@dataclass
class Shell:
    """Runs a README command as written, from the repository's top, with ``path`` first on PATH."""

    env: dict[str, str]

    @classmethod
    def of(cls, home: Path, path: list[Path], **env: str) -> Shell:
        system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        home.mkdir(parents=True, exist_ok=True)
        return cls(
            {"HOME": str(home), "PATH": os.pathsep.join([*map(str, path), system]), "LANG": "C.UTF-8", **env}
        )

    def start(self, words: list[str]) -> subprocess.Popen[str]:
        return subprocess.Popen(
            words,
            cwd=ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, words: list[str], process: subprocess.Popen[str], timeout: float = 300) -> str:
        out, err = process.communicate(timeout=timeout)
        assert process.returncode == 0, f"`{' '.join(words)}` failed ({process.returncode}):\n{out}{err}"
        return out

    def run(self, words: list[str], timeout: float = 300) -> str:
        return self.finish(words, self.start(words), timeout)

    def run_while(self, words: list[str], tick: Callable[[], object], timeout: float = 300) -> str:
        """Runs ``words`` calling ``tick`` every half second meanwhile (the kubelet's part)."""
        process = self.start(words)
        deadline = time.monotonic() + timeout
        while process.poll() is None:
            assert time.monotonic() < deadline, f"`{' '.join(words)}` still running after {timeout} s"
            tick()
            time.sleep(0.5)
        return self.finish(words, process)


def cluster_shell(cp: ClusterHarness, tmp_path: Path) -> Shell:
    helm = built_tool("helm", "helm").parent
    return Shell.of(
        tmp_path / "home",
        [find_bin_dir(), helm],
        KUBECONFIG=str(cp.kubeconfig),
        HELM_CACHE_HOME=str(tmp_path / "helm-cache"),
        HELM_CONFIG_HOME=str(tmp_path / "helm-config"),
        HELM_DATA_HOME=str(tmp_path / "helm-data"),
    )


# -- what the API server says --------------------------------------------------------------------------------


def exists(cp: ClusterHarness, path: str) -> bool:
    status = cp.api.request("GET", path).status
    assert status in (200, 404), f"GET {path}: HTTP {status}"
    return status == 200


def api_path(o: dict[str, Any]) -> str:
    group = "/api/v1" if o["apiVersion"] == "v1" else f"/apis/{o['apiVersion']}"
    namespace = (
        "" if o["kind"] in CLUSTER_SCOPED else f"/namespaces/{o['metadata'].get('namespace', NAMESPACE)}"
    )
    return f"{group}{namespace}/{PLURALS[o['kind']]}/{o['metadata']['name']}"


def identity(cp: ClusterHarness, paths: list[str]) -> dict[str, tuple[str, str]]:
    """Each object's uid and resourceVersion: deleted and made again, or changed at all, shows."""
    metadata = {p: cp.get(p)["metadata"] for p in paths}
    return {p: (m["uid"], m["resourceVersion"]) for p, m in metadata.items()}


def established(cp: ClusterHarness, crd: str) -> bool:
    conditions = (cp.get(crd).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def other_schedulers_objects(cp: ClusterHarness, node: str) -> list[str]:
    """kube-scheduler's Lease, ClusterRole and binding, a namespace with a pod it bound, and a PodGroup
    of another gang scheduler (the PodGroup CRD is there by now); their API paths."""
    namespace = cp.create_namespace("other-scheduler")
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
    if not exists(cp, lease):
        cp.post(
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "kube-scheduler"},
             "spec": {"holderIdentity": "kube-scheduler-host_1", "leaseDurationSeconds": 15}},
        )  # fmt: skip
    cp.post(f"/api/v1/namespaces/{namespace}/pods", pod_manifest("placed", namespace, nodeName=node))
    wait_until(lambda: established(cp, PODGROUP_CRD), 30, "the PodGroup CRD Established")
    groups = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"
    cp.post(groups, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": "gang"}, "spec": {"minMember": 2}})  # fmt: skip
    return [
        PODGROUP_CRD,
        f"{groups}/gang",
        lease,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:kube-scheduler",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/system:kube-scheduler",
        f"/api/v1/namespaces/{namespace}",
        f"/api/v1/namespaces/{namespace}/pods/placed",
    ]


# -- the steps -----------------------------------------------------------------------------------------------


def table(out: str) -> list[list[str]]:
    """The rows of kubectl's table output, split on blanks, header first."""
    return [line.split() for line in out.splitlines() if line.strip()]


def accepted(cp: ClusterHarness) -> set[str]:
    """The SchedulingProfiles whose Accepted condition is True."""
    return {
        p["metadata"]["name"]
        for p in cp.get(PROFILES)["items"]
        if any(
            c["type"] == "Accepted" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    }


def scheduled(cp: ClusterHarness, uid: str) -> list[dict[str, Any]]:
    """The Scheduled events of this pod hello (an earlier one's events outlive it)."""
    events = cp.get(HELLO_EVENTS)["items"]
    return [e for e in events if e.get("reason") == "Scheduled" and e["involvedObject"].get("uid") == uid]


def verify(cp: ClusterHarness, shell: Shell, container: Container, node: str, profiles: set[str]) -> None:
    """The README's Verify block, each command run as written and its output checked (a user would
    look again where the test waits: the scheduler acts within moments, not at once)."""
    checked = set()
    for words in readme_steps.blocks(readme_steps.section("Verify", level=3))[0]:
        line = " ".join(words)
        if "get deployment kopf-scheduler" in line:
            [header, row] = table(shell.run(words))
            assert header[:2] == ["NAME", "READY"] and row[0] == "kopf-scheduler", (header, row)
            checked.add("deployment")
        elif "get lease kopf-scheduler" in line:
            wait_until(lambda: holder(cp, NAMESPACE) == container.name, 30, f"{container.name} leading")
            assert shell.run(words).strip() == container.name
            checked.add("lease")
        elif words[:3] == ["kubectl", "get", "schedulingprofiles"]:
            wait_until(lambda: accepted(cp) == profiles, 30, f"profiles {sorted(profiles)} Accepted")
            [header, *rows] = table(shell.run(words))
            assert header[:3] == ["NAME", "SCHEDULER", "ACCEPTED"], header
            assert {(r[0], r[2]) for r in rows} == {(p, "True") for p in profiles}
            checked.add("profiles")
        elif words[:3] == ["kubectl", "run", "hello"]:
            assert "pod/hello created" in shell.run(words)
            checked.add("run")
        elif words[:4] == ["kubectl", "get", "pod", "hello"]:
            wait_until(lambda: cp.get(HELLO)["spec"].get("nodeName") == node, 30, f"hello bound to {node}")
            [header, row] = table(shell.run(words))
            assert row[header.index("NODE")] == node, (header, row)
            checked.add("node")
        elif words[:3] == ["kubectl", "get", "events"]:
            uid = cp.get(HELLO)["metadata"]["uid"]
            wait_until(functools.partial(scheduled, cp, uid), 30, "hello's Scheduled event")
            assert scheduled(cp, uid)[0]["reportingInstance"] == container.name
            out = shell.run(words)
            assert "Scheduled" in out and f"Successfully assigned default/hello to {node}" in out, out
            checked.add("events")
        elif words[:4] == ["kubectl", "delete", "pod", "hello"]:

            def confirm() -> bool:  # the kubelet's part: the pod's containers stopped, the deletion confirmed
                if not exists(cp, HELLO):
                    return True
                if cp.get(HELLO)["metadata"].get("deletionTimestamp"):
                    cp.delete(HELLO)
                return False

            assert 'pod "hello" deleted' in shell.run_while(words, confirm)
            wait_until(confirm, 30, "hello deleted")
            checked.add("delete")
        else:
            raise AssertionError(f"a README Verify command this test does not check: {words}")
    assert checked == {"deployment", "lease", "profiles", "run", "node", "events", "delete"}


def uninstall(cp: ClusterHarness, shell: Shell, block: list[list[str]], container: Container) -> None:
    """Runs ``block``; stops the container once the Deployment is gone, as its pod's kubelet would."""

    def kubelet_part() -> None:
        if container.running and not exists(cp, DEPLOYMENT):
            container.terminate()

    for words in block:
        shell.run_while(words, kubelet_part)
    if container.running:  # the namespace's pods went with it
        container.terminate()


def install_and_run(cp: ClusterHarness, shell: Shell, block: list[list[str]]) -> Any:
    for words in block:
        shell.run(words)
    return cp.get(DEPLOYMENT)


def run_replica(cp: ClusterHarness, agent: Any, deployment: dict[str, Any]) -> Container:
    """One replica of the Deployment, started as its kubelet would, up to its readiness probe passing."""
    container, probes = agent.run(deployment["spec"]["template"]["spec"])
    wait_probe(container, probes["startup"], "startup")
    wait_probe(container, probes["readiness"], "readiness")
    return container


def profile_names(objects: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objects if o.get("kind") == "SchedulingProfile"}


def test_kustomize_install_verify_uninstall(cluster: ClusterHarness, node: str, tmp_path: Path) -> None:
    shell = cluster_shell(cluster, tmp_path)
    install = readme_steps.block_starting(
        readme_steps.section("Install"), "kubectl", "apply", "-k", "deploy/"
    )
    for words in install:
        shell.run(words)
    others = other_schedulers_objects(cluster, node)
    shipped = [
        o for f in sorted((ROOT / "profiles").glob("*.yaml")) for o in yaml.safe_load_all(f.read_text()) if o
    ]
    made = [o for o in yaml.safe_load_all(shell.run(["kubectl", "kustomize", "deploy/"])) if o]
    with kubelet(cluster, NAMESPACE) as agent:
        container = run_replica(cluster, agent, cluster.get(DEPLOYMENT))
        verify(cluster, shell, container, node, profile_names(shipped))
        before = identity(cluster, others)
        steps = readme_steps.section("Uninstall", level=3)
        uninstall(
            cluster,
            shell,
            readme_steps.block_starting(steps, "kubectl", "delete", "-k", "deploy/"),
            container,
        )

    assert [api_path(o) for o in made if exists(cluster, api_path(o))] == []
    assert {o["kind"] for o in made} >= {"Namespace", "CustomResourceDefinition", "Deployment", "ClusterRole"}
    group = PROFILES.rsplit("/", 1)[0]  # served no more once its CRD is gone
    wait_until(lambda: not exists(cluster, group), 10, f"{group} gone")
    assert identity(cluster, others) == before


def test_helm_install_verify_uninstall(cluster: ClusterHarness, node: str, tmp_path: Path) -> None:
    shell = cluster_shell(cluster, tmp_path)
    if not exists(
        cluster, PODGROUP_CRD
    ):  # there as scheduler-plugins installs it (or the test above left it)
        shell.run(["kubectl", "apply", "-f", "crds/podgroup/podgroup.yaml"])
    [install] = readme_steps.block_starting(readme_steps.section("Install"), "helm", "install")
    shell.run(install)
    others = other_schedulers_objects(cluster, node)
    # what `helm install` made, rendered again with the same release, chart and values
    rendered = shell.run(["helm", "template", *install[2:], "--include-crds", "--skip-tests"])
    made = [o for o in yaml.safe_load_all(rendered) if o]
    with kubelet(cluster, NAMESPACE) as agent:
        deployment = cluster.get(DEPLOYMENT)
        assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        container = run_replica(cluster, agent, deployment)
        verify(cluster, shell, container, node, profile_names(made))
        before = identity(cluster, others)
        steps = readme_steps.section("Uninstall", level=3)
        uninstall(cluster, shell, readme_steps.block_starting(steps, "helm", "uninstall"), container)

    assert [api_path(o) for o in made if exists(cluster, api_path(o))] == []
    assert {o["kind"] for o in made} >= {
        "CustomResourceDefinition",
        "Deployment",
        "ClusterRole",
        "SchedulingProfile",
    }
    assert not exists(cluster, f"/api/v1/namespaces/{NAMESPACE}")
    assert identity(cluster, others) == before


@pytest.fixture(scope="module")
def krew() -> Path:
    """kubectl-krew, built from the Go module proxy the first time (hack/release/build-krew.sh)."""
    done = subprocess.run(
        [str(ROOT / "hack" / "release" / "build-krew.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip())


def test_the_command_line_installs_as_written(krew: Path, tmp_path: Path) -> None:
    venv, krew_root = tmp_path / "venv", tmp_path / "krew"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    shell = Shell.of(
        tmp_path / "home",
        [krew_root / "bin", venv / "bin", krew.parent, find_bin_dir()],
        KREW_ROOT=str(krew_root),
        KOPF_SCHEDULER_CACHE=str(cache_dir()),  # the release's build venv
        PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    path = shell.env["PATH"]
    assert shutil.which("kopf-scheduler", path=path) is None  # nothing installed before the README's pip
    block = readme_steps.blocks(readme_steps.section("The command line", level=3))[0]
    assert [w[:2] for w in block] == [
        ["make", "release"],
        ["pip", "install"],
        ["kubectl", "krew"],
        ["kubectl", "kopf-scheduler"],
    ]
    outputs = [shell.run(words, timeout=900) for words in block]

    assert outputs[-1].strip() == f"kopf-scheduler v{__version__}"
    link = krew_root / "bin" / "kubectl-kopf_scheduler"
    store = krew_root / "store" / "kopf-scheduler" / f"v{__version__}"
    assert link.is_symlink() and link.resolve() == (store / "kubectl-kopf_scheduler").resolve()
    assert sorted(p.name for p in store.iterdir()) == ["LICENSE", "kubectl-kopf_scheduler"]
    # kubectl runs the first kubectl-kopf_scheduler on PATH: krew's, which runs the fresh venv's command
    assert shutil.which("kubectl-kopf_scheduler", path=path) == str(link)
    assert shutil.which("kopf-scheduler", path=path) == str(venv / "bin" / "kopf-scheduler")
    simulated = shell.run(["kubectl", "kopf-scheduler", "simulate", "--cluster", "examples/cluster"])
    assert "web-1" in simulated, simulated
