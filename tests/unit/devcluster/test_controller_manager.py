"""kube-controller-manager in the dev cluster without an API server: its command line, the readiness probe's
body check, and the failures that must name the missing binary or carry the log tail."""

from __future__ import annotations

import argparse
import http.server
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.cli import dev_cluster
from kopf_scheduler.devcluster.apiclient import probe
from kopf_scheduler.devcluster.binaries import BinariesNotFound
from kopf_scheduler.devcluster.cluster import (
    APISERVER,
    CONTROLLER_MANAGER,
    CONTROLLERS_STARTED_MARK,
    ETCD,
    ClusterError,
    DevCluster,
    controller_manager_argv,
)
from kopf_scheduler.devcluster.processes import is_running, spawn

KCM = Path("/bin/kube-controller-manager")
KUBECONFIG = Path("/state/kubeconfig")
FLEX = Path("/state/flexvolume")


def flags(argv: list[str]) -> dict[str, str]:
    """``--name=value`` flags as a dict (the last one wins, as in pflag)."""
    return dict(arg[2:].split("=", 1) for arg in argv[1:])


def test_argv_runs_against_the_kubeconfig_without_leader_election() -> None:
    argv = controller_manager_argv(KCM, KUBECONFIG, 41234, FLEX)
    assert argv[0] == str(KCM)
    assert all(arg.startswith("--") and "=" in arg for arg in argv[1:]), argv
    assert flags(argv) == {
        "kubeconfig": str(KUBECONFIG),
        "leader-elect": "false",
        "use-service-account-credentials": "false",
        "controllers": "*,-nodelifecycle,-serviceaccount-token",
        "kube-api-qps": "5000",
        "kube-api-burst": "5000",
        "bind-address": "127.0.0.1",
        "secure-port": "41234",
        "authorization-always-allow-paths": "/healthz,/readyz,/livez,/metrics",
        "flex-volume-plugin-dir": str(FLEX),
    }


@pytest.mark.parametrize(
    "controller",
    [
        "deployment",
        "replicaset",
        "statefulset",
        "garbagecollector",
        "disruption",
        "persistentvolume-binder",
        "ephemeral-volume",
        "resourceclaim",
    ],
)
def test_controllers_the_scheduler_tests_need_stay_on(controller: str) -> None:
    enabled = flags(controller_manager_argv(KCM, KUBECONFIG, 1, FLEX))["controllers"].split(",")
    assert enabled[0] == "*"  # every default controller ...
    assert f"-{controller}" not in enabled  # ... and this one is not taken out


def test_extra_args_come_last_so_they_win() -> None:
    argv = controller_manager_argv(KCM, KUBECONFIG, 1, FLEX, ["--controllers=*", "--v=4"])
    assert argv[-2:] == ["--controllers=*", "--v=4"]
    assert flags(argv)["controllers"] == "*"


class _Healthz(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def healthz() -> Iterator[tuple[str, type[_Healthz]]]:
    handler = type("Handler", (_Healthz,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/healthz?verbose", handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("body", "ready"),
    [
        pytest.param(b"[+]ping ok\nhealthz check passed\n", False, id="serving-no-controllers-yet"),
        pytest.param(
            b"[+]deployment-controller ok\n[+]garbage-collector-controller ok\nhealthz check passed\n",
            True,
            id="controllers-started",
        ),
    ],
)
def test_ready_only_once_controller_checks_are_listed(
    healthz: tuple[str, type[_Healthz]], body: bytes, ready: bool
) -> None:
    url, handler = healthz
    handler.body = body
    assert probe(url) is True  # a 200 alone ...
    assert probe(url, contains=CONTROLLERS_STARTED_MARK) is ready  # ... is not enough


def test_up_without_the_binary_fails_before_starting_anything(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state = tmp_path / "state"
    cluster = DevCluster(state, bin_dir=bin_dir, with_controller_manager=True)
    with pytest.raises(BinariesNotFound, match=r"missing kube-controller-manager.*make controlplane"):
        cluster.up()
    assert not state.exists()
    assert not cluster.components


def test_start_needs_a_running_cluster(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / CONTROLLER_MANAGER).write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / CONTROLLER_MANAGER).chmod(0o755)
    with pytest.raises(UsageError, match="no running dev cluster"):
        DevCluster(tmp_path / "state", bin_dir=bin_dir).start_controller_manager()


def test_one_that_exits_is_reported_with_its_log_tail_and_forgotten(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / CONTROLLER_MANAGER
    fake.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        '  case "$a" in --flex-volume-plugin-dir=*) mkdir -p "${a#*=}/vendor~x" ;; esac\n'
        "done\n"
        "echo 'E0101 unknown flag: --bogus' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    cluster = DevCluster(state, bin_dir=bin_dir, die_with_parent=True)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    for name in (ETCD, APISERVER):  # stand-ins: `running()` only asks whether they are alive
        cluster.components[name] = spawn(name, sleep, state / f"{name}.log", die_with_parent=True)
    try:
        with pytest.raises(ClusterError) as info:
            cluster.start_controller_manager()
        message = str(info.value)
        assert "kube-controller-manager exited with code 1" in message
        assert "unknown flag: --bogus" in message
        assert CONTROLLER_MANAGER not in cluster.components
        assert CONTROLLER_MANAGER not in cluster.urls
        assert (state / f"{CONTROLLER_MANAGER}.log").exists()  # kept for a look
        assert (state / "flexvolume" / "vendor~x").is_dir()  # its plugin dir is in the state dir
    finally:
        pids = [c.pid for c in cluster.components.values()]
        cluster.down()
    assert not any(is_running(pid) for pid in pids)
    assert not state.exists()  # down removes the controller manager's log and plugin dir too


def test_cli_up_passes_the_option(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    dev_cluster.add_parser(parser.add_subparsers(), "dev-cluster")
    args = parser.parse_args(["dev-cluster", "up", "--state-dir", str(tmp_path), "--with-controller-manager"])
    seen: dict[str, Any] = {}

    class FakeCluster:
        timings = {CONTROLLER_MANAGER: 1.5}
        server = "https://127.0.0.1:1"
        state_dir = tmp_path
        kubeconfig = tmp_path / "kubeconfig"

        def __init__(self, state_dir: Path, **options: Any) -> None:
            seen.update(options)

        def up(self) -> None:
            seen["up"] = True

    monkeypatch.setattr(dev_cluster, "DevCluster", FakeCluster)
    assert args.func(args) == 0
    assert seen["with_controller_manager"] is True and seen["up"] is True
    assert parser.parse_args(["dev-cluster", "up"]).with_controller_manager is False
