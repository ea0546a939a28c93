#!/usr/bin/env python3
"""Regenerates the image's lock files from pyproject.toml and PyPI.

``requirements.lock``: every Python distribution the image installs, the closure of the package's
``[project] dependencies`` resolved for the image's interpreter (CPython ``PYTHON_VERSION`` on manylinux
up to ``GLIBC_VERSION``, ``WHEEL_ARCH``: versions.env), each pinned to one version and the sha256 of the
one wheel pip picks for that platform. ``tools.lock``: what builds and installs them, never shipped
(setuptools and wheel build the package's own wheel; pip is run from its wheel inside the root filesystem
to install the others).

Where the checkout pins its dependencies (``constraints.txt``, ``make lock``), the image takes the same
versions: what ``make test`` tested is what the image runs. The resolution is pip's own (``pip install
--dry-run --report`` with ``--platform``/``--python-version`` and binary wheels only), so an sdist can
never slip in. build.sh installs with ``--require-hashes``: a wheel whose hash is not in the lock is
refused.

Usage: hack/image/lock.py [--python PYTHON]   (a Python >= 3.11 with pip; default: the running one)
       hack/image/lock.py --platform-args       (prints pip's target-platform options; build.sh uses them)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: build requirements and the installer (versions: the newest that satisfy pyproject's build-system)
TOOLS = ["pip", "setuptools>=77", "wheel"]


def versions() -> dict[str, str]:
    """versions.env as a dict (KEY=value lines; comments and blank lines skipped)."""
    out = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def platform_args(env: dict[str, str]) -> list[str]:
    """pip's target-platform options for the image: every manylinux tag its glibc accepts (pip does not
    expand ``manylinux_2_36`` to the older ones by itself), newest first."""
    major, minor = (int(x) for x in env["GLIBC_VERSION"].split("."))
    arch = env["WHEEL_ARCH"]
    tags = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 16, -1)]
    tags += [f"manylinux2014_{arch}", f"manylinux2010_{arch}", f"manylinux1_{arch}"]
    py = env["PYTHON_VERSION"]
    abi = "cp" + py.replace(".", "")
    args = ["--only-binary=:all:", "--python-version", py, "--implementation", "cp", "--abi", abi]
    for tag in tags:
        args += ["--platform", tag]
    return args


def resolve(
    python: str, requirements: list[str], env: dict[str, str], constraints: Path | None = None
) -> list[tuple[str, str, str, str]]:
    """(name, version, sha256, file name) of each distribution pip would install, sorted by name."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
             "--no-cache-dir", "--report", str(report), "--target", str(Path(tmp) / "target"),
             *platform_args(env), *(["--constraint", str(constraints)] if constraints else []),
             *requirements],
            check=True,
        )  # fmt: skip
        data = json.loads(report.read_text())
    pins = []
    for item in data["install"]:
        info = item["download_info"]
        pins.append(
            (
                item["metadata"]["name"],
                item["metadata"]["version"],
                info["archive_info"]["hashes"]["sha256"],
                info["url"].rsplit("/", 1)[1],
            )
        )
    return sorted(pins, key=lambda p: p[0].lower())


def write(path: Path, header: str, pins: list[tuple[str, str, str, str]]) -> None:
    lines = [f"# {line}".rstrip() for line in header.strip().splitlines()]
    for name, version, sha256, filename in pins:
        lines += [f"{name}=={version} \\", f"    --hash=sha256:{sha256}", f"    # {filename}"]
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="the Python whose pip resolves")
    parser.add_argument("--platform-args", action="store_true", help="print pip's platform options, exit")
    args = parser.parse_args()
    env = versions()
    if args.platform_args:
        print(" ".join(platform_args(env)))
        return 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    constraints = ROOT / "constraints.txt"
    platform = (
        f"CPython {env['PYTHON_VERSION']}, manylinux <= glibc {env['GLIBC_VERSION']}, {env['WHEEL_ARCH']}"
    )
    write(
        HERE / "requirements.lock",
        f"""
The Python distributions of the image: {project["name"]}'s dependencies (pyproject.toml) and theirs,
at the versions of constraints.txt, each pinned to the one wheel for
{platform}.
Generated by hack/image/lock.py from PyPI; do not edit. build.sh installs them with --require-hashes.
""",
        resolve(
            args.python, list(project["dependencies"]), env, constraints if constraints.is_file() else None
        ),
    )
    write(
        HERE / "tools.lock",
        """
What builds the image's Python layer and is never shipped: setuptools and wheel build the package's own
wheel (pyproject.toml's build-system), pip installs the wheels inside the root filesystem (run from its
wheel file). Generated by hack/image/lock.py from PyPI; do not edit.
""",
        resolve(args.python, TOOLS, env),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
