#!/usr/bin/env python3
"""Writes a root filesystem as an OCI image archive: byte for byte the same for the same files.

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) with Docker's
``manifest.json`` beside it, as ``docker save`` writes since Docker 25: podman load and skopeo read the
layout, ``ctr images import`` (and so ``kind load image-archive``) the index with its
``io.containerd.image.name``, ``crane push`` and ``docker load`` the manifest.json.

Three layers, so that a new version of the package ships only its own files:

1. ``debian``: everything but the virtual environment (Debian's packages, users, certificates);
2. ``python-dependencies``: the virtual environment ``/opt/kopf-scheduler`` without the package;
3. ``kopf-scheduler``: the package's files (its distribution's RECORD, its bytecode, its scripts).

Reproducibility: entries in sorted order; every mtime clamped to ``SOURCE_DATE_EPOCH`` (files made by the
build are newer than the commit); numeric owners, no user or group names, no extended attributes;
gzip without a file name or time (one zlib version gives the same bytes: another may compress
differently, so a digest is the same across builds on one machine, the uncompressed ``diff_ids`` on any);
JSON with sorted keys. ``/dev``, ``/proc`` and ``/sys`` stay empty directories (the runtime mounts them).

Usage: oci.py ROOTFS OUT.tar --name REPOSITORY:TAG --version V --revision R [--json OUT.json] ...
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

VENV = "opt/kopf-scheduler"
PACKAGE = "kopf_scheduler"
DISTRIBUTION = "kopf_scheduler"
GZIP_LEVEL = 6  # 9 takes four times as long for 1 % less
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
#: mounted by the container runtime: kept as empty directories
RUNTIME_MOUNTS = ("dev", "proc", "sys")


class HashingWriter:
    """A write-only stream that hashes and counts what passes through to ``target``."""

    def __init__(self, target: BinaryIO | Any) -> None:
        self.target = target
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        self.target.write(data)
        return len(data)

    def flush(self) -> None:
        self.target.flush()

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha256.hexdigest()


@dataclass
class Blob:
    digest: str
    size: int
    path: Path


@dataclass
class Layer:
    name: str
    blob: Blob
    diff_id: str
    uncompressed: int
    entries: int


def walk(root: Path) -> Iterator[str]:
    """Every path below ``root`` (relative, '/'-separated), sorted, parents before children."""

    def visit(rel: str) -> Iterator[str]:
        full = root / rel if rel else root
        names = sorted(os.listdir(full), key=os.fsencode)
        for name in names:
            child = f"{rel}/{name}" if rel else name
            yield child
            path = root / child
            if path.is_dir() and not path.is_symlink() and child not in RUNTIME_MOUNTS:
                yield from visit(child)

    yield from visit("")


def package_paths(root: Path) -> set[str]:
    """The package's own files: its distribution's RECORD (scripts included), its dist-info and its
    bytecode (compiled after installation, so not in RECORD)."""
    site = next((root / VENV / "lib").glob("python3*/site-packages"))
    [dist_info] = site.glob(f"{DISTRIBUTION}-*.dist-info")
    paths: set[str] = set()
    for line in (dist_info / "RECORD").read_text().splitlines():
        rel = line.rsplit(",", 2)[0]
        if rel:  # relative to site-packages; scripts as ../../../bin/NAME
            paths.add(os.path.relpath(os.path.normpath(site / rel), root))
    for top in (site / PACKAGE, dist_info):
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                paths.add(os.path.relpath(Path(dirpath) / name, root))
        paths.add(os.path.relpath(top, root))
    return paths


def with_parents(paths: set[str]) -> set[str]:
    out = set(paths)
    for p in paths:
        parts = p.split("/")
        out.update("/".join(parts[:i]) for i in range(1, len(parts)))
    return out


def tar_info(root: Path, rel: str, epoch: int) -> tarfile.TarInfo:
    path = root / rel
    st = path.lstat()
    info = tarfile.TarInfo(rel)
    info.mode = stat.S_IMODE(st.st_mode)
    info.uid, info.gid = st.st_uid, st.st_gid
    info.uname = info.gname = ""
    info.mtime = min(int(st.st_mtime), epoch)
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.size = st.st_size
    else:
        raise SystemExit(f"oci.py: /{rel}: not a file, directory or symbolic link")
    return info


def write_layer(root: Path, name: str, paths: list[str], epoch: int, blobs: Path) -> Layer:
    """One gzip-compressed layer of ``paths`` (sorted); hard links within it are kept as such."""
    tmp = blobs / f".{name}.tmp"
    with open(tmp, "wb") as raw:
        compressed = HashingWriter(raw)
        with gzip.GzipFile(
            filename="", mode="wb", fileobj=compressed, compresslevel=GZIP_LEVEL, mtime=0
        ) as gz:
            plain = HashingWriter(gz)
            seen: dict[tuple[int, int], str] = {}
            with tarfile.open(fileobj=plain, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                for rel in paths:
                    info = tar_info(root, rel, epoch)
                    if info.type == tarfile.REGTYPE:
                        st = (root / rel).lstat()
                        if st.st_nlink > 1:
                            key = (st.st_dev, st.st_ino)
                            if key in seen:
                                info.type, info.linkname, info.size = tarfile.LNKTYPE, seen[key], 0
                                tar.addfile(info)
                                continue
                            seen[key] = rel
                        with open(root / rel, "rb") as f:
                            tar.addfile(info, f)
                    else:
                        tar.addfile(info)
    blob = blobs / compressed.sha256.hexdigest()
    tmp.rename(blob)
    return Layer(name, Blob(compressed.digest, compressed.size, blob), plain.digest, plain.size, len(paths))


def json_blob(blobs: Path, value: Any) -> Blob:
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    path = blobs / digest
    path.write_bytes(data)
    return Blob("sha256:" + digest, len(data), path)


def open_binary(path: Path) -> BinaryIO:
    return open(path, "rb")


def iso(epoch: int) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def archive(out: Path, epoch: int, files: list[tuple[str, Callable[[], BinaryIO], int]]) -> None:
    """The image archive: ``files`` as (name, opener, size), in that order, as plain files."""
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as raw, tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        names = {"blobs", "blobs/sha256"}
        for name in sorted(names):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        for name, opener, size in files:
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.size = 0o644, epoch, size
            with opener() as f:
                tar.addfile(info, f)
    tmp.rename(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--name", required=True, help="REPOSITORY:TAG")
    parser.add_argument("--version", required=True)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--uid", type=int, default=65532)
    parser.add_argument("--python-version", default="3.11")
    parser.add_argument("--debian-suite", default="bookworm")
    parser.add_argument("--description", default="")
    parser.add_argument("--json", type=Path, help="write name, digests and sizes here")
    args = parser.parse_args()
    root: Path = args.rootfs.resolve()
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = iso(epoch)

    everything = list(walk(root))
    package = package_paths(root)
    venv = {p for p in everything if p == VENV or p.startswith(VENV + "/")}
    groups = {
        "debian": [p for p in everything if p not in venv],
        "python-dependencies": sorted(with_parents(venv - package), key=os.fsencode),
        "kopf-scheduler": sorted(with_parents(package), key=os.fsencode),
    }
    missing = package - set(everything)
    if missing:
        raise SystemExit(f"oci.py: RECORD names files that are not there: {sorted(missing)[:5]}")
    history_by = {
        "debian": f"mmdebstrap {args.debian_suite}: python{args.python_version} and the C libraries, "
        f"then everything not needed at run time removed; user nonroot ({args.uid})",
        "python-dependencies": f"/{VENV}: the wheels of hack/image/requirements.lock",
        "kopf-scheduler": f"/{VENV}: kopf-scheduler {args.version} from its wheel",
    }

    with tempfile.TemporaryDirectory(dir=args.out.parent) as tmp:
        blobs = Path(tmp)
        layers = [write_layer(root, name, paths, epoch, blobs) for name, paths in groups.items()]
        labels = {
            "org.opencontainers.image.title": "kopf-scheduler",
            "org.opencontainers.image.description": args.description
            or "A Kubernetes scheduler with kube-scheduler's semantics, run as a Kopf operator",
            "org.opencontainers.image.version": args.version,
            "org.opencontainers.image.revision": args.revision,
            "org.opencontainers.image.created": created,
            "org.opencontainers.image.licenses": "Apache-2.0",
        }
        config = {
            "architecture": "amd64",
            "os": "linux",
            "created": created,
            "config": {
                "User": f"{args.uid}:{args.uid}",
                "Env": [
                    f"PATH=/{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "LANG=C.UTF-8",
                    # precompiled (unchecked-hash); a read-only root filesystem takes no __pycache__
                    "PYTHONDONTWRITEBYTECODE=1",
                    "PYTHONUNBUFFERED=1",
                ],
                "Entrypoint": [f"/{VENV}/bin/kopf-scheduler"],
                "Cmd": ["run"],
                "WorkingDir": "/",
                "Labels": labels,
                "StopSignal": "SIGTERM",
            },
            "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
            "history": [
                {"created": created, "created_by": f"hack/image/build.sh ({layer.name})",
                 "comment": history_by[layer.name]}
                for layer in layers
            ],
        }  # fmt: skip
        config_blob = json_blob(blobs, config)
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_blob.digest, "size": config_blob.size},
            "layers": [
                {"mediaType": OCI_LAYER, "digest": layer.blob.digest, "size": layer.blob.size}
                for layer in layers
            ],
            "annotations": {k: v for k, v in labels.items() if k != "org.opencontainers.image.description"},
        }
        manifest_blob = json_blob(blobs, manifest)
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [
                {
                    "mediaType": OCI_MANIFEST,
                    "digest": manifest_blob.digest,
                    "size": manifest_blob.size,
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        # podman and skopeo name the loaded image after this, containerd after the next
                        "org.opencontainers.image.ref.name": args.name,
                        "io.containerd.image.name": args.name,
                    },
                }
            ],
        }

        def blob_name(blob: Blob) -> str:
            return "blobs/sha256/" + blob.digest.split(":", 1)[1]

        docker_manifest = [
            {
                "Config": blob_name(config_blob),
                "RepoTags": [args.name],
                "Layers": [blob_name(layer.blob) for layer in layers],
            }
        ]
        small = {
            "index.json": json.dumps(index, sort_keys=True, separators=(",", ":")).encode(),
            "manifest.json": json.dumps(docker_manifest, sort_keys=True, separators=(",", ":")).encode(),
            "oci-layout": b'{"imageLayoutVersion":"1.0.0"}',
        }
        files: list[tuple[str, Callable[[], BinaryIO], int]] = []
        for blob in [*(layer.blob for layer in layers), config_blob, manifest_blob]:
            files.append((blob_name(blob), functools.partial(open_binary, blob.path), blob.size))
        for name, data in small.items():  # after the blobs: a streaming reader has them by then
            files.append((name, functools.partial(io.BytesIO, data), len(data)))
        archive(args.out, epoch, files)

    summary = {
        "name": args.name,
        "version": args.version,
        "revision": args.revision,
        "created": created,
        "source_date_epoch": epoch,
        "digest": manifest_blob.digest,
        "config_digest": config_blob.digest,
        "archive": str(args.out),
        "archive_size": args.out.stat().st_size,
        "compressed_size": sum(layer.blob.size for layer in layers),
        "uncompressed_size": sum(layer.uncompressed for layer in layers),
        "layers": [
            {"name": layer.name, "digest": layer.blob.digest, "diff_id": layer.diff_id,
             "size": layer.blob.size, "uncompressed_size": layer.uncompressed, "entries": layer.entries}
            for layer in layers
        ],
    }  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    for layer in layers:
        print(
            f"oci.py: layer {layer.name}: {layer.entries} entries, {layer.uncompressed / 1e6:.1f} MB, "
            f"{layer.blob.size / 1e6:.1f} MB compressed"
        )
    print(f"oci.py: {args.name} {manifest_blob.digest} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
