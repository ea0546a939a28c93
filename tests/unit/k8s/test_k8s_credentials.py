"""Loading connections: kubeconfig files (merged, relative paths, inline data, token files, exec
plugins), the in-cluster service account, token rotation, and the lookup order."""

from __future__ import annotations

import base64
import json
import ssl
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.devcluster import pki
from kopf_scheduler.k8s.connection import ConfigError, FileToken, in_cluster, load_connection, load_kubeconfig


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> pki.Pki:
    return pki.create(tmp_path_factory.mktemp("pki"))


def kubeconfig(
    cluster: dict[str, Any],
    user: dict[str, Any],
    *,
    name: str = "dev",
    current: str | None = "dev",
    **ctx: Any,
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{name}-cluster", "cluster": cluster}],
        "users": [{"name": f"{name}-user", "user": user}],
        "contexts": [
            {"name": name, "context": {"cluster": f"{name}-cluster", "user": f"{name}-user", **ctx}}
        ],
    }
    if current is not None:
        config["current-context"] = current
    return config


def write(path: Path, config: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config))
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_token_and_inline_ca(tmp_path: Path, certs: pki.Pki) -> None:
    ca = certs.ca_cert.read_bytes()
    cluster = {"server": "https://10.1.2.3:6443/", "certificate-authority-data": b64(ca)}
    path = write(tmp_path / "config", kubeconfig(cluster, {"token": "t0k"}, namespace="team-a"))
    info = load_kubeconfig(path)
    assert info.server == "https://10.1.2.3:6443"
    assert info.ca_data == ca and info.default_namespace == "team-a"
    assert info.auth_headers() == {"Authorization": "Bearer t0k"}
    ctx = info.ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert info.source == f"kubeconfig {path} (context dev)"


def test_relative_files_client_certificate_and_insecure(tmp_path: Path, certs: pki.Pki) -> None:
    d = tmp_path / "conf"
    d.mkdir()
    for src, dst in ((certs.ca_cert, "ca.crt"), (certs.ca_cert, "me.crt"), (certs.ca_key, "me.key")):
        (d / dst).write_bytes(src.read_bytes())
    cluster = {"server": "https://k", "certificate-authority": "ca.crt", "tls-server-name": "kubernetes"}
    user = {"client-certificate": "me.crt", "client-key": "me.key"}
    info = load_kubeconfig(write(d / "config", kubeconfig(cluster, user)))
    assert info.ca_data == certs.ca_cert.read_bytes()
    assert info.client_cert == certs.ca_cert.read_bytes() and info.client_key == certs.ca_key.read_bytes()
    assert info.tls_server_name == "kubernetes" and info.auth_headers() == {}
    assert info.ssl_context() is not None  # the certificate and key load
    insecure = load_kubeconfig(
        write(d / "insecure", kubeconfig({"server": "https://k", "insecure-skip-tls-verify": True}, {}))
    )
    ctx = insecure.ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_client_certificate_data_and_basic_auth(tmp_path: Path, certs: pki.Pki) -> None:
    user = {
        "client-certificate-data": b64(certs.ca_cert.read_bytes()),
        "client-key-data": b64(certs.ca_key.read_bytes()),
        "username": "admin",
        "password": "s3cret",
    }
    info = load_kubeconfig(write(tmp_path / "config", kubeconfig({"server": "https://k"}, user)))
    assert info.ssl_context() is not None
    assert info.auth_headers() == {"Authorization": "Basic " + b64(b"admin:s3cret")}


def test_certificate_without_key_is_refused(tmp_path: Path, certs: pki.Pki) -> None:
    user = {"client-certificate-data": b64(certs.ca_cert.read_bytes())}
    with pytest.raises(ConfigError, match=r"users\[dev-user\]\.user: a client certificate needs its key"):
        load_kubeconfig(write(tmp_path / "config", kubeconfig({"server": "https://k"}, user)))


