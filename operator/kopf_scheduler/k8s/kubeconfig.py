"""Reading kubeconfig files (what kubectl and client-go read): merging them, finding a context with its
cluster and user, decoding inline or file data, running credential plugins. ``connection.load_kubeconfig``
turns what is read here into a ``ConnectionInfo``; this module knows nothing of connections, so it sits
below ``connection`` (and holds ``ConfigError``, which both raise).

Several files (``$KUBECONFIG`` is a path list) merge as client-go merges them: the first file to define
a cluster, user or context name wins, and the first non-empty ``current-context`` wins. Relative paths are
relative to the file that holds the stanza. Static credentials (CA, client certificates, token, token
file, basic auth) are read by the caller; users with an ``exec`` plugin or an ``auth-provider`` are
delegated to ``kubernetes.config``, which runs the plugin (and re-runs it when the credential expires).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class ConfigError(Exception):
    """No usable cluster configuration: the message names the file and the missing or bad field."""


@dataclass(frozen=True)
class Entry:
    """One named stanza and the folder its relative paths are relative to."""

    body: Mapping[str, Any]
    base: Path
    origin: Path


@dataclass
class _Merged:
    clusters: dict[str, Entry]
    users: dict[str, Entry]
    contexts: dict[str, Entry]
    current_context: str
    files: list[Path]


def split_paths(paths: str | Path | Sequence[str | Path]) -> list[Path]:
    if isinstance(paths, Path):
        return [paths]
    if isinstance(paths, str):
        return [Path(p) for p in paths.split(os.pathsep) if p]
    return [Path(p) for p in paths]


def _read(path: Path) -> Mapping[str, Any]:
    try:
        data = yaml.safe_load(path.expanduser().read_text())
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: a kubeconfig must be a mapping")
    return data


def merge(paths: Sequence[Path]) -> _Merged:
    merged = _Merged({}, {}, {}, "", [])
    for path in paths:
        path = path.expanduser()
        if not path.exists():  # client-go skips missing files in the list
            continue
        data = _read(path)
        merged.files.append(path)
        base = path.resolve().parent
        for section, target in (
            ("clusters", merged.clusters),
            ("users", merged.users),
            ("contexts", merged.contexts),
        ):
            kind = section[:-1]
            for item in data.get(section) or ():
                if not isinstance(item, Mapping) or not item.get("name"):
                    raise ConfigError(f"{path}: every entry of {section} needs a name")
                body = item.get(kind) or {}
                if not isinstance(body, Mapping):
                    raise ConfigError(f"{path}: {section}[{item['name']}].{kind} must be a mapping")
                target.setdefault(str(item["name"]), Entry(body, base, path))
        if not merged.current_context and data.get("current-context"):
            merged.current_context = str(data["current-context"])
    if not merged.files:
        raise ConfigError(f"kubeconfig not found: {os.pathsep.join(str(p) for p in paths)}")
    return merged


def file_or_data(entry: Entry, file_key: str, data_key: str, where: str) -> bytes | None:
    data = entry.body.get(data_key)
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{entry.origin}: {where}.{data_key} is not valid base64") from None
    name = entry.body.get(file_key)
    if name:
        path = entry.base / Path(str(name)).expanduser()
        try:
            return path.read_bytes()
        except OSError as e:
            raise ConfigError(f"{entry.origin}: {where}.{file_key}: {path}: {e.strerror or e}") from None
    return None


@dataclass(frozen=True)
class Context:
    """A context of the merged files with its cluster and user (``None`` when it names no user)."""

    name: str
    #: the files read, for messages
    files: str
    context: Entry
    cluster_name: str
    cluster: Entry
    user_name: str
    user: Entry | None
    server: str


def find_context(paths: Sequence[Path], *, context: str | None = None) -> Context:
    """``context`` (default: the current context) in the merged files ``paths``."""
    merged = merge(paths)
    name = context or merged.current_context
    files = os.pathsep.join(str(p) for p in merged.files)
    if not name:
        raise ConfigError(f"{files}: no current-context and no context given")
    ctx = merged.contexts.get(name)
    if ctx is None:
        raise ConfigError(f"{files}: context {name!r} not found")
    cluster_name = str(ctx.body.get("cluster") or "")
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise ConfigError(f"{ctx.origin}: context {name!r}: cluster {cluster_name!r} not found")
    user_name = str(ctx.body.get("user") or "")
    user = merged.users.get(user_name) if user_name else None
    if user_name and user is None:
        raise ConfigError(f"{ctx.origin}: context {name!r}: user {user_name!r} not found")
    server = str(cluster.body.get("server") or "")
    if not server:
        raise ConfigError(f"{cluster.origin}: clusters[{cluster_name}].cluster.server is required")
    return Context(name, files, ctx, cluster_name, cluster, user_name, user, server)


def plugin_credentials(
    found: Context, user: Entry
) -> tuple[Callable[[], str] | None, bytes | None, bytes | None]:
    """Credentials from ``user``'s exec plugin or auth provider, through ``kubernetes.config`` (which knows
    how to run and refresh them): what fetches the bearer token (None for none), client certificate, key."""
    context_name, ctx, cluster = found.name, found.context, found.cluster
    cluster_name, user_name = found.cluster_name, found.user_name
    try:
        from kubernetes.client import Configuration
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.kube_config import KubeConfigLoader
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise ConfigError(
            f"users[{user_name}]: exec/auth-provider credentials need `kubernetes`: {e}"
        ) from None
    config = {
        "clusters": [{"name": cluster_name, "cluster": dict(cluster.body)}],
        "users": [{"name": user_name, "user": dict(user.body)}],
        "contexts": [{"name": context_name, "context": dict(ctx.body)}],
        "current-context": context_name,
    }
    configuration = Configuration()
    try:
        KubeConfigLoader(config_dict=config, config_base_path=str(user.base)).load_and_set(configuration)
    except (ConfigException, OSError, ValueError) as e:
        raise ConfigError(f"{user.origin}: users[{user_name}]: {e}") from None

    def fetch() -> str:
        value = configuration.get_api_key_with_prefix("BearerToken") or ""  # runs the refresh hook
        return value.removeprefix("Bearer ").strip()

    token = fetch if configuration.api_key.get("BearerToken") else None
    cert = key = None
    if configuration.cert_file and configuration.key_file:
        cert = Path(configuration.cert_file).read_bytes()
        key = Path(configuration.key_file).read_bytes()
    return token, cert, key
