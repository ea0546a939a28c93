#!/usr/bin/env python3
"""An SPDX 2.3 SBOM (JSON) of an OCI image archive, read from the image's own layers.

What is in the image, not what was meant to go in: the layers of the archive's (first) manifest are read
in order, later files over earlier ones (whiteouts honoured), and from the result

- every Debian package of ``/var/lib/dpkg/status`` (name, version, source package, architecture; purl
  ``pkg:deb/debian/NAME@VERSION?arch=ARCH&distro=debian-N``),
- every Python distribution with a ``*.dist-info/METADATA`` (name, version, its SPDX
  ``License-Expression`` when it declares one; purl ``pkg:pypi/NAME@VERSION``),
- the operating system from ``/etc/os-release``,

each ``CONTAINED_BY`` the image, which the document describes (its manifest digest, purl ``pkg:oci``).
Licences of Debian packages are not guessed from their copyright files (``NOASSERTION``). Timestamps are
``SOURCE_DATE_EPOCH``'s and the namespace is the image digest's: the same image gives the same SBOM.

Usage: sbom.py IMAGE.tar --name REPOSITORY:TAG -o OUT.spdx.json
"""

from __future__ import annotations

import argparse
import datetime
import email.parser
import json
import os
import re
import sys
import tarfile
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

DPKG_STATUS = "var/lib/dpkg/status"
OS_RELEASE = ("etc/os-release", "usr/lib/os-release")
METADATA = re.compile(r"(^|/)[^/]+\.dist-info/METADATA$")


def wanted(name: str) -> bool:
    return name == DPKG_STATUS or name in OS_RELEASE or bool(METADATA.search(name))


def image_files(archive: str) -> tuple[dict[str, bytes], str, dict[str, Any]]:
    """(path -> content of the files the SBOM reads, manifest digest, config) of the image."""
    with tarfile.open(archive) as outer:

        def blob(digest: str) -> tarfile.ExFileObject:
            f = outer.extractfile("blobs/sha256/" + digest.split(":", 1)[1])
            assert f is not None
            return f  # type: ignore[return-value]

        index = json.load(outer.extractfile("index.json"))  # type: ignore[arg-type]
        descriptor = index["manifests"][0]
        manifest = json.load(blob(descriptor["digest"]))
        config = json.load(blob(manifest["config"]["digest"]))
        files: dict[str, bytes] = {}
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r|*") as tar:
                for member in tar:
                    name = os.path.normpath(member.name.removeprefix("./").removeprefix("/"))
                    base = PurePosixPath(name)
                    if base.name == ".wh..wh..opq":
                        prefix = str(base.parent) + "/"
                        files = {k: v for k, v in files.items() if not k.startswith(prefix)}
                    elif base.name.startswith(".wh."):
                        gone = str(base.parent / base.name[4:])
                        files = {k: v for k, v in files.items() if k != gone and not k.startswith(gone + "/")}
                    elif member.isfile() and wanted(name):
                        f = tar.extractfile(member)
                        assert f is not None
                        files[name] = f.read()
                    elif member.issym() and wanted(name):
                        files.pop(name, None)  # os-release is a link: its target is read instead
        return files, descriptor["digest"], config


def relationship(element: str, kind: str, related: str) -> dict[str, str]:
    return {"spdxElementId": element, "relationshipType": kind, "relatedSpdxElement": related}


def spdx_id(kind: str, name: str) -> str:
    return f"SPDXRef-{kind}-" + re.sub(r"[^A-Za-z0-9.-]", "-", name)


def debian_packages(status: str, distro: str) -> list[dict[str, Any]]:
    packages = []
    for block in re.split(r"\n\s*\n", status.strip()):
        fields: dict[str, str] = dict(re.findall(r"(?m)^([A-Za-z-]+): ?(.*)$", block))
        if "installed" not in fields.get("Status", ""):
            continue
        name, version, arch = fields["Package"], fields["Version"], fields.get("Architecture", "")
        purl = f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}"
        if distro:
            purl += f"&distro={distro}"
        source = fields.get("Source", name).split(" ")[0]
        packages.append(
            {
                "SPDXID": spdx_id("deb", name),
                "name": name,
                "versionInfo": version,
                "supplier": "Organization: Debian",
                "downloadLocation": "NOASSERTION",
                "filesAnalyzed": False,
                "sourceInfo": f"built from the Debian source package {source}",
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": "NOASSERTION",
                "copyrightText": "NOASSERTION",
                "externalRefs": [
                    {
                        "referenceCategory": "PACKAGE-MANAGER",
                        "referenceType": "purl",
                        "referenceLocator": purl,
                    }
                ],
            }
        )
    return packages


