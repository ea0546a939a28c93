"""``dist/image/image.tar`` is taken as it is by the tools docs/operations.md names for loading and
pushing it, each keeping the image's identity (the config digest, and the manifest digest where the
tool keeps the OCI manifest):

- ``skopeo`` (Debian's) reads it as ``oci-archive:`` with the manifest digest of ``image.json``;
- ``ctr images import --all-platforms --digests``, as ``kind load image-archive`` runs it on a node,
  into a containerd of the test's own (Debian's containerd, on a socket in a temporary directory):
  the image is named after ``io.containerd.image.name``, unpacked, and runs (``ctr run``, runc);
- ``skopeo copy oci-archive:... docker://...`` (the README's push to a registry) to ``crane registry
  serve``: the same manifest digest in the registry;
- ``crane push`` (built from the Go module proxy by ``hack/image/build-crane.sh``) to ``crane registry
  serve`` on a free port: the archive itself (Docker's manifest.json: the same config and layers under
  a Docker manifest) and the unpacked OCI layout (the same manifest digest), read back with skopeo.

``podman load`` is the other modules' way in (test_image.py, test_image_deploy.py).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_runtime import BuiltImage, built_image, podman_with_image

from kopf_scheduler.devcluster.processes import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str, timeout: float = 300, **kwargs: object) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return str(done.stdout)


def need(tool: str) -> str:
    path = shutil.which(tool, path="/usr/local/bin:/usr/bin:/usr/sbin:/bin:/sbin")
    if path is None:
        pytest.fail(f"{tool} is not installed; `make image` installs it", pytrace=False)
    return path


@pytest.fixture(scope="module")
def image() -> BuiltImage:
    return built_image()


def test_skopeo_reads_the_archive_with_its_digest(image: BuiltImage) -> None:
    raw = run(need("skopeo"), "inspect", "--raw", f"oci-archive:{image.archive}")
    manifest = json.loads(raw)
    assert manifest["config"]["digest"] == image.config_digest
    assert [layer["digest"] for layer in manifest["layers"]] == [layer["digest"] for layer in image.layers]
    inspected = json.loads(run(need("skopeo"), "inspect", f"oci-archive:{image.archive}"))
    assert inspected["Digest"] == image.digest


@contextlib.contextmanager
def containerd(directory: Path) -> Iterator[list[str]]:
    """A containerd of the test's own (its root, state and socket under ``directory``); yields the ctr
    command that talks to it, in kind's namespace."""
    socket = directory / "containerd.sock"
    log = open(directory / "containerd.log", "wb")  # noqa: SIM115 - closed below
    daemon = subprocess.Popen(
        [need("containerd"), "--root", str(directory / "root"), "--state", str(directory / "state"),
         "--address", str(socket), "--config", str(directory / "config.toml")],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not socket.exists():
            assert daemon.poll() is None, (directory / "containerd.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "containerd did not open its socket in 30 s"
            time.sleep(0.1)
        yield [need("ctr"), "--address", str(socket), "--namespace", "k8s.io"]
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=15)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()


def test_containerd_imports_it_as_kind_load_image_archive_does(image: BuiltImage, tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("version = 2\n")
    with containerd(tmp_path) as ctr, open(image.archive, "rb") as archive:
        run(*ctr, "images", "import", "--all-platforms", "--digests", "-", stdin=archive)
        listed = run(*ctr, "images", "list")
        [line] = [row for row in listed.splitlines() if row.startswith(image.name + " ")]
        assert image.digest in line.split(), line
        out = run(
            *ctr, "run", "--rm", "--net-host", "--read-only", image.name, "kopf-scheduler-ctr-check",
            "/opt/kopf-scheduler/bin/kopf-scheduler", "--help", timeout=120,
        )  # fmt: skip
        assert "kopf-scheduler" in out


@pytest.fixture(scope="module")
def crane() -> str:
    """crane, built from the Go module proxy the first time (hack/image/build-crane.sh)."""
    return run(str(ROOT / "hack/image/build-crane.sh"), timeout=600).strip()


@pytest.fixture(scope="module")
def registry(crane: str) -> Iterator[str]:
    """``crane registry serve`` on a free loopback port (in memory); yields its host:port."""
    address = f"127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [crane, "registry", "serve", "--address", address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([crane, "catalog", address, "--insecure"], capture_output=True).returncode:
            assert server.poll() is None and time.monotonic() < deadline, "crane registry did not start"
            time.sleep(0.2)
        yield address
    finally:
        server.terminate()
        server.wait(timeout=15)


def test_crane_pushes_the_archive_and_its_layout(
    image: BuiltImage, crane: str, registry: str, tmp_path: Path
) -> None:
    # the archive: read through Docker's manifest.json, pushed with a Docker manifest
    run(crane, "push", str(image.archive), f"{registry}/kopf-scheduler:archive", "--insecure")
    manifest = json.loads(run(crane, "manifest", f"{registry}/kopf-scheduler:archive", "--insecure"))
    assert manifest["config"]["digest"] == image.config_digest
    assert [layer["digest"] for layer in manifest["layers"]] == [layer["digest"] for layer in image.layers]

    # the OCI layout unpacked: the very manifest, so the same digest as loaded anywhere else
    layout = tmp_path / "layout"
    with tarfile.open(image.archive) as tar:
        tar.extractall(layout, filter="data")
    run(crane, "push", str(layout), f"{registry}/kopf-scheduler:{image.version}", "--insecure")
    remote = json.loads(
        run(
            need("skopeo"),
            "inspect",
            "--tls-verify=false",
            f"docker://{registry}/kopf-scheduler:{image.version}",
        )
    )
    assert remote["Digest"] == image.digest
    assert remote["Labels"]["org.opencontainers.image.version"] == image.version


def test_skopeo_copies_the_archive_to_a_registry(image: BuiltImage, registry: str) -> None:
    """As the README pushes it: the OCI manifest kept, so the registry has the digest of image.json."""
    run(need("skopeo"), "copy", "--dest-tls-verify=false", f"oci-archive:{image.archive}",
        f"docker://{registry}/kopf-scheduler:skopeo")  # fmt: skip
    remote = json.loads(
        run(need("skopeo"), "inspect", "--tls-verify=false", f"docker://{registry}/kopf-scheduler:skopeo")
    )
    assert remote["Digest"] == image.digest
    assert [layer["digest"] for layer in image.layers] == remote["Layers"]


def test_podman_loads_it_under_its_name() -> None:
    podman, image = podman_with_image()
    loaded = podman.inspect_image(image.name)
    assert (loaded["Digest"], loaded["Id"]) == (image.digest, image.config_digest.split(":", 1)[1])
