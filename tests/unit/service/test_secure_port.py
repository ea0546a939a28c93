"""The secure port as kube-scheduler serves it: HTTPS with a self-signed certificate unless one is given,
probes without credentials, /metrics only for a user the API server authorises (answered as the API
server words a refusal), plain HTTP on loopback only with ``--insecure-metrics``; a taken port or bad
certificate files end in one line naming them."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from review_api import ReviewServer

from kopf_scheduler.service.config import ServingConfig
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.service.secure_port import MetricsServer, ServingError, self_signed


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(
    config: ServingConfig,
    api: ReviewServer | None = None,
    ready: tuple[bool, str] = (True, "leading"),
    live: tuple[bool, str] = (True, ""),
) -> Iterator[MetricsServer]:
    server = MetricsServer(
        config,
        SchedulerMetrics().registry,
        ready=lambda: ready,
        make_rest=lambda: (api or ReviewServer()).api,
        live=lambda: live,
    )  # type: ignore[arg-type,return-value]
    server.start()
    try:
        yield server
    finally:
        server.stop()


UNVERIFIED = ssl._create_unverified_context()


def get(url: str, token: str | None = None, context: ssl.SSLContext | None = UNVERIFIED) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(
            request, timeout=5, context=context if url.startswith("https") else None
        ) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, e.read().decode()


def test_https_by_default_probes_open_metrics_for_authorised_users_only() -> None:
    api = ReviewServer()
    api.tokens["prom"] = {
        "username": "system:serviceaccount:monitoring:prometheus",
        "groups": ["system:serviceaccounts"],
    }
    api.allowed["system:serviceaccount:monitoring:prometheus"] = {"/metrics"}
    port = free_port()
    with serving(
        ServingConfig(port, bind_address="127.0.0.1"), api, ready=(False, "initial lists not loaded yet")
    ) as server:
        assert server.url == f"https://127.0.0.1:{port}"
        assert get(f"{server.url}/readyz") == (503, "not ready: initial lists not loaded yet\n")
        status, text = get(f"{server.url}/metrics", "prom")
        assert status == 200 and "# TYPE scheduler_schedule_attempts_total counter" in text
        status, text = get(f"{server.url}/metrics")
        assert status == 403
        assert json.loads(text) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }
        status, text = get(f"{server.url}/metrics", "stolen")
        assert (status, json.loads(text)["message"]) == (401, "Unauthorized")
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP on the secure port
            get(f"http://127.0.0.1:{port}/readyz")


def test_the_self_signed_certificate_names_localhost_and_verifies_against_itself() -> None:
    cert_pem, key_pem = self_signed()
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert cert.subject == cert.issuer and cert.subject.rfc4514_string().startswith("CN=localhost@")
    assert b"PRIVATE KEY" in key_pem


def test_given_certificate_files_are_served(tmp_path: Path) -> None:
    cert_pem, key_pem = self_signed()
    (tmp_path / "tls.crt").write_bytes(cert_pem)
    (tmp_path / "tls.key").write_bytes(key_pem)
    trusting = ssl.create_default_context(cadata=cert_pem.decode())
    config = ServingConfig(free_port(), "127.0.0.1", str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    with serving(config) as server:
        assert get(f"https://localhost:{config.port}/readyz", context=trusting) == (200, "ok: leading\n")
        assert server.url.startswith("https://")


def test_bad_certificate_files_are_one_line_naming_the_flags(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    cases = {
        ServingConfig(
            1, cert_file=str(tmp_path / "tls.crt")
        ): "--tls-cert-file and --tls-private-key-file are given together or not at all",
        ServingConfig(
            1, cert_file=str(tmp_path / "gone.crt"), key_file=str(tmp_path / "tls.key")
        ): f"--tls-cert-file/--tls-private-key-file: {tmp_path / 'gone.crt'} does not exist",
    }
    for config, message in cases.items():
        with pytest.raises(ServingError) as error:
            MetricsServer(config, SchedulerMetrics().registry, make_rest=lambda: ReviewServer().api)  # type: ignore[arg-type]
        assert str(error.value) == message
    with pytest.raises(ServingError, match=r"^--tls-cert-file/--tls-private-key-file cannot be loaded: "):
        config = ServingConfig(1, cert_file=str(tmp_path / "tls.crt"), key_file=str(tmp_path / "tls.key"))
        MetricsServer(config, SchedulerMetrics().registry, make_rest=lambda: ReviewServer().api)  # type: ignore[arg-type]


def test_insecure_metrics_is_plain_http_on_loopback_without_credentials() -> None:
    port = free_port()
    with serving(ServingConfig(port, insecure=True)) as server:
        assert server.url == f"http://127.0.0.1:{port}"
        status, text = get(f"{server.url}/metrics")
        assert status == 200 and "scheduler_schedule_attempts_total" in text
        with socket.socket() as other:  # it listens on 127.0.0.1 alone: the port is free elsewhere
            other.bind(("127.0.0.2", port))


def test_a_taken_port_is_one_line_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServingError, match=rf"^metrics port {port} is in use \(\[Errno 98\]"):
            MetricsServer(ServingConfig(port, insecure=True), SchedulerMetrics().registry).start()


def test_the_health_endpoints_of_kube_scheduler_answer_without_credentials() -> None:
    """/healthz and /livez on the secure port, as kube-scheduler serves them beside /readyz: a probe
    copied from its manifest works; a failed background task turns them red, naming it."""
    port = free_port()
    with serving(ServingConfig(port, bind_address="127.0.0.1")) as server:
        assert get(f"{server.url}/healthz") == (200, "ok")
        assert get(f"{server.url}/livez") == (200, "ok")
    port = free_port()
    broken = (False, "watch intake process ended (exit code 1)")
    with serving(ServingConfig(port, bind_address="127.0.0.1"), live=broken) as server:
        assert get(f"{server.url}/healthz") == (
            500,
            "[-]supervisor failed: watch intake process ended (exit code 1)\nhealthz check failed\n",
        )
        assert get(f"{server.url}/livez")[0] == 500
