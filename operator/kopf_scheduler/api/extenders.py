"""A profile's scheduler extenders (``spec.extenders``): kube-scheduler's ``Extender`` configuration
(``staging/src/k8s.io/kube-scheduler/config/v1/types.go``), parsed and validated.

Validation is upstream's ``validateExtenders`` (``pkg/scheduler/apis/config/validation``): a weight > 0
for every extender with a prioritize verb (here also never negative, nor above ``MAX_EXTENDER_WEIGHT``),
at most one extender with a bind verb, managed resources that are extended resource names and appear
once across the profile's extenders. Beyond upstream, the
``urlPrefix`` must be an http(s) URL with a host, ``httpTimeout`` a Go duration and the ``*Data`` fields
base64, so a profile that cannot work is refused when it is applied rather than failing every pod later.
kube-scheduler configures extenders once for all profiles; here each SchedulingProfile has its own.

Bounds beyond upstream (``api/bounds.py``): every call has a time limit (a negative ``httpTimeout``, which
upstream reads as none, is refused, and so is one above ``MAX_HTTP_TIMEOUT``: a profile's scheduling
cycle waits on its extenders); a URL at a link-local or metadata address is refused unless the operator
allows it; TLS files must lie in the operator's TLS directory.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from kopf_scheduler.api.bounds import (
    ALLOW_LINK_LOCAL_FLAG,
    EXTENDER_TLS_DIR_FLAG,
    OFFLINE,
    ProfileBounds,
    confined_path,
    is_link_local_or_metadata,
    is_metadata_hostname,
)
from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.api.errors import ProfileError, join_path

#: ``DefaultExtenderTimeout`` (``pkg/scheduler/extender.go``): an unset or zero ``httpTimeout``
DEFAULT_HTTP_TIMEOUT = 5.0
#: the longest ``httpTimeout`` a profile may set (upstream has no limit; every pod of the profile waits on
#: the call, and with it the scheduling loop)
MAX_HTTP_TIMEOUT = 300.0

#: the largest extender ``weight`` (upstream: any positive int64, multiplied into int64 node scores
#: that wrap around). An extender's top score (10, scaled to 100) times this outweighs every score
#: plugin's top score (100 x weight 100) a hundred times over: a larger weight changes no placement
MAX_EXTENDER_WEIGHT = 1_000_000

_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class TLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    #: PEM bytes (base64 in the spec); each takes precedence over its ``*_file``
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""
    #: the directory the ``*_file`` paths are taken from and must stay in (the operator's TLS directory,
    #: checked again with symlinks resolved when a file is read); None: paths as written, anywhere
    file_dir: str | None = None

    @property
    def has_ca(self) -> bool:
        return bool(self.ca_file or self.ca_data)

    def path_of(self, written: str) -> str:
        """Where the file a ``*File`` field names is read from (a relative path from ``file_dir``)."""
        if self.file_dir is None:
            return written
        return os.path.normpath(os.path.join(self.file_dir, written))


@dataclass(frozen=True, slots=True)
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True, slots=True)
class ExtenderSpec:
    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    tls: TLSConfig | None = None
    #: seconds, at most ``MAX_HTTP_TIMEOUT``; every call has a time limit
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    node_cache_capable: bool = False
    managed_resources: tuple[ManagedResource, ...] = ()
    ignorable: bool = False
    #: the URL may point at (or its host resolve to) a link-local or metadata address
    allow_link_local: bool = False
    #: the field path of this entry, for errors found when the extender is built
    path: str = field(default="", compare=False)


def _base64(raw: Any, path: str) -> bytes:
    if not raw:
        return b""
    try:
        return base64.b64decode(str(raw), validate=True)
    except (binascii.Error, ValueError):
        raise ProfileError(path, "must be base64-encoded PEM data") from None


def _tls_file(raw: Mapping[str, Any], key: str, path: str, directory: str | None) -> str:
    written = str(raw.get(key) or "")
    if written and directory is not None and confined_path(directory, written) is None:
        raise ProfileError(
            join_path(path, key),
            f"must name a file in {directory} (the operator's {EXTENDER_TLS_DIR_FLAG}), not {written!r}",
        )
    return written


def _tls(raw: Mapping[str, Any] | None, path: str, directory: str | None) -> TLSConfig | None:
    if raw is None:
        return None
    return TLSConfig(
        insecure=bool(raw.get("insecure")),
        server_name=str(raw.get("serverName") or ""),
        cert_file=_tls_file(raw, "certFile", path, directory),
        key_file=_tls_file(raw, "keyFile", path, directory),
        ca_file=_tls_file(raw, "caFile", path, directory),
        cert_data=_base64(raw.get("certData"), join_path(path, "certData")),
        key_data=_base64(raw.get("keyData"), join_path(path, "keyData")),
        ca_data=_base64(raw.get("caData"), join_path(path, "caData")),
        file_dir=directory,
    )


def _timeout(raw: Any, path: str) -> float:
    if raw is None or raw == "":
        return DEFAULT_HTTP_TIMEOUT
    try:
        seconds = parse_duration(str(raw))
    except DurationError as e:
        raise ProfileError(path, str(e)) from None
    if seconds < 0:
        raise ProfileError(path, f"must not be negative (every extender call has a time limit), not {raw!r}")
    if seconds > MAX_HTTP_TIMEOUT:
        raise ProfileError(path, f"must be at most {MAX_HTTP_TIMEOUT:g}s, not {raw!r}")
    return seconds or DEFAULT_HTTP_TIMEOUT


def _url(url: str, path: str, bounds: ProfileBounds) -> None:
    """Refuses a URL that is not http(s) with a host, or (unless allowed) names a link-local or metadata
    address; a host name resolving to one is refused when the extender is called."""
    if not url.startswith(("http://", "https://")):
        raise ProfileError(path, f"must be an http:// or https:// URL, not {url!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # raises ValueError for a port out of range
    except ValueError as e:
        raise ProfileError(path, f"{url!r} is not a valid URL: {e}") from None
    if not host:
        raise ProfileError(path, f"{url!r} names no host")
    if not bounds.allow_link_local_extenders and (
        is_link_local_or_metadata(host) or is_metadata_hostname(host)
    ):
        raise ProfileError(
            path,
            f"{host} is a link-local or cloud metadata address: extenders there need the operator flag "
            f"{ALLOW_LINK_LOCAL_FLAG}",
        )


def extended_resource_name_errors(name: str) -> list[str]:
    """Why ``name`` is not an extended resource name (``validateExtendedResourceName`` upstream)."""
    prefix, slash, local = name.rpartition("/")
    if not slash:
        prefix, local = "", name
    errors: list[str] = []
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        errors.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not local or len(local) > 63 or not _QUALIFIED_NAME.match(local):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (at most 63 characters)"
        )
    if errors:
        return errors
    native = not slash or "kubernetes.io/" in name
    if native or name.startswith("requests.") or len("requests." + prefix) > 253:
        return ["is an invalid extended resource name"]
    return []


def parse_extenders(
    raw: Sequence[Mapping[str, Any]] | None, base: str = "spec.extenders", bounds: ProfileBounds = OFFLINE
) -> list[ExtenderSpec]:
    """The schema-valid ``spec.extenders`` list as ``ExtenderSpec``s, in their order, within ``bounds``;
    raises ``ProfileError`` naming the first bad field."""
    extenders: list[ExtenderSpec] = []
    binders: list[int] = []
    managed: set[str] = set()
    for i, entry in enumerate(raw or ()):
        path = join_path(base, i)
        url = str(entry.get("urlPrefix") or "")
        _url(url, join_path(path, "urlPrefix"), bounds)
        prioritize_verb = str(entry.get("prioritizeVerb") or "")
        weight = int(entry.get("weight") or 0)
        if prioritize_verb and weight <= 0:
            raise ProfileError(
                join_path(path, "weight"),
                f"must be > 0 when prioritizeVerb is set (must have a positive weight applied to it), "
                f"not {weight}",
            )
        if weight < 0:  # upstream takes any weight without a prioritize verb; it is never meaningful
            raise ProfileError(join_path(path, "weight"), f"must not be negative, not {weight}")
        if entry.get("bindVerb"):
            binders.append(i)
        resources: list[ManagedResource] = []
        for j, resource in enumerate(entry.get("managedResources") or ()):
            name_path = join_path(path, "managedResources", j, "name")
            name = str(resource.get("name") or "")
            problems = extended_resource_name_errors(name)
            if problems:
                raise ProfileError(name_path, f"{name!r}: {problems[0]}")
            if name in managed:
                raise ProfileError(name_path, f"{name!r}: duplicate extender managed resource name")
            managed.add(name)
            resources.append(ManagedResource(name, bool(resource.get("ignoredByScheduler"))))
        extenders.append(
            ExtenderSpec(
                url_prefix=url,
                filter_verb=str(entry.get("filterVerb") or ""),
                preempt_verb=str(entry.get("preemptVerb") or ""),
                prioritize_verb=prioritize_verb,
                bind_verb=str(entry.get("bindVerb") or ""),
                weight=weight,
                enable_https=bool(entry.get("enableHTTPS")),
                tls=_tls(entry.get("tlsConfig"), join_path(path, "tlsConfig"), bounds.extender_tls_dir),
                http_timeout=_timeout(entry.get("httpTimeout"), join_path(path, "httpTimeout")),
                node_cache_capable=bool(entry.get("nodeCacheCapable")),
                managed_resources=tuple(resources),
                ignorable=bool(entry.get("ignorable")),
                allow_link_local=bounds.allow_link_local_extenders,
                path=path,
            )
        )
    if len(binders) > 1:
        raise ProfileError(
            base,
            f"found {len(binders)} extenders implementing bind (entries {binders}): "
            "only one extender can implement bind",
        )
    return extenders


def ignored_resources(extenders: Sequence[ExtenderSpec]) -> list[str]:
    """Managed resources the scheduler's own resource checks skip (``ignoredByScheduler``), in order."""
    return [r.name for e in extenders for r in e.managed_resources if r.ignored_by_scheduler]
