"""Local pieces of the dev cluster that need no API server: certificates, processes, the state dir."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import pki
from kopf_scheduler.devcluster.cluster import ETCD_DIR_PREFIX, DevCluster, sweep_stale_etcd_dirs
from kopf_scheduler.devcluster.processes import Component, is_running, log_tail, spawn, stop


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_pki_serving_cert_verifies_against_ca(tmp_path: Path) -> None:
    creds = pki.create(tmp_path / "pki")
    ctx = ssl.create_default_context(cafile=str(creds.ca_cert))  # loads: the CA is well-formed
    assert ctx.cert_store_stats()["x509_ca"] == 1
    verify = subprocess.run(
        [
            "openssl",
            "verify",
            "-CAfile",
            str(creds.ca_cert),
            "-purpose",
            "sslserver",
            str(creds.serving_cert),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verify.returncode == 0, verify.stderr
    text = subprocess.run(
        ["openssl", "x509", "-in", str(creds.serving_cert), "-noout", "-ext", "subjectAltName"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text
    lines = creds.token_file.read_text().splitlines()
    assert lines[0] == f'{creds.token},kopf-scheduler-admin,kopf-scheduler-admin,"system:masters"'
    users = {line.split(",")[1]: line.split(",", 3)[3] for line in lines[1:]}
    assert users == {
        user: '"kopf-scheduler-dev-users"' for user in ("dev-user-a", "dev-user-b", "dev-user-c")
    }
    assert len({line.split(",")[0] for line in lines}) == 4  # every token its own
    assert all(p.stat().st_mode & 0o077 == 0 for p in creds.token_file.parent.iterdir())


def test_spawn_log_and_stop(tmp_path: Path) -> None:
    code = "import sys, time; print('hello', flush=True); time.sleep(60)"
    component = spawn("sleeper", [sys.executable, "-c", code], tmp_path / "sleeper.log")
    try:
        for _ in range(100):
            if "hello" in log_tail(component.log_file):
                break
            subprocess.run(["sleep", "0.05"], check=True)
        assert log_tail(component.log_file) == "hello\n"
        assert component.alive()
        # A handle read back from disk (no Popen) recognises the process by its command line.
        detached = Component.from_json(component.to_json())
        assert detached.alive()
        assert not is_running(component.pid, "/not/the/same/binary")
    finally:
        stop(component, timeout=5)
    assert not component.alive()
    assert not is_running(component.pid)
    stop(component)  # idempotent


def test_log_tail_of_missing_file_is_empty(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "nope.log") == ""


def test_sweep_removes_only_old_unused_etcd_dirs(tmp_path: Path) -> None:
    old_unused, old_used, young = (tmp_path / f"{ETCD_DIR_PREFIX}{n}" for n in ("a", "b", "c"))
    for d in (old_unused, old_used, young):
        d.mkdir()
    for d in (old_unused, old_used):
        os.utime(d, (time.time() - 3600, time.time() - 3600))
    code = "import sys, time; time.sleep(60)"
    user = spawn("user", [sys.executable, "-c", code, f"--data-dir={old_used}"], tmp_path / "user.log")
    try:
        sweep_stale_etcd_dirs(tmp_path)
    finally:
        stop(user, timeout=5)
    assert not old_unused.exists()
    assert old_used.exists()
    assert young.exists()


def test_down_removes_only_what_up_creates(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.crt").write_text("x")
    for name in ("kubeconfig", "etcd.log", "kube-apiserver.log", "mine.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "state.json").write_text('{"components": [], "urls": {}, "token": "t"}')
    DevCluster(tmp_path).down()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    (tmp_path / "mine.txt").unlink()
    (tmp_path / "state.json").write_text("{}")
    DevCluster(tmp_path).down()
    assert not tmp_path.exists()


def test_unreadable_state_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(UsageError, match="unreadable dev-cluster state"):
        DevCluster(tmp_path)