def test_token_file_is_reread_when_it_rotates(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("one\n")
    info = load_kubeconfig(
        write(tmp_path / "config", kubeconfig({"server": "https://k"}, {"tokenFile": "token"}))
    )
    assert info.auth_headers() == {"Authorization": "Bearer one"}
    (tmp_path / "token").write_text("two\n")
    assert info.auth_headers() == {"Authorization": "Bearer one"}  # cached for a minute
    assert info.reload().auth_headers() == {"Authorization": "Bearer two"}  # a 401 re-reads


def test_file_token_refreshes_after_a_minute(tmp_path: Path) -> None:
    now = [0.0]
    path = tmp_path / "token"
    path.write_text("one")
    token = FileToken(path, now=lambda: now[0])
    assert token.token() == "one"
    path.write_text("two")
    now[0] = 59.0
    assert token.token() == "one"
    now[0] = 60.0
    assert token.token() == "two"
    path.unlink()  # mid-rotation: keep the last good token
    now[0] = 200.0
    assert token.token() == "two"


def test_files_merge_first_definition_wins(tmp_path: Path) -> None:
    first = write(
        tmp_path / "a", kubeconfig({"server": "https://first"}, {"token": "a"}, name="x", current=None)
    )
    second = write(
        tmp_path / "b", kubeconfig({"server": "https://second"}, {"token": "b"}, name="x", current="x")
    )
    info = load_kubeconfig(f"{first}:{tmp_path / 'missing'}:{second}")
    assert info.server == "https://first" and info.auth_headers()["Authorization"] == "Bearer a"


@pytest.mark.parametrize(
    ("config", "context", "message"),
    [
        pytest.param(
            kubeconfig({"server": "https://k"}, {}, current=None), None, "no current-context", id="no-ctx"
        ),
        pytest.param(
            kubeconfig({"server": "https://k"}, {}), "prod", "context 'prod' not found", id="unknown-ctx"
        ),
        pytest.param(
            kubeconfig({}, {}), None, r"clusters\[dev-cluster\]\.cluster\.server is required", id="server"
        ),
        pytest.param(kubeconfig({"server": "k:443"}, {}), None, "is not an http", id="scheme"),
        pytest.param(
            kubeconfig({"server": "https://k", "certificate-authority": "nope.crt"}, {}),
            None,
            r"certificate-authority: .*nope\.crt",
            id="ca-file",
        ),
    ],
)
def test_bad_kubeconfig_names_the_problem(
    tmp_path: Path, config: dict, context: str | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_kubeconfig(write(tmp_path / "config", config), context=context)


def test_exec_plugin_runs_through_the_kubernetes_package(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "from-plugin"},
    }
    plugin.write_text(f"import json\nprint(json.dumps({credential!r}))\n")
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    info = load_kubeconfig(write(tmp_path / "config", kubeconfig({"server": "https://k"}, user)))
    assert info.auth_headers() == {"Authorization": "Bearer from-plugin"}


def service_account(tmp_path: Path, certs: pki.Pki, token: str = "sa-token") -> Path:
    sa = tmp_path / "sa"
    sa.mkdir(exist_ok=True)
    (sa / "token").write_text(token)
    (sa / "ca.crt").write_bytes(certs.ca_cert.read_bytes())
    (sa / "namespace").write_text("kube-system\n")
    return sa


IN_CLUSTER_ENV = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def test_in_cluster(tmp_path: Path, certs: pki.Pki) -> None:
    sa = service_account(tmp_path, certs)
    info = in_cluster(IN_CLUSTER_ENV, sa)
    assert info.server == "https://10.0.0.1:443" and info.default_namespace == "kube-system"
    assert info.auth_headers() == {"Authorization": "Bearer sa-token"}
    assert info.ca_data == certs.ca_cert.read_bytes() and info.ssl_context() is not None
    (sa / "token").write_text("rotated")
    assert info.reload().auth_headers() == {"Authorization": "Bearer rotated"}
    v6 = in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, sa)
    assert v6.server == "https://[fd00::1]:443"


def test_in_cluster_without_service_account(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token does not exist"):
        in_cluster(IN_CLUSTER_ENV, tmp_path)
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        in_cluster({}, tmp_path)


def test_lookup_order(tmp_path: Path, certs: pki.Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = service_account(tmp_path, certs)
    explicit = write(tmp_path / "explicit", kubeconfig({"server": "https://explicit"}, {}))
    from_env = write(tmp_path / "env", kubeconfig({"server": "https://from-env"}, {}))
    home = tmp_path / "home"
    write(home / ".kube" / "config", kubeconfig({"server": "https://home"}, {}))
    monkeypatch.setenv("HOME", str(home))
    env = {**IN_CLUSTER_ENV, "KUBECONFIG": str(from_env)}
    assert load_connection(explicit, env=env, sa_dir=sa).server == "https://explicit"
    assert load_connection(env=env, sa_dir=sa).server == "https://from-env"
    assert load_connection(env=IN_CLUSTER_ENV, sa_dir=sa).source == "in-cluster"
    assert load_connection(env={}, sa_dir=sa).server == "https://home"
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    with pytest.raises(ConfigError, match="no cluster configuration"):
        load_connection(env={}, sa_dir=sa)


def test_kubeconfig_of_the_dev_cluster_shape(tmp_path: Path, certs: pki.Pki) -> None:
    from kopf_scheduler.devcluster import kubeconfig as dev_kubeconfig

    path = dev_kubeconfig.write(
        tmp_path / "kubeconfig",
        dev_kubeconfig.build("https://127.0.0.1:6443", certs.ca_cert.read_bytes(), "tok"),
    )
    info = load_kubeconfig(path)
    assert (info.server, info.auth_headers()) == ("https://127.0.0.1:6443", {"Authorization": "Bearer tok"})
    assert json.dumps(info.source)  # printable
