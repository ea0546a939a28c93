"""``/flagz`` and ``/statusz`` answer as kube-scheduler v1.37.2's do, on the same cluster: an upstream
kube-scheduler with delegated authentication and authorization and ``kopf-scheduler run`` are asked the same
requests by the same users, with the same ``Accept`` headers. Both give the same status codes to anonymous,
unknown, unauthorised and authorised callers, the same content types, ``Warning`` and ``Cache-Control``
headers and error bodies, and text and JSON bodies of the same structure (header, section names and
separator; kinds, keys and the types of values); the values (flags, versions, times) are each one's own.
With both gates off, both answer 404 after the same authorization.
"""

from __future__ import annotations

import contextlib
import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from operator_harness import Operators, Scope, kubeconfig_token
from test_metrics_access_vs_kube_scheduler import (
    GRANTED,
    UNGRANTED,
    _grant_metrics_reader,
    delegating_kube_scheduler,
)

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

INSECURE = ssl._create_unverified_context()  # both serve self-signed certificates
WARNING_TEXT = (
    "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility "
    "guarantees and is for debugging purposes only."
)
STRUCTURED = "application/{};as={};v={};g=config.k8s.io"
#: the headers compared as they are (the others, Date, Content-Length, Server, are each server's own)
COMPARED_HEADERS = ("Content-Type", "Cache-Control", "Warning", "X-Content-Type-Options")
STATUSZ_SECTIONS = ["Started", "Up", "Go version", "Binary version", "Emulation version", "Paths"]


def request(
    url: str, token: str | None, accept: str | None, agent: str = "e2e"
) -> tuple[int, dict[str, str], str]:
    headers = {"User-Agent": agent}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if accept is not None:
        headers["Accept"] = accept
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10, context=INSECURE
        ) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, dict(e.headers), e.read().decode()


def accepts(kind: str) -> dict[str, str | None]:
    return {
        "none": None,
        "text": "text/plain",
        "any": "*/*",
        "browser": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        "json v1beta1": STRUCTURED.format("json", kind, "v1beta1"),
        "json v1alpha1": STRUCTURED.format("json", kind, "v1alpha1"),
        "yaml v1beta1": STRUCTURED.format("yaml", kind, "v1beta1"),
        "json, no kind": "application/json",
        "json, no group": f"application/json;as={kind};v=v1beta1",
        "json, other kind": STRUCTURED.format("json", "Other", "v1beta1"),
        "json or text": "application/json, text/plain;q=0.5",
        "yaml, no kind": "application/yaml",
        "xml": "application/xml",
    }


def text_shape(endpoint: str, component: str, body: str) -> tuple[str, list[str]]:
    """The separator and what each line is: the header checked, then ``name`` of each line."""
    header = f"\n{component} {endpoint}\n{WARNING_TEXT}\n"
    assert body.startswith(header), body
    rest = body[len(header) :]
    if endpoint == "statusz":
        assert rest.startswith("\nStarted"), rest
        # the date follows the separator and a space: "Started: Sun", "Started:  Sun", "Started  Sun"
        separator = re.match(r"\nStarted(.*?) (?=[A-Z][a-z]{2} )", rest).group(1)  # type: ignore[union-attr]
        assert separator in (":", ": ", "=", " "), rest
        lines = rest[1:].split("\n")
        assert lines[-1] == "", rest
        names = [
            next((n for n in STATUSZ_SECTIONS if line.startswith(n + separator + " ")), line)
            for line in lines[:-1]
        ]
        started, up = (line.split(separator + " ", 1)[1] for line in lines[:2])
        assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \w+ \d{4}", started), lines[0]
        assert re.fullmatch(r"\d+ hr \d\d min \d\d sec", up), lines[1]
        return separator, names
    lines = rest.split("\n")
    assert lines[-1] == "", rest
    parsed = [re.match(r"([A-Za-z0-9._-]+)(: |:|=| )", line) for line in lines[:-1]]
    assert all(parsed), rest
    names = [m.group(1) for m in parsed if m]
    separators = {m.group(2) for m in parsed if m}
    assert len(separators) == 1 and names == sorted(names), rest  # Go's sort.Strings: bytewise
    return separators.pop(), ["name=value"]


def json_shape(obj: dict[str, object]) -> dict[str, object]:
    """Keys and the types of values; kind, apiVersion and the keys of metadata as they are."""
    shape: dict[str, object] = {}
    for key, value in obj.items():
        if key in ("kind", "apiVersion"):
            shape[key] = value
        elif key == "metadata":
            shape[key] = sorted(value)  # type: ignore[arg-type]
        elif isinstance(value, dict):
            shape[key] = sorted({type(v).__name__ for v in value.values()})
        elif isinstance(value, list):
            shape[key] = ["list", sorted({type(v).__name__ for v in value})]
        else:
            shape[key] = type(value).__name__
    return shape


Answer = tuple[int, dict[str, str], str]


