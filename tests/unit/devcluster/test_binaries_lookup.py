"""Finding the control-plane binaries: env override, pointer file, and the errors that say what to run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster.binaries import REQUIRED, BinariesNotFound, cache_dir, find_bin_dir


def make_bin_dir(path: Path, names: tuple[str, ...] = REQUIRED) -> Path:
    path.mkdir(parents=True)
    for name in names:
        exe = path / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return path


def test_env_var_wins(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path / "bin")
    env = {"KOPF_SCHEDULER_BIN_DIR": str(bin_dir), "HOME": str(tmp_path / "home")}
    assert find_bin_dir(env) == bin_dir


def test_pointer_file_under_cache(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path / "somewhere" / "bin")
    cache = tmp_path / "cache"
    (cache / "controlplane").mkdir(parents=True)
    (cache / "controlplane" / "current").write_text(f"{bin_dir}\n")
    assert find_bin_dir({"KOPF_SCHEDULER_CACHE": str(cache)}) == bin_dir


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param({"KOPF_SCHEDULER_CACHE": "/c"}, Path("/c"), id="explicit-cache"),
        pytest.param({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, Path("/x/kopf-scheduler"), id="xdg"),
        pytest.param({"HOME": "/h"}, Path("/h/.cache/kopf-scheduler"), id="home"),
    ],
)
def test_cache_dir(env: dict[str, str], expected: Path) -> None:
    assert cache_dir(env) == expected


def test_nothing_built_says_make_controlplane(tmp_path: Path) -> None:
    with pytest.raises(BinariesNotFound, match="make controlplane") as info:
        find_bin_dir({"KOPF_SCHEDULER_CACHE": str(tmp_path)})
    assert isinstance(info.value, UsageError)


def test_incomplete_dir_names_missing_binaries(tmp_path: Path) -> None:
    bin_dir = make_bin_dir(tmp_path / "bin", ("etcd", "kubectl"))
    with pytest.raises(BinariesNotFound, match="missing kube-apiserver, kube-scheduler"):
        find_bin_dir({"KOPF_SCHEDULER_BIN_DIR": str(bin_dir)})


def test_empty_pointer_file(tmp_path: Path) -> None:
    (tmp_path / "controlplane").mkdir()
    (tmp_path / "controlplane" / "current").write_text("\n")
    with pytest.raises(BinariesNotFound, match="is empty"):
        find_bin_dir({"KOPF_SCHEDULER_CACHE": str(tmp_path)})
