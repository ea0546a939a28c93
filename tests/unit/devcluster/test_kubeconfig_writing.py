"""The dev cluster's kubeconfig: self-contained (CA embedded), token user, private file."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import yaml

from kopf_scheduler.devcluster import kubeconfig
from kopf_scheduler.devcluster.cluster import scheduler_config
from kopf_scheduler.devcluster.pki import token_file_line


def test_build_and_write(tmp_path: Path) -> None:
    config = kubeconfig.build("https://127.0.0.1:6443", b"PEM", "tok")
    path = kubeconfig.write(tmp_path / "sub" / "kubeconfig", config)

    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = yaml.safe_load(path.read_text())
    assert loaded == config
    context = loaded["current-context"]
    (ctx,) = [c["context"] for c in loaded["contexts"] if c["name"] == context]
    (cluster,) = [c["cluster"] for c in loaded["clusters"] if c["name"] == ctx["cluster"]]
    (user,) = [u["user"] for u in loaded["users"] if u["name"] == ctx["user"]]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"PEM"
    assert user == {"token": "tok"}


def test_token_file_line_puts_admin_in_system_masters() -> None:
    assert token_file_line("abc", "admin") == 'abc,admin,admin,"system:masters"\n'


def test_scheduler_config_carries_connection_settings(tmp_path: Path) -> None:
    config = scheduler_config(tmp_path / "kubeconfig")
    assert config["clientConnection"] == {
        "kubeconfig": str(tmp_path / "kubeconfig"),
        "qps": 5000,
        "burst": 5000,
    }
    assert config["leaderElection"] == {"leaderElect": False}
    assert [p["schedulerName"] for p in config["profiles"]] == ["default-scheduler"]
