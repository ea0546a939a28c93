"""Binding pods: POST the ``binding`` subresource, as upstream's DefaultBinder does.

The request is built as bytes and the 201 answer is not decoded (the answer is a ``Status``, not the
``Binding`` the OpenAPI spec promises, which is why generated clients fail on it). At most ``concurrency``
bindings are in flight; the rest wait on a semaphore, not on the connection pool, so events and status
patches always find a free connection.
"""

from __future__ import annotations

import asyncio
import json
import time

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.rest import RestClient, resource_path

DEFAULT_CONCURRENCY = 64


def binding_body(pod: PodInfo, node_name: str) -> bytes:
    """``v1.Binding`` with the pod's UID: a pod deleted and re-created under the same name is not bound
    by mistake (the API server answers 409 on a UID mismatch)."""
    metadata: dict[str, str] = {"name": pod.name, "namespace": pod.namespace}
    uid = (pod.raw.get("metadata") or {}).get("uid")
    if uid:
        metadata["uid"] = str(uid)
    body = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }
    return json.dumps(body, separators=(",", ":")).encode()


class Binder:
    def __init__(self, rest: RestClient, *, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, not {concurrency}")
        self.rest = rest
        self.concurrency = concurrency
        self._semaphore: asyncio.Semaphore | None = None

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        """201 or ``APIError``: 409 already bound (or UID mismatch), 404 pod gone, 0 no answer."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        path = resource_path("v1", "pods", pod.name, namespace=pod.namespace, subresource="binding")
        body = binding_body(pod, node_name)
        stats = self.rest.stats
        async with self._semaphore:
            started = time.perf_counter()
            response = await self.rest.request("POST", path, body)
            stats.bind_latency.observe(time.perf_counter() - started)
        if response.status in (200, 201):
            stats.binds["ok"] += 1
            return
        stats.binds[{409: "conflict", 404: "gone"}.get(response.status, "error")] += 1
        raise APIError(response.status, f"binding {pod.key} to {node_name}: {response.message()}")