def compare(endpoint: str, caller: str, label: str, theirs: Answer, ours: Answer) -> None:
    (status, headers, body), (upstream_status, upstream_headers, upstream_body) = ours, theirs
    where = (endpoint, caller, label)
    assert status == upstream_status, (*where, upstream_body, body)
    for name in COMPARED_HEADERS:
        assert headers.get(name) == upstream_headers.get(name), (*where, name, upstream_headers, headers)
    content_type = headers.get("Content-Type", "")
    if status != 200:
        assert body == upstream_body, (*where, upstream_body, body)
    elif content_type.startswith("text/plain"):
        mine = text_shape(endpoint, "kopf-scheduler", body)[1]
        assert mine == text_shape(endpoint, "kube-scheduler", upstream_body)[1], where
    elif content_type.startswith("application/json"):
        mine, upstream = json.loads(body), json.loads(upstream_body)
        assert json_shape(mine) == json_shape(upstream), (*where, upstream, mine)
        assert (mine["metadata"], upstream["metadata"]) == (
            {"name": "kopf-scheduler"},
            {"name": "kube-scheduler"},
        )
        assert body.endswith("}\n") and upstream_body.endswith("}\n") and "\n" not in body[:-1], where
    else:
        assert content_type.startswith("application/yaml"), where
        assert json_shape(yaml.safe_load(body)) == json_shape(yaml.safe_load(upstream_body)), where


def test_flagz_and_statusz_answer_every_caller_as_kube_scheduler_does(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    _grant_metrics_reader(control_plane, scope, GRANTED)  # /metrics only: refused these pages by both
    operator = operators.start("op-zpages", lease_namespace=scope.namespace, ports=True, secure_metrics=True)
    operator.wait_leading()
    ours = f"https://127.0.0.1:{operator.metrics_port}"
    callers = {
        "anonymous": None,
        "unknown token": "0123456789abcdef",
        UNGRANTED: kubeconfig_token(control_plane.cluster.user_kubeconfig(UNGRANTED)),
        GRANTED: kubeconfig_token(control_plane.cluster.user_kubeconfig(GRANTED)),
        "admin": control_plane.token,
    }
    seen: dict[str, set[int]] = {}
    with delegating_kube_scheduler(control_plane, scope, tmp_path) as theirs:
        for endpoint in ("flagz", "statusz"):
            for caller, token in callers.items():
                for label, accept in accepts(endpoint.capitalize()).items():
                    upstream = request(f"{theirs}/{endpoint}", token, accept)
                    mine = request(f"{ours}/{endpoint}", token, accept)
                    compare(endpoint, caller, label, upstream, mine)
                    seen.setdefault(caller, set()).add(mine[0])
            # curl's user agent makes upstream's structured answers and its errors indented JSON
            for label in ("json v1beta1", "json, no kind"):
                accept = accepts(endpoint.capitalize())[label]
                upstream = request(f"{theirs}/{endpoint}", control_plane.token, accept, agent="curl/8.5.0")
                mine = request(f"{ours}/{endpoint}", control_plane.token, accept, agent="curl/8.5.0")
                assert (mine[0], mine[1]["Content-Type"]) == (upstream[0], upstream[1]["Content-Type"]), label
                if mine[0] != 200:
                    assert mine[2] == upstream[2], (label, upstream[2], mine[2])
                else:
                    assert json_shape(json.loads(mine[2])) == json_shape(json.loads(upstream[2]))
                    assert mine[2].startswith('{\n  "kind": "') and upstream[2].startswith('{\n  "kind": "')
    assert seen == {
        "anonymous": {403},
        "unknown token": {401},
        UNGRANTED: {403},
        GRANTED: {403},
        "admin": {200, 406},
    }
    # the flags are ours, with their values
    _, _, body = request(f"{ours}/flagz", control_plane.token, STRUCTURED.format("json", "Flagz", "v1beta1"))
    flags = json.loads(body)["flags"]
    assert flags["metrics-port"] == str(operator.metrics_port) and flags["lease-namespace"] == scope.namespace
    _, _, body = request(
        f"{ours}/statusz", control_plane.token, STRUCTURED.format("json", "Statusz", "v1beta1")
    )
    assert json.loads(body)["paths"] == ["/flagz", "/healthz", "/livez", "/metrics", "/readyz"]


def test_with_the_gates_off_both_answer_404_after_authorization(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, tmp_path: Path
) -> None:
    gates = "--feature-gates=ComponentFlagz=false,ComponentStatusz=false"
    operator = operators.start(
        "op-zpages-off", lease_namespace=scope.namespace, ports=True, secure_metrics=True, args=[gates]
    )
    operator.wait_leading()
    ours = f"https://127.0.0.1:{operator.metrics_port}"
    with delegating_kube_scheduler(control_plane, scope, tmp_path, [gates]) as theirs:
        for endpoint in ("flagz", "statusz"):
            for caller, token in {"anonymous": None, "admin": control_plane.token}.items():
                upstream = request(f"{theirs}/{endpoint}", token, None)
                mine = request(f"{ours}/{endpoint}", token, None)
                compare(endpoint, caller, "gates off", upstream, mine)
                assert mine[0] == (403 if token is None else 404), (endpoint, caller)
        assert request(f"{ours}/flagz", control_plane.token, None)[2] == "404 page not found\n"
