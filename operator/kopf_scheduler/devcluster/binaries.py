"""Locating the control-plane binaries built by ``hack/controlplane/build.sh``.

The package never builds anything itself: building takes many minutes and belongs to ``make
controlplane``. Lookup order: ``$KOPF_SCHEDULER_BIN_DIR``, then the one-line pointer file
``<cache>/controlplane/current`` that build.sh writes after a successful build.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kopf_scheduler.api.errors import UsageError

BIN_DIR_ENV = "KOPF_SCHEDULER_BIN_DIR"
CACHE_ENV = "KOPF_SCHEDULER_CACHE"
REQUIRED = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl")
HOW_TO_BUILD = "run `make controlplane` (hack/controlplane/build.sh builds them)"


class BinariesNotFound(UsageError):
    """The control-plane binaries are not built, or the configured location is incomplete."""


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache root build.sh uses: $KOPF_SCHEDULER_CACHE or $XDG_CACHE_HOME/kopf-scheduler."""
    env = os.environ if env is None else env
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    xdg = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(xdg) / "kopf-scheduler"


def pointer_file(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir(env) / "controlplane" / "current"


def find_bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory holding every binary in ``REQUIRED``; raise `BinariesNotFound` otherwise."""
    env = os.environ if env is None else env
    explicit = env.get(BIN_DIR_ENV)
    if explicit:
        return _checked(Path(explicit), f"${BIN_DIR_ENV}={explicit}")
    pointer = pointer_file(env)
    try:
        target = pointer.read_text().strip()
    except FileNotFoundError:
        raise BinariesNotFound(
            f"control-plane binaries not found (no ${BIN_DIR_ENV} and no {pointer}); {HOW_TO_BUILD}"
        ) from None
    if not target:
        raise BinariesNotFound(f"{pointer} is empty; {HOW_TO_BUILD}")
    return _checked(Path(target), f"{pointer} -> {target}")


def _checked(bin_dir: Path, origin: str) -> Path:
    missing = [name for name in REQUIRED if not os.access(bin_dir / name, os.X_OK)]
    if missing:
        raise BinariesNotFound(f"{origin}: missing {', '.join(missing)}; {HOW_TO_BUILD}")
    return bin_dir


def require(bin_dir: Path, name: str) -> Path:
    """The executable ``name`` in ``bin_dir``; raise `BinariesNotFound` when it is not there. For binaries
    only some clusters use (kube-controller-manager): a bin dir built before they were added still serves
    the others."""
    path = bin_dir / name
    if not os.access(path, os.X_OK):
        raise BinariesNotFound(f"{bin_dir}: missing {name}; {HOW_TO_BUILD}")
    return path


def built_tool(build: str, name: str, env: Mapping[str, str] | None = None) -> Path:
    """An executable another build script of hack/controlplane left in ``<cache>/<build>/current``
    (``helm``; scheduler-plugins' ``kube-scheduler``); `BinariesNotFound` when it is not built."""
    pointer = cache_dir(env) / build / "current"
    try:
        binary = Path(pointer.read_text().strip()) / name
    except FileNotFoundError:
        raise BinariesNotFound(f"{name} not built (no {pointer}); {HOW_TO_BUILD}") from None
    if not os.access(binary, os.X_OK):
        raise BinariesNotFound(f"{binary} missing; {HOW_TO_BUILD}")
    return binary
