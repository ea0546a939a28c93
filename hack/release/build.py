#!/usr/bin/env python3
"""Builds a release of kopf-scheduler into one folder (``make release``: dist/release/):

- ``kopf_scheduler-VERSION-py3-none-any.whl`` and ``kopf_scheduler-VERSION.tar.gz``: the package, built
  with the setuptools and wheel of hack/image/tools.lock (no build isolation: nothing unpinned is
  fetched) from a commit's files (``--rev``, default HEAD: uncommitted changes are not released);
- ``kubectl-kopf_scheduler-vVERSION.tar.gz``: the krew plugin's archive, the launcher
  ``kubectl-kopf_scheduler`` (it runs the pip-installed ``kopf-scheduler`` command) and LICENSE;
- ``kopf-scheduler.yaml``: the krew manifest (hack/release/kopf-scheduler.yaml) with the version, the
  archive's address (``--base-url``, default the GitHub release of the version) and its sha256;
- ``SHA256SUMS`` of the four.

Reproducible, one commit gives the same bytes: every timestamp is SOURCE_DATE_EPOCH (default: the
commit's time), archive entries are sorted, owned by 0:0 with normalised modes, gzip without name or
time; the wheel's entries are dated by the wheel package from the same SOURCE_DATE_EPOCH, and the sdist
setuptools writes is re-packed so (tests/unit/release/test_release.py builds one commit twice).

Runs on the standard library alone (any Python 3.11+): ``python3 hack/release/build.py [--out DIR]``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS_LOCK = ROOT / "hack" / "image" / "tools.lock"  # the image's build tools, pinned with hashes
LAUNCHER = "kubectl-kopf_scheduler"
MANIFEST = "kopf-scheduler.yaml"
HOMEPAGE = "https://github.com/kopf-scheduler/kopf-scheduler"
BASE_URL = HOMEPAGE + "/releases/download/v{version}"


def log(message: str) -> None:
    print(f"release: {message}", file=sys.stderr, flush=True)


def run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        sys.exit(f"release: {' '.join(map(str, argv))} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def commit(rev: str) -> str:
    return run("git", "-C", ROOT, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()


def source_date_epoch(rev: str) -> int:
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    return int(run("git", "-C", ROOT, "log", "-1", "--format=%ct", rev).strip())


def export(rev: str, dest: Path) -> None:
    """The commit's files the release is made of into ``dest``: those at the top and in operator/ (the
    package, as the image has them) and hack/release/ (the launcher and the manifest's template)."""
    top = [
        line.split("\t", 1)[1]
        for line in run("git", "-C", ROOT, "ls-tree", rev).splitlines()
        if line.split()[1] == "blob"
    ]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "--", *top, "operator", "hack/release"],
        capture_output=True, check=False,
    )  # fmt: skip
    if archive.returncode != 0:
        sys.exit(f"release: git archive {rev} failed: {archive.stderr.decode()}")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")


def cache_root() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kopf-scheduler"
    return Path(os.environ.get("KOPF_SCHEDULER_CACHE") or default)


