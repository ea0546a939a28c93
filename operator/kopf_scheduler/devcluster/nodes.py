"""Fake nodes: Node objects without a kubelet, shaped like upstream scheduler_perf's default template.

Node status may be set on create, so one POST makes a Ready node with capacity and allocatable. Nothing
heartbeats them and no node-lifecycle controller runs, so they stay Ready. Creation is concurrent (a
bounded number of requests in flight over one aiohttp session): thousands of nodes take seconds.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.devcluster.apiclient import ApiClient

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
OS_LABEL = "kubernetes.io/os"
DEFAULT_RESOURCES = {"cpu": "4", "memory": "32Gi", "pods": "110"}


def default_template() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"labels": {OS_LABEL: "linux"}},
        "spec": {},
        "status": {
            "capacity": dict(DEFAULT_RESOURCES),
            "allocatable": dict(DEFAULT_RESOURCES),
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node"}
            ],
            "phase": "Running",
        },
    }


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` into a copy of ``base``: mappings merge, everything else replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_template(path: Path) -> dict[str, Any]:
    """Read a Node manifest to use as template; it overrides the defaults field by field."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"{path}: cannot read node template: {e}") from None
    if not isinstance(data, dict) or data.get("kind", "Node") != "Node":
        raise UsageError(f"{path}: a node template must be one Node object")
    return data


def node_name(prefix: str, index: int) -> str:
    return f"{prefix}{index}"


def node_body(
    index: int, *, prefix: str = "node-", zones: int = 3, template: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Node to create as number ``index``: defaults < template < name, hostname and (default) zone."""
    if zones < 1:
        raise UsageError(f"--zones must be at least 1, got {zones}")
    body = merge(default_template(), template or {})
    name = node_name(prefix, index)
    meta = body.setdefault("metadata", {})
    for key in ("generateName", "resourceVersion", "uid", "creationTimestamp", "managedFields"):
        meta.pop(key, None)
    meta["name"] = name
    labels = meta.setdefault("labels", {})
    labels[HOSTNAME_LABEL] = name
    labels.setdefault(ZONE_LABEL, f"zone-{index % zones}")
    return body


@dataclass(frozen=True)
class NodesResult:
    names: list[str]
    seconds: float


class NodeCreationError(Exception):
    """Some nodes could not be created; names the first failures."""


async def create_nodes(
    cluster: ApiClient | Any,
    count: int,
    *,
    prefix: str = "node-",
    zones: int = 3,
    template: dict[str, Any] | None = None,
    start: int = 0,
    concurrency: int = 32,
) -> NodesResult:
    """Create ``count`` fake Ready nodes named ``<prefix><start>..``; ``cluster`` is an `ApiClient` or
    anything with a ``client()`` method returning one (e.g. a `DevCluster`)."""
    if count < 0:
        raise UsageError(f"--count must not be negative, got {count}")
    client: ApiClient = cluster if isinstance(cluster, ApiClient) else cluster.client()
    bodies = [
        json.dumps(node_body(i, prefix=prefix, zones=zones, template=template)).encode()
        for i in range(start, start + count)
    ]
    names = [node_name(prefix, i) for i in range(start, start + count)]
    errors: list[str] = []
    started = time.monotonic()
    async with client.session(concurrency) as session:
        pending = iter(zip(names, bodies, strict=True))

        async def worker() -> None:
            for name, body in pending:
                async with session.post("/api/v1/nodes", data=body) as resp:
                    if resp.status != 201:
                        errors.append(f"{name}: HTTP {resp.status}: {_reason(await resp.text())}")

        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, count)))))
    elapsed = time.monotonic() - started
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise NodeCreationError(f"{len(errors)} of {count} nodes failed: {'; '.join(errors[:3])}{more}")
    return NodesResult(names=names, seconds=elapsed)


def _reason(text: str) -> str:
    try:
        return str(json.loads(text).get("message", text))
    except (ValueError, AttributeError):
        return text[:200]