def python_distributions(files: dict[str, bytes]) -> list[dict[str, Any]]:
    out = []
    for path in sorted(p for p in files if METADATA.search(p)):
        meta = email.parser.BytesParser().parsebytes(files[path], headersonly=True)
        name, version = meta["Name"], meta["Version"]
        normalized = re.sub(r"[-_.]+", "-", name).lower()
        license_expression = meta.get("License-Expression") or "NOASSERTION"
        location = os.path.dirname(os.path.dirname(path))
        out.append(
            {
                "SPDXID": spdx_id("pypi", f"{normalized}-{version}"),
                "name": name,
                "versionInfo": version,
                "downloadLocation": f"https://pypi.org/project/{normalized}/{version}/"
                if normalized != "kopf-scheduler"
                else "NOASSERTION",
                "filesAnalyzed": False,
                "sourceInfo": f"installed in /{location}",
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": license_expression,
                "copyrightText": "NOASSERTION",
                "externalRefs": [
                    {
                        "referenceCategory": "PACKAGE-MANAGER",
                        "referenceType": "purl",
                        "referenceLocator": f"pkg:pypi/{normalized}@{quote(version, safe='')}",
                    }
                ],
            }
        )
    return out


def os_release(files: dict[str, bytes]) -> dict[str, str]:
    for path in OS_RELEASE:
        if path in files:
            return dict(re.findall(r'(?m)^([A-Z_]+)="?([^"\n]*)"?$', files[path].decode()))
    return {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("archive")
    parser.add_argument("--name", required=True, help="REPOSITORY:TAG the image is known by")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    files, digest, config = image_files(args.archive)
    if DPKG_STATUS not in files:
        raise SystemExit(f"sbom.py: no /{DPKG_STATUS} in {args.archive}")
    release = os_release(files)
    distro = f"{release.get('ID', '')}-{release.get('VERSION_ID', '')}".strip("-")
    repository, _, tag = args.name.rpartition(":")
    labels = config.get("config", {}).get("Labels", {})
    created = labels.get("org.opencontainers.image.created") or datetime.datetime.fromtimestamp(
        int(os.environ.get("SOURCE_DATE_EPOCH", "0")), datetime.UTC
    ).strftime("%Y-%m-%dT%H:%M:%SZ")
    image = {
        "SPDXID": "SPDXRef-Image",
        "name": args.name,
        "versionInfo": labels.get("org.opencontainers.image.version", tag),
        "primaryPackagePurpose": "CONTAINER",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest.split(":", 1)[1]}],
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": labels.get("org.opencontainers.image.licenses", "NOASSERTION"),
        "copyrightText": "NOASSERTION",
        "externalRefs": [
            {
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": f"pkg:oci/{repository.rsplit('/', 1)[-1]}@{quote(digest, safe='')}"
                f"?repository_url={quote(repository, safe='/')}&tag={quote(tag, safe='')}",
            }
        ],
    }
    packages: list[dict[str, Any]] = []
    if release:
        packages.append(
            {
                "SPDXID": spdx_id("os", distro or "unknown"),
                "name": release.get("ID", "unknown"),
                "versionInfo": release.get("VERSION_ID", "NOASSERTION"),
                "primaryPackagePurpose": "OPERATING-SYSTEM",
                "downloadLocation": "NOASSERTION",
                "filesAnalyzed": False,
                "description": release.get("PRETTY_NAME", ""),
                "licenseConcluded": "NOASSERTION",
                "licenseDeclared": "NOASSERTION",
                "copyrightText": "NOASSERTION",
            }
        )
    packages += debian_packages(files[DPKG_STATUS].decode(), distro)
    packages += python_distributions(files)
    document = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": args.name,
        "documentNamespace": "https://spdx.org/spdxdocs/"
        + f"{repository.rsplit('/', 1)[-1]}-{quote(tag, safe='')}-{digest.split(':', 1)[1]}",
        "creationInfo": {"created": created, "creators": ["Tool: kopf-scheduler-hack-image-sbom.py"]},
        "documentDescribes": ["SPDXRef-Image"],
        "packages": [image, *packages],
        "relationships": [
            relationship("SPDXRef-DOCUMENT", "DESCRIBES", "SPDXRef-Image"),
            *(relationship(p["SPDXID"], "CONTAINED_BY", "SPDXRef-Image") for p in packages),
        ],
    }  # fmt: skip
    with open(args.output, "w") as f:
        json.dump(document, f, indent=2, sort_keys=True)
        f.write("\n")
    debs = sum(1 for p in packages if p["SPDXID"].startswith("SPDXRef-deb-"))
    pys = sum(1 for p in packages if p["SPDXID"].startswith("SPDXRef-pypi-"))
    print(f"sbom.py: {debs} Debian packages, {pys} Python distributions -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
