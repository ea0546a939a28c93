"""``make release`` (hack/release/build.py) gives what a user installs, and the same bytes twice.

The commit checked out is built into a temporary folder, twice: the krew manifest passes the checks
krew makes before it installs a plugin (its ``ValidatePlugin``: apiVersion, kind, a safe name, a
one-line short description, a ``v``-prefixed semantic version, and per platform a uri, a sha256, a
bin, from/to file operations and a selector on os/arch only), names the archive by the sha256 it has,
and the archive, unpacked and laid out as the manifest's ``files`` say, runs: ``kubectl-kopf_scheduler
--version`` prints the installed package's version (through ``kopf-scheduler`` on PATH, or ``python3 -m
kopf_scheduler``), and without the package it says in one line how to install it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler import __version__

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "hack" / "release" / "build.py"
#: krew's internal/installation/semver: a "v", then a semantic version
KREW_SEMVER = re.compile(r"^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
KREW_API_VERSION = "krew.googlecontainertools.github.com/v1alpha2"
WINDOWS_FORBIDDEN = {
    "CON",
    "PRN",
    "AUX",
    "NUL",
    *(f"COM{i}" for i in range(1, 10)),
    *(f"LPT{i}" for i in range(1, 10)),
}


def build(out: Path, rev: str) -> dict[str, Path]:
    done = subprocess.run(
        [sys.executable, str(BUILD), "--out", str(out), "--rev", rev],
        capture_output=True, text=True, timeout=600, check=False,
        env={k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {p.name: p for p in out.iterdir()}


@pytest.fixture(scope="module")
def head() -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory, head: str) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("release"), head)


@pytest.fixture(scope="module")
def manifest(release: dict[str, Path]) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(release["kopf-scheduler.yaml"].read_text())
    return loaded


def krew_problems(name: str, plugin: dict[str, Any]) -> list[str]:
    """What krew's ValidatePlugin(name, plugin) would refuse (internal/index/validation/validate.go)."""
    problems = []
    spec = plugin.get("spec") or {}
    if plugin.get("apiVersion") != KREW_API_VERSION:
        problems.append(f"apiVersion {plugin.get('apiVersion')!r}")
    if plugin.get("kind") != "Plugin":
        problems.append(f"kind {plugin.get('kind')!r}")
    if not re.fullmatch(r"[\w-]+", name) or name.upper() in WINDOWS_FORBIDDEN:
        problems.append(f"unsafe name {name!r}")
    if (plugin.get("metadata") or {}).get("name") != name:
        problems.append("metadata.name is not the manifest file's name")
    short = spec.get("shortDescription") or ""
    if not short or "\n" in short or "\r" in short:
        problems.append("shortDescription empty or not one line")
    if not KREW_SEMVER.match(str(spec.get("version", ""))):
        problems.append(f"version {spec.get('version')!r}")
    if not spec.get("platforms"):
        problems.append("no platforms")
    for i, platform in enumerate(spec.get("platforms") or []):
        if not platform.get("uri"):
            problems.append(f"platforms[{i}].uri")
        if not re.fullmatch(r"[a-f0-9]{64}", str(platform.get("sha256", ""))):
            problems.append(f"platforms[{i}].sha256")
        if not platform.get("bin"):
            problems.append(f"platforms[{i}].bin")
        files = platform.get("files")
        if files is not None and (not files or any(not f.get("from") or not f.get("to") for f in files)):
            problems.append(f"platforms[{i}].files")
        selector = platform.get("selector") or {}
        keys = [
            *(selector.get("matchLabels") or {}),
            *(e.get("key") for e in selector.get("matchExpressions") or []),
        ]
        if not keys or any(k not in ("os", "arch") for k in keys):
            problems.append(f"platforms[{i}].selector")
    return problems


def test_the_manifest_passes_krews_validation(manifest: dict[str, Any]) -> None:
    assert krew_problems("kopf-scheduler", manifest) == []
    assert manifest["spec"]["version"] == f"v{__version__}"


def test_krews_validation_here_refuses_what_krew_refuses(manifest: dict[str, Any]) -> None:
    """The check above is not vacuous: each broken field is named."""
    broken = yaml.safe_load(yaml.safe_dump(manifest))
    broken["spec"]["version"] = __version__  # no "v"
    broken["spec"]["platforms"][0]["sha256"] = "ABC"
    broken["spec"]["platforms"][0]["selector"] = {"matchLabels": {"distro": "debian"}}
    assert krew_problems("kopf-scheduler", broken) == [
        f"version {__version__!r}",
        "platforms[0].sha256",
        "platforms[0].selector",
    ]


