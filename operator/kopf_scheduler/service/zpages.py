"""``/flagz`` and ``/statusz`` of the secure port, in the formats kube-scheduler v1.37.2 serves them
(``k8s.io/apiserver/pkg/server/flagz`` and ``statusz`` at v0.37.2), behind the gates ``ComponentFlagz`` and
``ComponentStatusz``.

Without an ``Accept`` header (or with one that picks ``text/plain``, ``*/*`` among them) the answer is
upstream's debugging text, whose separator is chosen at random among ``:``, ``: ``, ``=`` and a space
(once for ``/flagz``, whose text upstream caches, at each request for ``/statusz``) so that no one parses
it. The structured forms need the kind named in the media type's parameters:
``application/json;as=Flagz;v=v1beta1;g=config.k8s.io`` (or ``v1alpha1``, deprecated: a ``Warning``
header says so; or ``application/yaml``). Any other ``Accept`` is 406 with the API server's ``Status``,
negotiated as upstream negotiates it (``negotiation.NegotiateOutputMediaType`` with the endpoints'
restrictions, then ``responsewriters.ErrorNegotiated``).

The secure port (``secure_port.py``) calls ``answer`` for each request, and ``error_reply`` for its
refusals, which kube-scheduler's handler chain negotiates the same way. Pure functions of what is shown,
but for the one piece of state: the flags ``kopf-scheduler run`` records (``record_flags``) for the
service it starts in the same process.
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from kopf_scheduler import __version__
from kopf_scheduler.api.feature_gates import FeatureGates, version_text

#: the component name in the text header and in ``metadata.name`` (upstream: ``kube-scheduler``)
COMPONENT = "kopf-scheduler"
GROUP = "config.k8s.io"
#: the structured versions upstream serves; the first is deprecated
VERSIONS = ("v1alpha1", "v1beta1")
DEPRECATED = frozenset({"v1alpha1"})
#: upstream's codec factory order (JSON, YAML, then the text serializer; protobuf filtered out, CBOR off)
MEDIA_TYPES = ("application/json", "application/yaml", "text/plain")
TEXT = "text/plain; charset=utf-8"
DELIMITERS = (":", ": ", "=", " ")
WARNING_TEXT = (
    "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility "
    "guarantees and is for debugging purposes only."
)
#: the folders ``/statusz`` never lists (upstream's ``nonDebuggingEndpoints``)
NON_DEBUGGING = frozenset({"/apis", "/api", "/openid", "/openapi", "/.well-known"})


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Status:
    """What ``/statusz`` shows (upstream's ``statuszRegistry``)."""

    start_time: float
    #: upstream: the Go version the binary was built with; here the Python that runs the process
    go_version: str
    binary_version: str
    emulation_version: str
    #: every path the port serves, ``/statusz`` itself excepted (upstream lists the paths registered
    #: before it)
    paths: Sequence[str]


@dataclass(frozen=True)
class Pages:
    """What the secure port serves of the two pages: the gates in force decide whether each is served."""

    flagz: bool
    statusz: bool
    #: the command line's flags; None: ``/flagz`` is not served
    flags: Mapping[str, str] | None
    start_time: float
    go_version: str
    binary_version: str
    emulation_version: str


def pages_for(gates: FeatureGates) -> Pages:
    """The pages of this process under ``gates``: kopf-scheduler's version as the binary version, the
    Python that runs it where upstream names its Go, the emulated version whose gates are in force."""
    return Pages(
        flagz=gates.enabled("ComponentFlagz"),
        statusz=gates.enabled("ComponentStatusz"),
        flags=recorded_flags(),
        start_time=process_start_time(),
        go_version=f"{platform.python_implementation()} {platform.python_version()}",
        binary_version=__version__,
        emulation_version=version_text(gates.version),
    )


# -- the flags of this process (``kopf-scheduler run`` records them) ----------------------------------

_recorded: dict[str, str] | None = None


def record_flags(flags: Mapping[str, str]) -> None:
    """The command line's flags, by name, as ``/flagz`` lists them (values already redacted)."""
    global _recorded
    _recorded = dict(flags)


def recorded_flags() -> Mapping[str, str] | None:
    """None when no command line recorded its flags (``kopf run -m kopf_scheduler.handlers``): then
    ``/flagz`` is not served, as kube-scheduler installs it only with a flag reader."""
    return _recorded


def process_start_time() -> float:
    """The process's start, in seconds since the epoch, whole seconds as upstream reads it
    (``/proc/self/stat``); the time of the first call where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rpartition(")")[2].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return float(int(boot + ticks / os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError, StopIteration):
        return float(int(time.time()))


# -- content negotiation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    type: str
    subtype: str
    q: float
    params: Mapping[str, str]


def parse_accept(header: str) -> list[Clause]:
    """``goautoneg.ParseAccept``: the clauses, highest ``q`` first, wildcards after exact types."""
    clauses = []
    for part in header.split(","):
        part = part.strip(" ")
        if not part:
            continue
        media, *param_parts = part.split(";")
        kind, _, sub = media.partition("/")
        kind, sub = kind.strip(" "), sub.strip(" ")
        if not _:
            if kind != "*":
                continue
            sub = "*"
        elif "/" in sub:
            continue
        q, params = 1.0, {}
        for item in param_parts:
            key, sep, value = item.partition("=")
            if not sep or "=" in value:
                continue
            key = key.strip(" ")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
            else:
                params[key] = value.strip(" ")
        clauses.append(Clause(kind, sub, q, params))
    return sorted(clauses, key=lambda c: (-c.q, c.type == "*", c.subtype == "*"))


@dataclass(frozen=True)
class Negotiated:
    media_type: str
    #: the structured version asked for (``v=``), None for text
    version: str | None
    pretty: bool


def negotiate(
    clauses: Sequence[Clause], kind: str | None, media_types: Sequence[str] = MEDIA_TYPES
) -> Negotiated | None:
    """``NegotiateMediaTypeOptions`` over ``media_types`` (the pages' by default; the scheduler's
    ``scheme.Codecs`` for the refusals of its handler chain: JSON, YAML). With ``kind`` (``Flagz``,
    ``Statusz``) as the endpoints restrict it: text without a conversion, JSON or YAML only converted to
    that kind of ``config.k8s.io`` at a version served. Without ``kind``, as the default restrictions that
    an error is written with: any media type, no conversion."""
    for clause in clauses:
        for media_type in media_types:
            main, sub = media_type.split("/")
            if clause.type not in (main, "*") or clause.subtype not in (sub, "*"):
                continue
            if clause.type == "*" and clause.subtype != "*":
                continue
            convert: dict[str, str] | None = None
            ok = True
            for key, value in clause.params.items():
                if key in ("as", "g", "v"):
                    convert = convert or {}
                    convert[key] = value
                elif key == "stream":
                    # only JSON streams, and only the default restrictions allow ``watch``
                    ok &= not value or (
                        media_type == "application/json" and kind is None and value == "watch"
                    )
                elif key == "sv":
                    ok &= not value
            if not ok:
                continue
            pretty = clause.params.get("pretty") == "1"
            if kind is None or media_type == "text/plain":
                if convert is None:
                    return Negotiated(media_type, None, pretty)
                continue
            if (
                convert
                and convert == {"as": kind, "g": GROUP, "v": convert.get("v")}
                and convert["v"] in VERSIONS
            ):
                return Negotiated(media_type, convert["v"], pretty)
    return None


# -- encodings ----------------------------------------------------------------------------------------


def go_json(obj: object, pretty: bool) -> bytes:
    """As Go's ``encoding/json`` writes it: ``Encoder.Encode`` (compact, one newline) or
    ``MarshalIndent`` (two spaces, no newline); ``<``, ``>``, ``&``, U+2028 and U+2029 escaped."""
    text = (
        json.dumps(obj, ensure_ascii=False, indent=2)
        if pretty
        else json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n"
    )
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text.encode()


def go_yaml(obj: object) -> bytes:
    """As ``sigs.k8s.io/yaml.JSONToYAML`` writes it: block style, keys sorted."""
    return yaml.safe_dump(obj, default_flow_style=False, sort_keys=True, allow_unicode=True).encode()


def _encode(negotiated: Negotiated, obj: object) -> bytes:
    if negotiated.media_type == "application/yaml":
        return go_yaml(obj)
    return go_json(obj, negotiated.pretty)


def _go_html_escape(text: str) -> str:
    """``html.EscapeString``."""
    for char, escaped in (("&", "&amp;"), ("'", "&#39;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;")):
        text = text.replace(char, escaped)
    return text


def header(endpoint: str) -> str:
    return f"\n{COMPONENT} {endpoint}\n{WARNING_TEXT}\n"


def flagz_text(flags: Mapping[str, str], delimiter: str) -> str:
    return header("flagz") + "".join(f"{name}{delimiter}{flags[name]}\n" for name in sorted(flags))


def flagz_object(version: str, flags: Mapping[str, str]) -> dict[str, object]:
    obj: dict[str, object] = {
        "kind": "Flagz",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"name": COMPONENT},
    }
    if flags:  # omitempty
        obj["flags"] = {name: flags[name] for name in sorted(flags)}
    return obj


def uptime_text(seconds: int) -> str:
    return f"{seconds // 3600} hr {(seconds // 60) % 60:02d} min {seconds % 60:02d} sec"


def listed_paths(paths: Sequence[str]) -> list[str]:
    """``aggregatePaths``: the first segment of each path, once, sorted, without the API's folders."""
    folders = {"/" + p.split("/")[1] for p in paths if len(p.split("/")) >= 2 and p.split("/")[1]}
    return sorted(folders - NON_DEBUGGING)


def statusz_text(status: Status, delimiter: str, now: float) -> str:
    d = _go_html_escape(delimiter)
    started = time.strftime("%a %b %e %H:%M:%S %Z %Y", time.localtime(status.start_time))
    up = uptime_text(max(0, int(now - status.start_time)))
    emulation = (
        f"Emulation version{d} {_go_html_escape(status.emulation_version)}"
        if status.emulation_version
        else ""
    )
    paths = " ".join(listed_paths(status.paths))
    shown_paths = f"Paths{d} {_go_html_escape(paths)}" if paths else ""
    return header("statusz") + (
        f"\nStarted{d} {_go_html_escape(started)}\nUp{d} {_go_html_escape(up)}\n"
        f"Go version{d} {_go_html_escape(status.go_version)}\n"
        f"Binary version{d} {_go_html_escape(status.binary_version)}\n{emulation}\n{shown_paths}\n"
    )


def statusz_object(version: str, status: Status, now: float) -> dict[str, object]:
    obj: dict[str, object] = {
        "kind": "Statusz",
        "apiVersion": f"{GROUP}/{version}",
        "metadata": {"name": COMPONENT},
        "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(status.start_time)),
        "uptimeSeconds": max(0, int(now - status.start_time)),
        "goVersion": status.go_version,
        "binaryVersion": status.binary_version,
    }
    if status.emulation_version:  # omitempty
        obj["emulationVersion"] = status.emulation_version
    obj["paths"] = listed_paths(status.paths) or None
    return obj


# -- the answer to one request ------------------------------------------------------------------------


def error_reply(
    fields: Mapping[str, object],
    accept: str,
    pretty_request: bool,
    media_types: Sequence[str] = MEDIA_TYPES,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An error as ``responsewriters.ErrorNegotiated`` writes it: the ``v1 Status`` (``fields``: status,
    message, reason, details, code) in the first of ``media_types`` the ``Accept`` header allows without a
    conversion (the first of them without the header), or else as Go's indented JSON (``WriteRawJSON``)."""
    code = int(str(fields["code"]))
    if accept:
        negotiated = negotiate(parse_accept(accept), None, media_types)
    else:
        negotiated = Negotiated(media_types[0], None, False)
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, **fields}
    if negotiated is None or negotiated.media_type == "text/plain":
        return Reply(code, go_json(status, pretty=True), "application/json", headers or {})
    negotiated = Negotiated(negotiated.media_type, None, negotiated.pretty or pretty_request)
    return Reply(code, _encode(negotiated, status), negotiated.media_type, headers or {})


def not_acceptable(accept: str, pretty_request: bool) -> Reply:
    """406 for an ``Accept`` header the page cannot answer."""
    message = f"only the following media types are accepted: {', '.join(MEDIA_TYPES)}"
    fields = {"status": "Failure", "message": message, "reason": "NotAcceptable", "code": 406}
    return error_reply(fields, accept, pretty_request)


def answer(
    endpoint: str,
    accept: str,
    text: Callable[[], str],
    structured: Callable[[str], object],
    pretty_request: bool = False,
) -> Reply:
    """The reply of ``/flagz`` or ``/statusz`` (``endpoint``) to a request with ``accept``: ``text()``
    its text, ``structured(version)`` its object. ``pretty_request``: upstream's ``isPrettyPrint`` (a
    ``pretty`` query, or a curl, Wget or browser user agent)."""
    if not accept.strip():
        return Reply(200, text().encode(), TEXT)
    clauses = parse_accept(accept)
    negotiated = negotiate(clauses, endpoint.capitalize())
    if negotiated is None:
        return not_acceptable(accept, pretty_request)
    if negotiated.version is None:
        return Reply(200, text().encode(), TEXT)
    version = negotiated.version
    headers = {}
    if version in DEPRECATED:
        headers["Warning"] = (
            f'299 - "This version of the {endpoint} endpoint is deprecated. Please use a newer version."'
        )
    negotiated = Negotiated(negotiated.media_type, version, negotiated.pretty or pretty_request)
    content_type = f"{negotiated.media_type};g={GROUP};v={version};as={endpoint.capitalize()}"
    return Reply(200, _encode(negotiated, structured(version)), content_type, headers)


def random_delimiter() -> str:
    return random.choice(DELIMITERS)
