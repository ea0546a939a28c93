"""The secure port answers every caller as kube-scheduler's port 10259 does, on the same cluster: an
upstream kube-scheduler with delegated authentication and authorization (``--authentication-kubeconfig``,
``--authorization-kubeconfig``, probes always allowed) and ``kopf-scheduler run`` with its defaults are
asked the same requests by the same users. Anonymous callers, a token the API server does not know, a
user without a grant, a user bound to the shipped ``kopf-scheduler-metrics-reader`` ClusterRole and the
cluster admin get the same HTTP status and the same ``Status`` body from both; the probes answer everyone.
"""

from __future__ import annotations

import contextlib
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml
from operator_harness import Operators, Scope, kubeconfig_token

from kopf_scheduler.devcluster.cluster import scheduler_config
from kopf_scheduler.devcluster.harness import ClusterHarness
from kopf_scheduler.devcluster.processes import free_port

pytestmark = pytest.mark.e2e

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac.yaml"
GRANTED, UNGRANTED = "dev-user-a", "dev-user-b"
INSECURE = ssl._create_unverified_context()  # both serve self-signed certificates


def get(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=INSECURE) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, e.read().decode()


@contextlib.contextmanager
def delegating_kube_scheduler(
    cp: ClusterHarness, scope: Scope, workdir: Path, extra_args: Sequence[str] = ()
) -> Iterator[str]:
    """An upstream kube-scheduler serving its secure port with delegated authn/authz (it schedules no
    pod: its one profile has a name no pod uses), with ``extra_args`` besides; yields its URL."""
    port = free_port()
    config = workdir / "kube-scheduler-delegating.yaml"
    overrides = {"profiles": [{"schedulerName": scope.name("nobody")}]}
    config.write_text(yaml.safe_dump(scheduler_config(cp.cluster.kubeconfig, overrides)))
    log = workdir / "kube-scheduler-delegating.log"
    argv = [
        str(cp.cluster.bin_dir / "kube-scheduler"),
        f"--config={config}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--authentication-kubeconfig={cp.cluster.kubeconfig}",
        f"--authorization-kubeconfig={cp.cluster.kubeconfig}",
        # this API server publishes no request-header CA for front proxies
        "--authentication-tolerate-lookup-failure",
        *extra_args,
    ]
    url = f"https://127.0.0.1:{port}"
    with open(log, "ab") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if get(f"{url}/readyz", None)[0] == 200:
                    break
            assert process.poll() is None, f"kube-scheduler exited:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, (
                f"kube-scheduler not ready in 60 s:\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _grant_metrics_reader(cp: ClusterHarness, scope: Scope, user: str) -> None:
    [role] = [
        d
        for d in yaml.safe_load_all(RBAC.read_text())
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "kopf-scheduler-metrics-reader"
    ]
    role["metadata"]["name"] = scope.name("metrics-reader")
    roles = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
    bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
    cp.post(roles, role)
    scope.delete_later(f"{roles}/{role['metadata']['name']}")
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": role["metadata"]["name"]},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    cp.post(bindings, binding)
    scope.delete_later(f"{bindings}/{binding['metadata']['name']}")


def test_the_secure_port_answers_every_caller_as_kube_scheduler_does(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    _grant_metrics_reader(control_plane, scope, GRANTED)
    operator = operators.start(
        "op-secure-metrics", lease_namespace=scope.namespace, ports=True, secure_metrics=True
    )
    operator.wait_leading()
    ours = f"https://127.0.0.1:{operator.metrics_port}"
    callers = {
        "anonymous": None,
        "unknown token": "0123456789abcdef",
        UNGRANTED: kubeconfig_token(control_plane.cluster.user_kubeconfig(UNGRANTED)),
        GRANTED: kubeconfig_token(control_plane.cluster.user_kubeconfig(GRANTED)),
        "admin": control_plane.token,
    }
    with delegating_kube_scheduler(control_plane, scope, tmp_path) as theirs:
        for caller, token in callers.items():
            for path in ("/metrics", "/readyz", "/healthz", "/livez", "/configz"):
                upstream_status, upstream_body = get(theirs + path, token)
                status, body = get(ours + path, token)
                if path == "/configz" and upstream_status == 200:
                    assert status == 404, (caller, path)  # a path kopf-scheduler does not serve
                    continue
                assert status == upstream_status, (caller, path, upstream_body, body)
                if status == 200:
                    if path == "/metrics":
                        assert "# TYPE scheduler_schedule_attempts_total counter" in body
                    if path in ("/healthz", "/livez"):
                        assert body == upstream_body == "ok", (caller, path)
                    continue
                assert json.loads(body) == json.loads(upstream_body), (caller, path)
    expected = {
        "anonymous": 403,
        "unknown token": 401,
        UNGRANTED: 403,
        GRANTED: 200,
        "admin": 200,
    }
    assert {caller: get(ours + "/metrics", token)[0] for caller, token in callers.items()} == expected
    assert {get(ours + "/readyz", token)[0] for token in callers.values()} <= {200, 401}
