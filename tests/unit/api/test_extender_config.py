"""``spec.extenders``: kube-scheduler's ``Extender`` fields, parsed with their defaults and validated as
upstream's ``validateExtenders`` does, with errors naming the field path."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.extenders import (
    DEFAULT_HTTP_TIMEOUT,
    ExtenderSpec,
    ManagedResource,
    TLSConfig,
    extended_resource_name_errors,
    ignored_resources,
)
from kopf_scheduler.api.profile import parse_profile

URL = "http://127.0.0.1:8888/ext"


def _parse(*extenders: dict[str, Any]) -> list[ExtenderSpec]:
    return parse_profile({"schedulerName": "s", "extenders": list(extenders)}).extenders


def _error(*extenders: dict[str, Any]) -> str:
    with pytest.raises(ProfileError) as e:
        _parse(*extenders)
    return str(e.value)


def test_every_field_parsed() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    [ext] = _parse(
        {
            "urlPrefix": URL,
            "filterVerb": "filter",
            "preemptVerb": "preempt",
            "prioritizeVerb": "prioritize",
            "bindVerb": "bind",
            "weight": 3,
            "enableHTTPS": True,
            "tlsConfig": {
                "insecure": False,
                "serverName": "ext.example.com",
                "certFile": "/c",
                "keyFile": "/k",
                "caFile": "/ca",
                "certData": base64.b64encode(pem).decode(),
                "keyData": base64.b64encode(b"key").decode(),
                "caData": base64.b64encode(b"ca").decode(),
            },
            "httpTimeout": "1m30s",
            "nodeCacheCapable": True,
            "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}, {"name": "x.io/y"}],
            "ignorable": True,
        }
    )
    assert ext == ExtenderSpec(
        url_prefix=URL,
        filter_verb="filter",
        preempt_verb="preempt",
        prioritize_verb="prioritize",
        bind_verb="bind",
        weight=3,
        enable_https=True,
        tls=TLSConfig(False, "ext.example.com", "/c", "/k", "/ca", pem, b"key", b"ca"),
        http_timeout=90.0,
        node_cache_capable=True,
        managed_resources=(ManagedResource("example.com/gpu", True), ManagedResource("x.io/y", False)),
        ignorable=True,
    )
    assert ext.path == "spec.extenders[0]"
    assert ignored_resources([ext]) == ["example.com/gpu"]


def test_defaults() -> None:
    [ext] = _parse({"urlPrefix": URL})
    assert ext == ExtenderSpec(url_prefix=URL)
    assert ext.http_timeout == DEFAULT_HTTP_TIMEOUT == 5.0  # DefaultExtenderTimeout (extender.go)
    assert parse_profile({"schedulerName": "s"}).extenders == []


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("5s", 5.0), ("0", DEFAULT_HTTP_TIMEOUT), ("0s", DEFAULT_HTTP_TIMEOUT), ("250ms", 0.25)],
    ids=["5s", "zero-is-default", "0s-is-default", "millis"],  # negative: test_extender_bounds.py
)
def test_http_timeout(raw: str, seconds: float | None) -> None:
    [ext] = _parse({"urlPrefix": URL, "httpTimeout": raw})
    assert ext.http_timeout == seconds


@pytest.mark.parametrize(
    ("extenders", "message"),
    [
        (
            [{"urlPrefix": URL, "prioritizeVerb": "p"}],
            "spec.extenders[0].weight: must be > 0 when prioritizeVerb is set "
            "(must have a positive weight applied to it), not 0",
        ),
        (
            [{"urlPrefix": URL}, {"urlPrefix": URL, "prioritizeVerb": "p", "weight": -2}],
            "spec.extenders[1].weight: must be > 0 when prioritizeVerb is set "
            "(must have a positive weight applied to it), not -2",
        ),
        (
            [{"urlPrefix": URL, "bindVerb": "b"}, {"urlPrefix": URL}, {"urlPrefix": URL, "bindVerb": "b"}],
            "spec.extenders: found 2 extenders implementing bind (entries [0, 2]): "
            "only one extender can implement bind",
        ),
        (
            [
                {"urlPrefix": URL, "managedResources": [{"name": "example.com/a"}]},
                {"urlPrefix": URL, "managedResources": [{"name": "example.com/a"}]},
            ],
            "spec.extenders[1].managedResources[0].name: 'example.com/a': duplicate extender managed "
            "resource name",
        ),
        (
            [{"urlPrefix": URL, "managedResources": [{"name": "cpu"}]}],
            "spec.extenders[0].managedResources[0].name: 'cpu': is an invalid extended resource name",
        ),
        (
            [{"urlPrefix": URL, "managedResources": [{"name": "kubernetes.io/foo"}]}],
            "spec.extenders[0].managedResources[0].name: 'kubernetes.io/foo': is an invalid extended "
            "resource name",
        ),
        (
            [{"urlPrefix": URL, "httpTimeout": "5"}],
            'spec.extenders[0].httpTimeout: time: missing unit in duration "5"',
        ),
        (
            [{"urlPrefix": "ftp://x"}],
            "spec.extenders[0].urlPrefix: must be an http:// or https:// URL, not 'ftp://x'",
        ),
        (
            [{"urlPrefix": URL, "tlsConfig": {"caData": "not base64!"}}],
            "spec.extenders[0].tlsConfig.caData: must be base64-encoded PEM data",
        ),
        ([{"urlPrefix": URL, "weight": "2"}], "spec.extenders[0].weight: must be of type integer, not '2'"),
        ([{"filterVerb": "f"}], "spec.extenders[0]: 'urlPrefix' is required"),
        (
            [{"urlPrefix": URL, "timeout": "5s"}],
            "spec.extenders[0]: unknown field(s) ('timeout' was unexpected)",
        ),
    ],
    ids=[
        "prioritizer-without-weight",
        "negative-weight",
        "two-binders",
        "duplicate-managed-resource",
        "native-resource",
        "kubernetes-io-resource",
        "timeout-without-unit",
        "not-http",
        "bad-base64",
        "weight-type",
        "url-required",
        "unknown-field",
    ],
)
def test_validation_errors_name_the_field(extenders: list[dict[str, Any]], message: str) -> None:
    assert _error(*extenders) == message


def test_weight_needs_no_prioritizer() -> None:
    """Upstream checks the weight only when a prioritize verb is set."""
    [ext] = _parse({"urlPrefix": URL, "filterVerb": "f", "weight": 0})
    assert ext.weight == 0


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("example.com/gpu", True),
        ("nvidia.com/gpu", True),
        ("example.com/a_b.c", True),
        ("cpu", False),
        ("requests.example.com/x", False),
        ("kubernetes.io/x", False),
        ("Example.com/x", False),
        ("example.com/-x", False),
        ("example.com/" + "x" * 64, False),
        ("a/b/c", False),
    ],
)
def test_extended_resource_names(name: str, ok: bool) -> None:
    assert (extended_resource_name_errors(name) == []) is ok


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        (".5s", 0.5),
        ("300ms", 0.3),
        ("10us", 1e-5),
        ("10\u00b5s", 1e-5),
        ("7ns", 7e-9),
        ("-2s", -2.0),
        ("+2s", 2.0),
        ("0", 0.0),
        ("2h45m", 9900.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("5", 'time: missing unit in duration "5"'),
        ("5d", 'time: unknown unit "d" in duration "5d"'),
        ("s", 'time: invalid duration "s"'),
        ("1.2.3s", 'time: missing unit in duration "1.2.3s"'),
    ],
)
def test_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(DurationError) as e:
        parse_duration(text)
    assert str(e.value) == message