def build_venv() -> Path:
    """A virtualenv with hack/image/tools.lock's pip, setuptools and wheel (made once, by hash)."""
    key = hashlib.sha256(TOOLS_LOCK.read_bytes()).hexdigest()[:12]
    venv = cache_root() / "release" / f"build-venv-{key}"
    if not (venv / "bin" / "python").exists():
        log(f"making the build venv {venv}")
        partial = venv.with_name(venv.name + f".tmp{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        run(sys.executable, "-m", "venv", partial)
        run(partial / "bin" / "python", "-m", "pip", "install", "-q", "--require-hashes", "--no-deps",
            "-r", TOOLS_LOCK)  # fmt: skip
        try:
            partial.rename(venv)
        except OSError:  # another build made it meanwhile
            shutil.rmtree(partial, ignore_errors=True)
    return venv


def normal(info: tarfile.TarInfo, epoch: int) -> tarfile.TarInfo:
    info.mtime = epoch
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.pax_headers = {}
    executable = info.isdir() or info.mode & 0o100
    info.mode = 0o755 if executable else 0o644
    return info


def write_tar_gz(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], epoch: int) -> None:
    """A .tar.gz of ``members`` in name order, normalised (see the module's docstring)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in sorted(members, key=lambda m: m[0].name):
            tar.addfile(normal(info, epoch), io.BytesIO(data) if data is not None else None)
    with path.open("wb") as out, gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as gz:
        gz.write(raw.getvalue())


def repack(path: Path, epoch: int) -> None:
    """Rewrites a .tar.gz (setuptools' sdist) in the normalised form."""
    members: list[tuple[tarfile.TarInfo, bytes | None]] = []
    with tarfile.open(path) as tar:
        for info in tar.getmembers():
            handle = tar.extractfile(info) if info.isfile() else None
            members.append((info, handle.read() if handle else None))
    write_tar_gz(path, members, epoch)


def file_member(name: str, data: bytes, mode: int) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    return info, data


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(out: Path, base_url: str, rev: str) -> None:
    sha = commit(rev)
    epoch = source_date_epoch(sha)
    env = {**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    venv = build_venv()
    with tempfile.TemporaryDirectory(prefix="kopf-scheduler-release-") as tmp:
        src, stage = Path(tmp) / "src", Path(tmp) / "stage"
        stage.mkdir()
        export(sha, src)
        here = src / "hack" / "release"
        log(f"building the wheel and sdist of {sha} (SOURCE_DATE_EPOCH={epoch})")
        python = venv / "bin" / "python"
        run(python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", stage, ".",
            cwd=src, env=env)  # fmt: skip
        build_sdist = "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
        sdist = run(python, "-c", build_sdist, stage, cwd=src, env=env).strip().splitlines()[-1]
        repack(stage / sdist, epoch)
        [wheel] = stage.glob("kopf_scheduler-*.whl")
        version = wheel.name.split("-")[1]

        archive = stage / f"{LAUNCHER}-v{version}.tar.gz"
        launcher = (here / LAUNCHER).read_text().replace("@VERSION@", version).replace("@HOMEPAGE@", HOMEPAGE)
        files = [
            file_member(LAUNCHER, launcher.encode(), 0o755),
            file_member("LICENSE", (src / "LICENSE").read_bytes(), 0o644),
        ]
        write_tar_gz(archive, files, epoch)
        uri = f"{base_url.format(version=version).rstrip('/')}/{archive.name}"
        manifest = (here / MANIFEST).read_text()
        manifest = manifest.split("\napiVersion:", 1)[1]  # the template's own comment is not shipped
        for key, value in {
            "VERSION": version,
            "HOMEPAGE": HOMEPAGE,
            "URI": uri,
            "SHA256": sha256(archive),
        }.items():
            manifest = manifest.replace(f"@{key}@", value)
        (stage / MANIFEST).write_text("apiVersion:" + manifest)

        names = sorted(p.name for p in stage.iterdir())
        (stage / "SHA256SUMS").write_text("".join(f"{sha256(stage / n)}  {n}\n" for n in names))
        out.mkdir(parents=True, exist_ok=True)
        for old in out.iterdir():
            if old.is_file():
                old.unlink()
        for name in [*names, "SHA256SUMS"]:
            shutil.move(stage / name, out / name)
    log(f"{out}: " + ", ".join(sorted(p.name for p in out.iterdir())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "release", help="default: dist/release")
    parser.add_argument(
        "--base-url",
        default=BASE_URL,
        help="where the plugin's archive is published ({version} is filled in); default: " + BASE_URL,
    )
    parser.add_argument("--rev", default="HEAD", help="the commit to release (default: HEAD)")
    args = parser.parse_args()
    build(args.out.resolve(), args.base_url, args.rev)


if __name__ == "__main__":
    main()
