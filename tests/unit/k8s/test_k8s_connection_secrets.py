"""Credentials stay out of reprs (and so out of logs and tracebacks that print a connection), and a token
or password is never configured for plain http to another machine."""

from __future__ import annotations

import pytest

from kopf_scheduler.k8s.connection import ConfigError, ConnectionInfo, StaticToken

SECRET = "s3cr3t-t0ken"


def test_reprs_carry_no_token_password_or_key() -> None:
    info = ConnectionInfo(
        "https://api.example.com:6443",
        client_cert=b"-----BEGIN CERTIFICATE-----",
        client_key=b"-----BEGIN EC PRIVATE KEY----- " + SECRET.encode(),
        token=StaticToken(SECRET),
        username="admin",
        password=SECRET,
    )
    text = repr(info)
    assert SECRET not in text and "PRIVATE KEY" not in text
    assert "api.example.com" in text and "admin" in text  # what tells connections apart stays
    assert info.auth_headers() == {"Authorization": f"Bearer {SECRET}"}


@pytest.mark.parametrize(
    ("server", "token", "password"),
    [("http://api.example.com:8080", SECRET, None), ("http://10.0.0.1", None, SECRET)],
)
def test_credentials_over_plain_http_to_another_machine_are_refused(
    server: str, token: str | None, password: str | None
) -> None:
    with pytest.raises(ConfigError) as e:
        ConnectionInfo(
            server,
            token=StaticToken(token) if token else None,
            username="u" if password else None,
            password=password,
            source="kubeconfig /k (context c)",
        )
    assert str(e.value) == (
        f"kubeconfig /k (context c): server {server!r} is plain http: a token or password would cross the "
        "network in clear text (use https, or http only to a loopback address)"
    )
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(
    "server", ["http://127.0.0.1:8001", "http://localhost:8001", "http://[::1]:8001", "https://10.0.0.1"]
)
def test_loopback_http_and_https_may_carry_credentials(server: str) -> None:
    assert ConnectionInfo(server, token=StaticToken(SECRET)).auth_headers()["Authorization"].endswith(SECRET)


def test_plain_http_without_credentials_is_allowed() -> None:  # kubectl proxy's address, say
    assert ConnectionInfo("http://proxy.internal:8001").auth_headers() == {}
