"""A control plane that cannot start stops what it started and says why, with the failing log's tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster import ClusterError, DevCluster, find_bin_dir
from kopf_scheduler.devcluster.processes import is_running

pytestmark = pytest.mark.e2e


def bin_dir_with_broken_apiserver(tmp_path: Path) -> Path:
    real = find_bin_dir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-scheduler", "kubectl"):
        (bin_dir / name).symlink_to(real / name)
    fake = bin_dir / "kube-apiserver"
    fake.write_text("#!/bin/sh\necho 'starting'\necho 'E0000 invalid flag: something broke' >&2\nexit 3\n")
    fake.chmod(0o755)
    return bin_dir


def test_failing_apiserver_is_reported_with_log_tail_and_etcd_stopped(tmp_path: Path) -> None:
    cluster = DevCluster(
        tmp_path / "state", bin_dir=bin_dir_with_broken_apiserver(tmp_path), die_with_parent=True
    )
    with pytest.raises(ClusterError) as info:
        cluster.up()
    message = str(info.value)
    assert "kube-apiserver exited with code 3" in message
    assert "something broke" in message
    etcd = cluster.components["etcd"]
    assert not is_running(etcd.pid)
    assert cluster.etcd_data_dir is not None and not cluster.etcd_data_dir.exists()
    assert (tmp_path / "state" / "kube-apiserver.log").exists()  # logs are kept for a look
    cluster.down()
    assert not (tmp_path / "state").exists()


def test_second_up_on_same_state_dir_is_refused(tmp_path: Path) -> None:
    with DevCluster(tmp_path / "state", die_with_parent=True) as cluster:
        assert cluster.running()
        with pytest.raises(UsageError, match="already running"):
            DevCluster(tmp_path / "state").up()
        pids = [c.pid for c in cluster.components.values()]
    assert not any(is_running(pid) for pid in pids)
