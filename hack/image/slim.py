#!/usr/bin/env python3
"""Turns the root filesystem mmdebstrap made (Debian's essential set, the packages of versions.env and the
operator's virtual environment) into the image's: only what the operator runs on stays.

- Kept: the packages named (``--keep``) and the closure of their ``Depends``/``Pre-Depends``, minus
  those needed only to configure packages (``CONFIGURE_ONLY``: dpkg, debconf, openssl, mawk). Every
  other package is removed file by file from its ``/var/lib/dpkg/info/<package>.list`` (a path another
  kept package lists stays; a directory only removed packages list goes with whatever their maintainer
  scripts left in it, ``/etc/pam.d`` for one), its stanza is dropped from ``/var/lib/dpkg/status`` and
  its info files go: the status file then lists exactly the packages whose files are in the image, which
  scanners and the SBOM read. dpkg itself is among the removed: the image has no package manager, no
  shell, no compiler.
- Symbolic links left dangling (``/etc/alternatives``, ``/bin/sh``) are removed; documentation other than
  the copyright files, manual pages, locales, logs, apt's and dpkg's state other than the status, and the
  files a container runtime provides (``/etc/hostname``, ``/etc/resolv.conf``) go.
- The user and group ``nonroot`` (``--uid``, 65532 as in distroless) are added, with a home directory.

Checks at the end (exit 1 naming the offender): no package manager, shell or compiler is left, no
setuid or setgid file, every dependency of a kept package is kept or configure-only.

Usage: slim.py ROOTFS --keep python3,ca-certificates,... [--uid 65532]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

#: needed by maintainer scripts when the packages were configured, never at run time
CONFIGURE_ONLY = frozenset({"dpkg", "debconf", "openssl", "mawk"})
#: dpkg lists it as its own; its status and the kept packages' info files stay (see remove_packages)
DPKG_DATABASE = "/var/lib/dpkg"
#: always kept besides --keep: /etc/os-release, /etc/debian_version (what scanners identify the OS by)
ALWAYS_KEEP = ("base-files",)
#: program names that must not be in the image (package managers, shells, compilers and linkers)
FORBIDDEN_PROGRAMS = frozenset(
    {
        "dpkg", "dpkg-deb", "apt", "apt-get", "aptitude", "pip", "pip3", "pip3.11", "easy_install",
        "sh", "bash", "dash", "zsh", "busybox", "su", "sudo",
        "gcc", "cc", "c++", "g++", "cpp", "clang", "tcc", "as", "ld", "ld.bfd", "ld.gold", "make",
    }
)  # fmt: skip
BIN_DIRS = ("usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin", "opt/kopf-scheduler/bin")
REMOVE = (
    "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian", "usr/share/linda",
    "usr/share/bug", "usr/share/menu", "usr/share/bash-completion", "usr/share/common-licenses",
    "var/cache", "var/log", "var/lib/apt", "etc/apt", "var/backups",
    "etc/hostname", "etc/resolv.conf", "etc/machine-id", "etc/skel",
    "var/lib/dpkg/alternatives", "var/lib/dpkg/triggers", "var/lib/dpkg/updates", "var/lib/dpkg/parts",
    "var/lib/dpkg/available", "var/lib/dpkg/status-old", "var/lib/dpkg/diversions",
    "var/lib/dpkg/diversions-old", "var/lib/dpkg/statoverride", "var/lib/dpkg/arch", "var/lib/dpkg/lock",
    "var/lib/dpkg/lock-frontend", "var/lib/dpkg/cmethopt",
)  # fmt: skip
#: emptied, kept as directories (the runtime mounts over them or the image's users write there)
EMPTY = ("tmp", "run", "dev", "proc", "sys", "var/tmp", "root")


# -- dpkg's database -------------------------------------------------------------------------------------


def stanzas(text: str) -> list[dict[str, str]]:
    """The paragraphs of a deb822 file (dpkg's status) as field -> value (continuation lines joined)."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
            else:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        out.append(fields)
    return out


def alternatives(field: str) -> Iterator[list[str]]:
    """``Depends`` as groups of alternatives, each a package name (versions and arch qualifiers dropped)."""
    for group in filter(None, (g.strip() for g in field.split(","))):
        yield [re.split(r"[\s(:\[]", alt.strip(), maxsplit=1)[0] for alt in group.split("|")]


def closure(packages: dict[str, dict[str, str]], roots: Iterable[str]) -> set[str]:
    """The roots and every installed package they depend on (the first installed alternative of each
    group, a virtual name resolved through ``Provides``), configure-only packages not followed."""
    provides: dict[str, str] = {}
    for name, fields in packages.items():
        for group in alternatives(fields.get("Provides", "")):
            provides.setdefault(group[0], name)
    keep: set[str] = set()
    todo = [r for r in roots]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        if name not in packages:
            raise SystemExit(f"slim.py: {name} is to be kept but is not installed")
        keep.add(name)
        fields = packages[name]
        for group in alternatives(fields.get("Pre-Depends", "") + "," + fields.get("Depends", "")):
            found = [a if a in packages else provides.get(a) for a in group]
            chosen = next((f for f in found if f), None)
            if chosen is None:
                raise SystemExit(f"slim.py: {name} depends on {' | '.join(group)}: none installed")
            if chosen not in CONFIGURE_ONLY:
                todo.append(chosen)
    return keep


def info_files(info: Path, package: str) -> list[Path]:
    """dpkg's info files of a package (``libc6:amd64.list`` for Multi-Arch: same ones)."""
    return [p for p in info.iterdir() if p.name.rsplit(".", 1)[0].split(":", 1)[0] == package]


def listed(info: Path, package: str) -> list[str]:
    lists = [p for p in info_files(info, package) if p.suffix == ".list"]
    return [line for p in lists for line in p.read_text().splitlines() if line and line != "/."]


# -- paths inside the root filesystem --------------------------------------------------------------------


def resolve(root: Path, path: str, depth: int = 0) -> Path:
    """``path`` (absolute, in the image) resolved through symbolic links without leaving ``root``."""
    if depth > 40:
        raise SystemExit(f"slim.py: symlink loop at {path}")
    current = root
    parts = [p for p in path.split("/") if p and p != "."]
    for i, part in enumerate(parts):
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if candidate.is_symlink():
            target = os.readlink(candidate)
            base = "/" if target.startswith("/") else "/" + str(current.relative_to(root))
            rest = "/".join(parts[i + 1 :])
            return resolve(root, f"{base}/{target}/{rest}", depth + 1)
        current = candidate
    return current


def canonical(root: Path, path: str) -> str:
    """The path with its directories resolved (``/bin/sh`` -> ``/usr/bin/sh`` on merged-/usr systems), the
    last component kept as it is."""
    parent, _, name = path.rstrip("/").rpartition("/")
    return "/" + str((resolve(root, parent or "/") / name).relative_to(root))


def dangling(root: Path, link: Path) -> bool:
    target = os.readlink(link)
    absolute = target if target.startswith("/") else "/" + str(link.parent.relative_to(root)) + "/" + target
    return not resolve(root, absolute).exists()


def walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            yield Path(dirpath) / name


# -- the steps --------------------------------------------------------------------------------------------


def remove_packages(root: Path, keep_roots: list[str]) -> list[str]:
    dpkg = root / "var/lib/dpkg"
    info = dpkg / "info"
    entries = stanzas((dpkg / "status").read_text())
    packages = {e["Package"]: e for e in entries if "installed" in e.get("Status", "")}
    keep = closure(packages, [*ALWAYS_KEEP, *keep_roots])
    dropped = sorted(set(packages) - keep)
    kept_paths = {canonical(root, p) for name in keep for p in listed(info, name)}
    for name in dropped:
        for path in sorted(set(listed(info, name)), reverse=True):  # children before their directory
            canon = canonical(root, path)
            if canon in kept_paths:
                continue
            full = root / canon.lstrip("/")
            if full.parent == root or canon.startswith(DPKG_DATABASE):
                continue  # /bin, /lib, /etc, ...: the layout itself stays; dpkg's database is below
            if full.is_symlink() or full.is_file():
                full.unlink()
            elif full.is_dir():
                # a directory no kept package lists holds no kept file (dpkg lists every directory of
                # a package): what is left in it was made by the removed packages' maintainer scripts
                shutil.rmtree(full)
        for p in info_files(info, name):
            p.unlink()
    blocks = re.split(r"\n\s*\n", (dpkg / "status").read_text().strip())
    kept = [b for b in blocks if stanzas(b)[0].get("Package") in keep]
    (dpkg / "status").write_text("\n\n".join(kept) + "\n")
    return dropped


def remove_dangling_links(root: Path) -> list[str]:
    removed: list[str] = []
    while True:
        found = [p for p in walk(root) if p.is_symlink() and dangling(root, p)]
        if not found:
            return removed
        for p in found:
            p.unlink()
            removed.append("/" + str(p.relative_to(root)))


def remove_extras(root: Path) -> None:
    for rel in REMOVE:
        p = root / rel
        if p.is_symlink() or p.is_file():
            p.unlink()
        elif p.is_dir():
            shutil.rmtree(p)
    doc = root / "usr/share/doc"
    for p in sorted(doc.rglob("*"), reverse=True) if doc.is_dir() else ():
        if p.is_symlink() or p.is_file():
            if p.name != "copyright":
                p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    for rel in EMPTY:
        d = root / rel
        if d.is_dir() and not d.is_symlink():
            for child in d.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    venv_bin = root / "opt/kopf-scheduler/bin"
    for script in venv_bin.glob("activate*") if venv_bin.is_dir() else ():  # need a shell
        script.unlink()


def add_user(root: Path, uid: int, name: str = "nonroot") -> None:
    home = f"/home/{name}"
    files = {
        "etc/passwd": f"{name}:x:{uid}:{uid}:{name}:{home}:/usr/sbin/nologin\n",
        "etc/group": f"{name}:x:{uid}:\n",
        "etc/shadow": f"{name}:!:1::::::\n",
        "etc/gshadow": f"{name}:!::\n",
    }
    for rel, line in files.items():
        path = root / rel
        text = path.read_text() if path.exists() else ""
        if not any(entry.split(":", 1)[0] == name for entry in text.splitlines()):
            path.write_text(text + line)
    directory = root / home.lstrip("/")
    directory.mkdir(parents=True, exist_ok=True)
    os.chown(directory, uid, uid)
    directory.chmod(0o700)


def problems(root: Path, packages_text: str) -> list[str]:
    found = []
    for rel in BIN_DIRS:
        d = root / rel
        for p in d.iterdir() if d.is_dir() else ():
            if p.name in FORBIDDEN_PROGRAMS or re.fullmatch(r"(gcc|g\+\+|cpp|pip)[-.\d]*", p.name):
                found.append(f"/{p.relative_to(root)}: a package manager, shell or compiler")
    for p in walk(root):
        if not p.is_symlink() and p.is_file() and p.stat().st_mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"/{p.relative_to(root)}: setuid or setgid")
    if re.search(r"(?m)^Package: (dpkg|apt)$", packages_text):
        found.append("dpkg or apt is still listed as installed")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("--keep", required=True, help="comma-separated packages to keep (and their deps)")
    parser.add_argument("--uid", type=int, default=65532)
    args = parser.parse_args()
    root: Path = args.rootfs.resolve()
    dropped = remove_packages(root, [p for p in args.keep.split(",") if p])
    links = remove_dangling_links(root)
    remove_extras(root)
    links += remove_dangling_links(root)
    add_user(root, args.uid)
    status = (root / "var/lib/dpkg/status").read_text()
    kept = re.findall(r"(?m)^Package: (\S+)$", status)
    print(f"slim.py: kept {len(kept)} packages: {' '.join(sorted(kept))}")
    print(f"slim.py: removed {len(dropped)} packages: {' '.join(dropped)}")
    print(f"slim.py: removed {len(links)} dangling links")
    found = problems(root, status)
    for line in found:
        print(f"slim.py: error: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
