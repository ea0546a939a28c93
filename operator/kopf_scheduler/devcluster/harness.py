"""Blocking helpers around a running `DevCluster` for tests and scripts: JSON requests that fail loudly
on an unexpected status, fresh namespaces, minimal pod manifests."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kopf_scheduler.devcluster.apiclient import ApiClient
from kopf_scheduler.devcluster.cluster import DevCluster

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


class ApiError(AssertionError):
    """An unexpected HTTP status from the API server (an AssertionError so tests report it as a failure)."""


@dataclass
class ClusterHarness:
    cluster: DevCluster
    api: ApiClient

    @classmethod
    def of(cls, cluster: DevCluster) -> ClusterHarness:
        return cls(cluster=cluster, api=cluster.client())

    @property
    def kubeconfig(self) -> Path:
        return self.cluster.kubeconfig

    @property
    def server(self) -> str:
        return self.cluster.server

    @property
    def token(self) -> str:
        return self.cluster.token

    @property
    def ca_file(self) -> Path:
        return self.cluster.ca_file

    def request(
        self, method: str, path: str, body: Any = None, *, expect: tuple[int, ...] = (200, 201)
    ) -> Any:
        resp = self.api.request(method, path, body)
        if resp.status not in expect:
            raise ApiError(f"{method} {path}: HTTP {resp.status}: {resp.text()[:500]}")
        return resp.json() if resp.body else None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Any:
        """Delete immediately (grace period 0: no kubelet would ever confirm a graceful deletion)."""
        return self.request("DELETE", path, {"gracePeriodSeconds": 0}, expect=(200, 202, 404))

    def create_namespace(self, prefix: str = "e2e") -> str:
        """A fresh namespace. Deleted namespaces stay Terminating (no namespace controller), so tests use
        a new one each instead of cleaning up."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name


def pod_manifest(
    name: str, namespace: str, *, requests: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A one-container pause pod; ``requests`` sets its resource requests, other keywords go to spec."""
    container: dict[str, Any] = {"name": "pause", "image": PAUSE_IMAGE}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [container], **spec},
    }


def dumps(obj: Any, limit: int = 2000) -> str:
    """Compact-but-readable JSON for assertion messages."""
    return json.dumps(obj, indent=1, sort_keys=True)[:limit]
