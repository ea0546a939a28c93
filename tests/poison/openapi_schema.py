"""The API server's OpenAPI v3 schemas, trimmed to what the poison tier draws from: the definitions
reachable from the kinds the scheduler reads (``KINDS``), without descriptions. ``trim`` is shared by
``openapi/fetch.py`` (which writes ``openapi/kube-apiserver.json``) and the e2e test that checks the
committed file still equals what the running API server serves."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: the committed schemas (written by ``openapi/fetch.py``)
SCHEMA_FILE = Path(__file__).resolve().parent / "openapi" / "kube-apiserver.json"

#: group-version document -> kind -> definition name
KINDS: dict[str, dict[str, str]] = {
    "api/v1": {
        "Pod": "io.k8s.api.core.v1.Pod",
        "Node": "io.k8s.api.core.v1.Node",
        "PersistentVolume": "io.k8s.api.core.v1.PersistentVolume",
        "PersistentVolumeClaim": "io.k8s.api.core.v1.PersistentVolumeClaim",
        "Service": "io.k8s.api.core.v1.Service",
        "Namespace": "io.k8s.api.core.v1.Namespace",
    },
    "apis/storage.k8s.io/v1": {
        "StorageClass": "io.k8s.api.storage.v1.StorageClass",
        "CSINode": "io.k8s.api.storage.v1.CSINode",
        "CSIDriver": "io.k8s.api.storage.v1.CSIDriver",
    },
    "apis/resource.k8s.io/v1": {
        "ResourceClaim": "io.k8s.api.resource.v1.ResourceClaim",
        "ResourceSlice": "io.k8s.api.resource.v1.ResourceSlice",
        "DeviceClass": "io.k8s.api.resource.v1.DeviceClass",
    },
    "apis/policy/v1": {"PodDisruptionBudget": "io.k8s.api.policy.v1.PodDisruptionBudget"},
    "apis/apps/v1": {"ReplicaSet": "io.k8s.api.apps.v1.ReplicaSet"},
    # the CRD of deploy/crds (the dev cluster applies it), as the API server publishes it
    "apis/kopf-scheduler.io/v1alpha1": {"SchedulingProfile": "io.kopf-scheduler.v1alpha1.SchedulingProfile"},
}
REF_PREFIX = "#/components/schemas/"
#: keys left out of the committed file: prose only, no shape
DROPPED = {"description"}


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in sorted(node.items()) if k not in DROPPED}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            found.append(ref[len(REF_PREFIX) :])
        for value in node.values():
            found.extend(_refs(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_refs(value))
    return found


def trim(documents: dict[str, Any], version: str) -> dict[str, Any]:
    """One file from the served documents (group-version path -> OpenAPI v3 document): the kinds, and each
    definition reachable from them, descriptions left out."""
    definitions: dict[str, Any] = {}
    kinds: dict[str, str] = {}
    for path, names in KINDS.items():
        schemas = documents[path]["components"]["schemas"]
        todo = list(names.values())
        kinds.update(names)
        while todo:
            name = todo.pop()
            if name in definitions:
                continue
            definitions[name] = _strip(schemas[name])
            todo.extend(_refs(definitions[name]))
    return {
        "kubernetesVersion": version,
        "source": {path: f"/openapi/v3/{path}" for path in KINDS},
        "kinds": dict(sorted(kinds.items())),
        "definitions": dict(sorted(definitions.items())),
    }


def served(get: Callable[[str], Any], timeout: float = 30.0) -> dict[str, Any]:
    """The documents of ``KINDS`` as the API server serves them (``get`` a path, JSON back), waiting for a
    CRD's document to be published (the API server publishes it a moment after the CRD is established)."""
    deadline = time.monotonic() + timeout
    while not set(KINDS) <= set(get("/openapi/v3")["paths"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    return {path: get(f"/openapi/v3/{path}") for path in KINDS}


def dumps(trimmed: dict[str, Any]) -> str:
    return json.dumps(trimmed, indent=1, sort_keys=True) + "\n"


def load() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return loaded
