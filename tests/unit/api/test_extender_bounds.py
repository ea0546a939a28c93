"""The operator's bounds on SchedulingProfiles (``api/bounds.py``), as validation applies them: extender
timeouts, extender addresses, extender TLS file paths and reserved scheduler names, each refused with a
message that names the field (and, where an operator flag lifts the bound, the flag)."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.api.bounds import (
    DEFAULT_EXTENDER_TLS_DIR,
    OFFLINE,
    ProfileBounds,
    confined_path,
    is_link_local_or_metadata,
)
from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.extenders import MAX_HTTP_TIMEOUT, ExtenderSpec
from kopf_scheduler.api.profile import parse_profile

OPERATOR = ProfileBounds()  # the operator's defaults
URL = "http://127.0.0.1:8888/ext"


def _extenders(*extenders: dict[str, Any], bounds: ProfileBounds = OPERATOR) -> list[ExtenderSpec]:
    return parse_profile({"schedulerName": "s", "extenders": list(extenders)}, bounds).extenders


def _error(spec: dict[str, Any], bounds: ProfileBounds = OPERATOR) -> str:
    with pytest.raises(ProfileError) as e:
        parse_profile(spec, bounds)
    return str(e.value)


# -- httpTimeout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            "-1s",
            "spec.extenders[0].httpTimeout: must not be negative (every extender call has a time limit), "
            "not '-1s'",
        ),
        (
            "-0.5ms",
            "spec.extenders[0].httpTimeout: must not be negative (every extender call has a time limit), "
            "not '-0.5ms'",
        ),
        ("5m1s", "spec.extenders[0].httpTimeout: must be at most 300s, not '5m1s'"),
        ("87600h", "spec.extenders[0].httpTimeout: must be at most 300s, not '87600h'"),
    ],
    ids=["negative", "negative-fraction", "just-above-the-limit", "ten-years"],
)
def test_negative_or_absurd_timeouts_are_refused(raw: str, message: str) -> None:
    assert _error({"schedulerName": "s", "extenders": [{"urlPrefix": URL, "httpTimeout": raw}]}) == message


def test_every_extender_has_a_time_limit() -> None:
    assert MAX_HTTP_TIMEOUT == 300.0
    [at_limit, unset] = _extenders({"urlPrefix": URL, "httpTimeout": "5m"}, {"urlPrefix": URL})
    assert (at_limit.http_timeout, unset.http_timeout) == (300.0, 5.0)


# -- urlPrefix ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://169.254.169.254/latest", "169.254.169.254"),
        ("http://169.254.0.1:8080/x", "169.254.0.1"),
        ("http://[fe80::1]:80/x", "fe80::1"),
        ("http://[fd00:ec2::254]/x", "fd00:ec2::254"),
        ("http://[::ffff:169.254.169.254]/x", "::ffff:169.254.169.254"),
        ("http://100.100.100.200/x", "100.100.100.200"),
        ("http://metadata.google.internal/computeMetadata", "metadata.google.internal"),
        ("https://Metadata.Google.Internal./x", "metadata.google.internal."),
    ],
    ids=[
        "aws-imds",
        "link-local",
        "ipv6-link-local",
        "aws-imds-ipv6",
        "ipv4-mapped",
        "alibaba",
        "gcp",
        "gcp-fqdn",
    ],
)
def test_link_local_and_metadata_urls_are_refused_unless_allowed(url: str, host: str) -> None:
    assert _error({"schedulerName": "s", "extenders": [{"urlPrefix": URL}, {"urlPrefix": url}]}) == (
        f"spec.extenders[1].urlPrefix: {host} is a link-local or cloud metadata address: extenders there "
        "need the operator flag --allow-extender-link-local"
    )
    [ext] = _extenders({"urlPrefix": url}, bounds=ProfileBounds(allow_link_local_extenders=True))
    assert ext.allow_link_local


@pytest.mark.parametrize(
    "url",
    [
        URL,
        "http://localhost:9999",
        "http://[::1]:80/x",
        "https://gpu-extender.kube-system:8888/s",
        "http://10.0.0.7",
    ],
    ids=["loopback", "localhost", "ipv6-loopback", "service", "private"],
)
def test_loopback_private_and_named_hosts_are_accepted(url: str) -> None:
    [ext] = _extenders({"urlPrefix": url})
    assert ext.url_prefix == url and not ext.allow_link_local


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http:///path", "'http:///path' names no host"),
        ("http://[::1/x", "'http://[::1/x' is not a valid URL: Invalid IPv6 URL"),
        ("http://h:99999/x", "'http://h:99999/x' is not a valid URL: Port out of range 0-65535"),
    ],
    ids=["no-host", "bad-ipv6", "bad-port"],
)
def test_urls_without_a_usable_host_are_refused(url: str, message: str) -> None:
    assert _error({"schedulerName": "s", "extenders": [{"urlPrefix": url}]}) == (
        f"spec.extenders[0].urlPrefix: {message}"
    )


def test_address_classification() -> None:
    assert is_link_local_or_metadata("169.254.169.254")
    assert is_link_local_or_metadata("fe80::1%eth0")
    assert not is_link_local_or_metadata("127.0.0.1")
    assert not is_link_local_or_metadata("169.255.0.1")
    assert not is_link_local_or_metadata("fd00:ec2::253")
    assert not is_link_local_or_metadata("metadata.google.internal")  # names are not addresses


# -- tlsConfig files ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "path"),
    [
        ("caFile", "/etc/passwd"),
        ("certFile", "../../../etc/shadow"),
        ("keyFile", DEFAULT_EXTENDER_TLS_DIR + "/../secret.key"),
        ("caFile", DEFAULT_EXTENDER_TLS_DIR),
        ("caFile", "/etc/kopf-scheduler/extender-tls-other/ca.pem"),
        ("caFile", "ca.pem\x00.txt"),
    ],
    ids=[
        "absolute-elsewhere",
        "relative-escape",
        "dotdot-out-of-the-dir",
        "the-dir-itself",
        "sibling-prefix",
        "nul",
    ],
)
def test_tls_files_outside_the_tls_directory_are_refused(field: str, path: str) -> None:
    spec = {"schedulerName": "s", "extenders": [{"urlPrefix": URL, "tlsConfig": {field: path}}]}
    assert _error(spec) == (
        f"spec.extenders[0].tlsConfig.{field}: must name a file in {DEFAULT_EXTENDER_TLS_DIR} "
        f"(the operator's --extender-tls-dir), not {path!r}"
    )


def test_tls_files_in_the_tls_directory_are_accepted(tmp_path: Any) -> None:
    bounds = ProfileBounds(extender_tls_dir=str(tmp_path))
    tls = {"caFile": "ca.pem", "certFile": str(tmp_path / "sub" / "c.pem"), "keyFile": "sub/../k.pem"}
    [ext] = _extenders({"urlPrefix": URL, "tlsConfig": tls}, bounds=bounds)
    assert ext.tls is not None
    assert (ext.tls.ca_file, ext.tls.file_dir) == ("ca.pem", str(tmp_path))  # as written, for messages
    assert ext.tls.path_of(ext.tls.ca_file) == str(tmp_path / "ca.pem")
    assert ext.tls.path_of(ext.tls.cert_file) == str(tmp_path / "sub" / "c.pem")
    assert ext.tls.path_of(ext.tls.key_file) == str(tmp_path / "k.pem")


def test_tls_directory_root_allows_any_path() -> None:
    [ext] = _extenders(
        {"urlPrefix": URL, "tlsConfig": {"caFile": "/etc/ssl/ca.pem"}},
        bounds=ProfileBounds(extender_tls_dir="/"),
    )
    assert ext.tls is not None and ext.tls.path_of("/etc/ssl/ca.pem") == "/etc/ssl/ca.pem"
    assert confined_path("/", "/") is None  # a directory is never a file


# -- schedulerName --------------------------------------------------------------------------------------
def test_default_scheduler_is_refused_without_the_flag_and_accepted_with_it() -> None:
    assert _error({"schedulerName": "default-scheduler"}) == (
        "spec.schedulerName: 'default-scheduler' is a reserved scheduler name: a SchedulingProfile may "
        "claim it only when the operator runs with --allow-scheduler-name default-scheduler"
    )
    allowed = ProfileBounds(allowed_scheduler_names=frozenset({"default-scheduler"}))
    assert (
        parse_profile({"schedulerName": "default-scheduler"}, allowed).scheduler_name == "default-scheduler"
    )


def test_names_added_to_the_deny_list_are_refused_too() -> None:
    bounds = ProfileBounds(reserved_scheduler_names=frozenset({"default-scheduler", "volcano"}))
    assert _error({"schedulerName": "volcano"}, bounds).startswith(
        "spec.schedulerName: 'volcano' is a reserved scheduler name"
    )
    assert parse_profile({"schedulerName": "kopf-scheduler"}, bounds).scheduler_name == "kopf-scheduler"
    allowed = ProfileBounds(
        reserved_scheduler_names=bounds.reserved_scheduler_names,
        allowed_scheduler_names=frozenset({"volcano"}),
    )
    assert parse_profile({"schedulerName": "volcano"}, allowed).scheduler_name == "volcano"


def test_offline_tools_have_no_reserved_names_nor_tls_directory() -> None:
    """simulate (and the scenario tests) parse the user's own files: a profile for default-scheduler and
    TLS files anywhere are fine there; metadata addresses are refused all the same."""
    spec = parse_profile(
        {
            "schedulerName": "default-scheduler",
            "extenders": [{"urlPrefix": URL, "tlsConfig": {"caFile": "/x/ca.pem"}}],
        }
    )
    assert spec.scheduler_name == "default-scheduler"
    assert spec.extenders[0].tls is not None and spec.extenders[0].tls.path_of("/x/ca.pem") == "/x/ca.pem"
    assert _error(
        {"schedulerName": "s", "extenders": [{"urlPrefix": "http://169.254.169.254"}]}, OFFLINE
    ).startswith("spec.extenders[0].urlPrefix: 169.254.169.254 is a link-local or cloud metadata address")