def test_kubectl_finds_the_plugin_krew_links(manifest: dict[str, Any]) -> None:
    """krew links ``kubectl-<name with _ for ->`` to ``bin``; kubectl runs that file for ``kubectl
    kopf-scheduler``; the package's console script of the same name is the same command."""
    [platform] = manifest["spec"]["platforms"]
    assert (
        "kubectl-" + manifest["metadata"]["name"].replace("-", "_")
        == platform["bin"]
        == "kubectl-kopf_scheduler"
    )
    assert {"linux", "darwin"} == set(platform["selector"]["matchExpressions"][0]["values"])


def test_the_manifest_names_the_archive_by_its_sha256(
    release: dict[str, Path], manifest: dict[str, Any]
) -> None:
    [platform] = manifest["spec"]["platforms"]
    archive = release[platform["uri"].rsplit("/", 1)[1]]
    assert archive.name == f"kubectl-kopf_scheduler-v{__version__}.tar.gz"
    assert platform["uri"] == (
        f"https://github.com/kopf-scheduler/kopf-scheduler/releases/download/v{__version__}/{archive.name}"
    )
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == platform["sha256"]
    sums = dict(reversed(line.split("  ")) for line in release["SHA256SUMS"].read_text().splitlines())
    assert sorted(sums) == sorted(n for n in release if n != "SHA256SUMS")
    assert all(hashlib.sha256(release[n].read_bytes()).hexdigest() == s for n, s in sums.items())


def test_the_wheel_and_sdist_are_the_package(release: dict[str, Path]) -> None:
    wheel = release[f"kopf_scheduler-{__version__}-py3-none-any.whl"]
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = z.read(f"kopf_scheduler-{__version__}.dist-info/entry_points.txt").decode()
    assert "kopf_scheduler/__main__.py" in names and "kopf_scheduler/py.typed" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/"))]
    assert "kopf-scheduler = kopf_scheduler.__main__:cli" in entry_points
    with tarfile.open(release[f"kopf_scheduler-{__version__}.tar.gz"]) as tar:
        members = tar.getmembers()
    assert f"kopf_scheduler-{__version__}/pyproject.toml" in [m.name for m in members]
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert [m.name for m in members] == sorted(m.name for m in members)


def test_one_commit_gives_the_same_bytes(release: dict[str, Path], tmp_path: Path, head: str) -> None:
    again = build(tmp_path / "again", head)
    assert sorted(again) == sorted(release)
    different = [n for n in release if release[n].read_bytes() != again[n].read_bytes()]
    assert different == []


def install_as_krew_does(archive: Path, platform: dict[str, Any], where: Path) -> Path:
    """Unpacks the archive, applies ``files`` (each ``from`` glob into ``to``) and returns ``bin``."""
    unpacked, installed = where / "download", where / "install"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="tar")  # keeps the modes, as krew's untar does
    for op in platform["files"]:
        for path in unpacked.iterdir():
            if fnmatch.fnmatch(path.name, op["from"]):
                (installed / op["to"]).mkdir(parents=True, exist_ok=True)
                shutil.move(path, installed / op["to"] / path.name)
    binary = installed / platform["bin"]
    assert sorted(p.name for p in installed.iterdir()) == ["LICENSE", "kubectl-kopf_scheduler"]
    assert os.access(binary, os.X_OK)
    return binary


def launch(binary: Path, path: list[Path]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.pathsep.join(map(str, path)), "HOME": str(binary.parent)}
    return subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, env=env, check=False
    )


@pytest.fixture
def plugin(release: dict[str, Path], manifest: dict[str, Any], tmp_path: Path) -> Path:
    [platform] = manifest["spec"]["platforms"]
    return install_as_krew_does(release[platform["uri"].rsplit("/", 1)[1]], platform, tmp_path)


def test_the_plugin_runs_the_installed_command(plugin: Path) -> None:
    scripts = Path(sys.executable).parent  # kopf-scheduler, installed with the package
    assert (scripts / "kopf-scheduler").exists()
    done = launch(plugin, [scripts])
    assert (done.returncode, done.stdout.strip()) == (0, f"kopf-scheduler v{__version__}"), done.stderr


def test_the_plugin_falls_back_to_python_m(plugin: Path, tmp_path: Path) -> None:
    """Only a python3 that has the package (the command's folder not on PATH)."""
    only_python = tmp_path / "bin"
    only_python.mkdir()
    python3 = only_python / "python3"  # the virtualenv's Python (a symlink elsewhere would not be)
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    done = launch(plugin, [only_python])
    assert (done.returncode, done.stdout.strip()) == (0, f"kopf-scheduler v{__version__}"), done.stderr


def test_without_the_package_the_plugin_says_how_to_install_it(plugin: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = launch(plugin, [empty])
    assert done.returncode == 127
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line == (
        "kubectl kopf-scheduler: the kopf-scheduler command is not installed; install the kopf-scheduler "
        f"{__version__} package with pip (https://github.com/kopf-scheduler/kopf-scheduler#install)"
    )
