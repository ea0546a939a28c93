"""``/flagz`` and ``/statusz`` as kube-scheduler v1.37.2 serves them: upstream's debugging text without an
``Accept`` header (or with ``text/plain``, ``*/*``), the ``config.k8s.io`` objects only for a media type
naming their kind, group and version, 406 with the API server's ``Status`` otherwise; only for an
authorised user; absent (404) when their gate is off."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml
from review_api import ReviewServer

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.service import zpages
from kopf_scheduler.service.config import ServingConfig
from kopf_scheduler.service.metrics import SchedulerMetrics
from kopf_scheduler.service.secure_port import MetricsServer

START = time.mktime((2026, 11, 29, 3, 0, 0, 0, 0, -1))
FLAGS = {"secure-port": "10259", "leader-elect": "true", "feature-gates": "A=true,B=false"}
TEXT_HEADER = (
    "\nkopf-scheduler {}\nWarning: This endpoint is not meant to be machine parseable, has no formatting "
    "compatibility guarantees and is for debugging purposes only.\n"
)
JSON = "application/json;as={};v=v1beta1;g=config.k8s.io"


def pages(flagz: bool = True, statusz: bool = True) -> zpages.Pages:
    return zpages.Pages(flagz, statusz, FLAGS, START, "CPython 3.12.3", "0.1.0", "1.37")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def serving(shown: zpages.Pages, api: ReviewServer | None = None) -> Iterator[str]:
    config = ServingConfig(free_port(), "127.0.0.1", insecure=api is None)
    make_rest = None if api is None else (lambda: api.api)
    server = MetricsServer(config, SchedulerMetrics().registry, make_rest=make_rest, pages=shown)  # type: ignore[arg-type,return-value]
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def get(url: str, accept: str | None = None, token: str | None = None) -> tuple[int, dict[str, str], str]:
    headers = {"User-Agent": "test"}
    if accept is not None:
        headers["Accept"] = accept
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, headers=headers)
    context = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        with contextlib.closing(e):
            return e.code, dict(e.headers), e.read().decode()


def test_flagz_text_lists_every_flag_sorted_with_one_separator() -> None:
    with serving(pages()) as url:
        for accept in (None, "", "text/plain", "*/*", "text/html,application/xhtml+xml,*/*;q=0.8"):
            status, headers, body = get(url + "/flagz", accept)
            assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8"), accept
            assert headers["Cache-Control"] == "no-cache, private"
            assert body.startswith(TEXT_HEADER.format("flagz"))
            lines = body[len(TEXT_HEADER.format("flagz")) :].splitlines()
            separator = re.fullmatch(r"feature-gates(: |:|=| )A=true,B=false", lines[0])
            assert separator is not None, lines
            d = separator.group(1)
            assert lines == [
                f"feature-gates{d}A=true,B=false",
                f"leader-elect{d}true",
                f"secure-port{d}10259",
            ]
        # upstream caches the text: the separator stays for the process's life
        assert len({get(url + "/flagz")[2] for _ in range(8)}) == 1


def test_flagz_json_and_yaml_for_the_named_kind_and_version() -> None:
    with serving(pages()) as url:
        status, headers, body = get(url + "/flagz", JSON.format("Flagz"))
        assert status == 200
        assert headers["Content-Type"] == "application/json;g=config.k8s.io;v=v1beta1;as=Flagz"
        assert "Warning" not in headers
        assert body == (
            '{"kind":"Flagz","apiVersion":"config.k8s.io/v1beta1","metadata":{"name":"kopf-scheduler"},'
            '"flags":{"feature-gates":"A=true,B=false","leader-elect":"true","secure-port":"10259"}}\n'
        )
        status, headers, body = get(url + "/flagz", "application/json;g=config.k8s.io;v=v1alpha1;as=Flagz")
        assert json.loads(body)["apiVersion"] == "config.k8s.io/v1alpha1"
        assert headers["Warning"] == (
            '299 - "This version of the flagz endpoint is deprecated. Please use a newer version."'
        )
        status, headers, body = get(url + "/flagz", "application/yaml;as=Flagz;v=v1beta1;g=config.k8s.io")
        assert headers["Content-Type"] == "application/yaml;g=config.k8s.io;v=v1beta1;as=Flagz"
        assert yaml.safe_load(body)["flags"] == FLAGS


@pytest.mark.parametrize(
    "accept",
    [
        "application/json",  # no kind named
        "application/json;as=Flagz;v=v1beta1",  # no group
        "application/json;as=Flagz;v=v1;g=config.k8s.io",  # a version not served
        "application/json;as=Statusz;v=v1beta1;g=config.k8s.io",  # the other page's kind
    ],
)
def test_json_without_the_right_kind_is_406_with_a_status(accept: str) -> None:
    with serving(pages()) as url:
        status, headers, body = get(url + "/flagz", accept)
    assert (status, headers["Content-Type"]) == (406, "application/json")
    message = "only the following media types are accepted: application/json, application/yaml, text/plain"
    negotiated = accept == "application/json"  # the Status itself in the media type asked
    if negotiated:
        assert (
            body
            == json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": message,
                    "reason": "NotAcceptable",
                    "code": 406,
                },
                separators=(",", ":"),
            )
            + "\n"
        )
    else:  # no media type allowed without a conversion: Go's indented JSON
        assert body == json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "NotAcceptable",
                "code": 406,
            },
            indent=2,
        )


def test_an_unknown_media_type_is_406_and_json_falls_back_to_text_when_offered() -> None:
    with serving(pages()) as url:
        assert get(url + "/statusz", "application/xml")[0] == 406
        status, headers, _ = get(url + "/statusz", "application/json, text/plain;q=0.5")
        assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")


def test_statusz_text_and_json() -> None:
    with serving(pages()) as url:
        status, headers, body = get(url + "/statusz")
        assert (status, headers["Content-Type"]) == (200, "text/plain; charset=utf-8")
        assert body.startswith(TEXT_HEADER.format("statusz") + "\n")
        lines = body[len(TEXT_HEADER.format("statusz")) + 1 :].splitlines()
        started = time.strftime("%a %b %e %H:%M:%S %Z %Y", time.localtime(START))
        d = lines[0][len("Started") : -len(" " + started)]
        assert d in zpages.DELIMITERS and lines[0] == f"Started{d} {started}"
        names = ["Started", "Up", "Go version", "Binary version", "Emulation version", "Paths"]
        assert [line[: len(name + d + " ")] for name, line in zip(names, lines, strict=True)] == [
            name + d + " " for name in names
        ]
        assert lines[-1] == f"Paths{d} /flagz /healthz /livez /metrics /readyz"
        assert lines[-2] == f"Emulation version{d} 1.37"
        assert re.fullmatch(rf"Up{re.escape(d)} \d+ hr \d\d min \d\d sec", lines[1])
        status, headers, body = get(url + "/statusz", JSON.format("Statusz"))
        assert headers["Content-Type"] == "application/json;g=config.k8s.io;v=v1beta1;as=Statusz"
        obj = json.loads(body)
        assert list(obj) == [
            "kind", "apiVersion", "metadata", "startTime", "uptimeSeconds", "goVersion", "binaryVersion",
            "emulationVersion", "paths",
        ]  # fmt: skip
        assert obj["startTime"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START))
        assert obj["uptimeSeconds"] >= int(time.time() - START) - 1
        assert (obj["kind"], obj["metadata"], obj["paths"]) == (
            "Statusz",
            {"name": "kopf-scheduler"},
            ["/flagz", "/healthz", "/livez", "/metrics", "/readyz"],
        )


def test_text_formats_as_upstream() -> None:
    assert zpages.uptime_text(3 * 3600 + 4 * 60 + 5) == "3 hr 04 min 05 sec"
    assert zpages.listed_paths(["/healthz", "/healthz/ping", "/api/v1", "/metrics/slis", "/"]) == [
        "/healthz",
        "/metrics",
    ]
    shown = zpages.Status(START, "CPython <3>", "0.1.0", "", [])
    text = zpages.statusz_text(shown, "=", START + 61)
    assert text.endswith(
        "\nUp= 0 hr 01 min 01 sec\nGo version= CPython &lt;3&gt;\nBinary version= 0.1.0\n\n\n"
    )
    assert zpages.go_json({"a": "<&>"}, pretty=False) == b'{"a":"\\u003c\\u0026\\u003e"}\n'
    assert zpages.go_json({"a": {}}, pretty=True) == b'{\n  "a": {}\n}'


def test_only_authorised_users_and_404_when_the_gate_is_off() -> None:
    api = ReviewServer()
    api.tokens["admin"] = {"username": "admin", "groups": []}
    api.tokens["nobody"] = {"username": "nobody", "groups": []}
    api.allowed["admin"] = {"/flagz", "/statusz"}
    with serving(pages(flagz=False), api) as url:
        assert get(url + "/statusz", token="admin")[0] == 200
        assert get(url + "/statusz", token="nobody")[0] == 403
        assert get(url + "/statusz")[0] == 403
        assert get(url + "/statusz", token="stolen")[0] == 401
        # gate off: authorised as any path, then not found as Go's mux answers
        assert get(url + "/flagz", token="nobody")[0] == 403
        status, headers, body = get(url + "/flagz", token="admin")
        assert (status, headers["Content-Type"], body) == (
            404,
            "text/plain; charset=utf-8",
            "404 page not found\n",
        )
        assert "/flagz" not in get(url + "/statusz", token="admin")[2]


def test_gates_in_force_decide_the_pages() -> None:
    assert zpages.pages_for(FeatureGates((1, 37))).flagz
    assert zpages.pages_for(FeatureGates((1, 37))).statusz
    old = zpages.pages_for(FeatureGates((1, 35)))
    assert (old.flagz, old.statusz, old.emulation_version) == (False, False, "1.35")
    off = zpages.pages_for(FeatureGates((1, 37), {"ComponentStatusz": False}))
    assert (off.flagz, off.statusz) == (True, False)
    FeatureGates.resolve((1, 37), {"ComponentFlagz": False, "ComponentStatusz": True})  # both values accepted


def test_refusals_are_negotiated_as_the_handler_chain_writes_them() -> None:
    api = ReviewServer()
    with serving(pages(), api) as url:
        status, headers, body = get(url + "/flagz")
        assert (status, headers["Content-Type"], headers["X-Content-Type-Options"]) == (
            403,
            "application/json",
            "nosniff",
        )
        assert body.startswith('{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",')
        # text is not among the chain's media types: Go's indented JSON
        status, headers, body = get(url + "/flagz", "text/plain")
        assert (status, headers["Content-Type"]) == (403, "application/json")
        assert json.loads(body) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'forbidden: User "system:anonymous" cannot get path "/flagz"',
            "reason": "Forbidden",
            "details": {},
            "code": 403,
        }
        assert body.startswith('{\n  "kind": "Status",\n  "apiVersion": "v1",\n  "metadata": {},\n')
        status, headers, body = get(url + "/statusz", "application/yaml", token="stolen")
        assert (status, headers["Content-Type"]) == (401, "application/yaml")
        assert "X-Content-Type-Options" not in headers
        assert yaml.safe_load(body) == {
            "apiVersion": "v1",
            "code": 401,
            "kind": "Status",
            "message": "Unauthorized",
            "metadata": {},
            "reason": "Unauthorized",
            "status": "Failure",
        }
