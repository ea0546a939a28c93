"""Binding pods: POST the ``binding`` subresource, as upstream's DefaultBinder does.

The request is built as bytes and the 201 answer is not decoded (the answer is a ``Status``, not the
``Binding`` the OpenAPI spec promises, which is why generated clients fail on it). At most ``concurrency``
bindings are in flight; the rest wait on a semaphore, not on the connection pool, so events and status
patches always find a free connection.

One ``bind`` is one binding cycle's worth of attempts, within ``deadline`` seconds in all from the moment
its turn comes (the wait for one of the ``concurrency`` places is not counted):

- 429, and a 5xx that carries ``Retry-After``, are sent again after the seconds the server asked for, as
  client-go does for every request (capped at ``MAX_RETRY_AFTER``);
- no answer (a timeout, a dropped connection) and other 5xx are ambiguous: the binding may have been
  stored. The pod is read before anything is decided: bound to this node is success, bound elsewhere
  or gone ends the attempt quietly, still unbound is sent again after an exponential backoff;
- a 409 is read the same way: only "bound elsewhere" and "the pod is gone or re-created" are quiet; a
  409 on a pod that is still unbound (an admission webhook refusing the binding) is a failure the
  scheduler reports and retries with its own backoff, not a reason to forget the pod;
- anything else (400, 403, 422, ...) fails at once, with the API server's message.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.rest import Response, RestClient, resource_path

DEFAULT_CONCURRENCY = 64
#: seconds all attempts of one binding may take together
DEFAULT_DEADLINE = 30.0
#: the longest ``Retry-After`` honoured; a longer one is waited for this long
MAX_RETRY_AFTER = 10.0
#: the first backoff after an ambiguous outcome, doubled on each further one, at most ``MAX_BACKOFF``
FIRST_BACKOFF = 0.2
MAX_BACKOFF = 5.0
#: answers worth sending the same binding again for (0: no answer at all)
_TRANSIENT = frozenset({0, 429, 500, 502, 503, 504})
#: answers after which the binding may or may not have been stored
_AMBIGUOUS = _TRANSIENT - {429}


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
    def __init__(
        self, rest: RestClient, *, concurrency: int = DEFAULT_CONCURRENCY, deadline: float = DEFAULT_DEADLINE
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, not {concurrency}")
        self.rest = rest
        self.concurrency = concurrency
        self.deadline = deadline
        self._semaphore: asyncio.Semaphore | None = None

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        """Returns once the pod is bound to ``node_name``; else raises ``APIError``: settled
        (``is_gone_or_conflict``) when the pod is bound elsewhere, deleted or re-created, otherwise a
        failure to report (the status of the last answer, 0 for none). See the module docstring."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.concurrency)
        path = resource_path("v1", "pods", pod.name, namespace=pod.namespace, subresource="binding")
        body = binding_body(pod, node_name)
        binds = self.rest.stats.binds
        backoff = FIRST_BACKOFF
        async with self._semaphore:
            # the deadline counts from the first send: a binding waiting its turn behind slow ones has
            # not failed (kube-scheduler's bindings wait in its client without a deadline at all)
            give_up = time.monotonic() + self.deadline
            while True:
                response = await self._post(path, body, give_up)
                if response.ok:
                    binds["ok"] += 1
                    return
                failure = APIError(response.status, f"binding {pod.key} to {node_name}: {response.message()}")
                if response.status == 404:
                    binds["gone"] += 1
                    raise APIError(404, failure.message, settled=True)
                if response.status == 409 or response.status in _AMBIGUOUS:
                    settled = await self._settle(pod, node_name, failure)
                    if settled is None:  # it went through after all
                        binds["ok"] += 1
                        return
                    if settled.is_gone_or_conflict:
                        binds[_KIND[settled.status]] += 1
                        raise settled
                    if response.status == 409:  # refused while the pod is unbound: not ours to retry here
                        binds["error"] += 1
                        raise settled
                wait = _retry_in(response, backoff)
                if wait is None or time.monotonic() + wait >= give_up:
                    binds["error"] += 1
                    raise failure
                binds["retried"] += 1
                await asyncio.sleep(wait)
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def _post(self, path: str, body: bytes, give_up: float) -> Response:
        started = time.perf_counter()
        left = max(0.001, give_up - time.monotonic())
        response = await self.rest.request("POST", path, body, timeout=min(self.rest.timeout, left))
        self.rest.stats.bind_latency.observe(time.perf_counter() - started)
        return response

    async def _settle(self, pod: PodInfo, node_name: str, failure: APIError) -> APIError | None:
        """What the pod's own record says after ``failure``: None when it is bound to ``node_name`` (the
        binding went through), a settled error when it is bound elsewhere, deleted or re-created, else
        ``failure`` itself (not settled: still unbound, or it could not be read)."""
        response = await self.rest.request(
            "GET", resource_path("v1", "pods", pod.name, namespace=pod.namespace)
        )
        if response.status == 404:
            return APIError(404, f"{failure.message} (pod {pod.key} is gone)", settled=True)
        current: Any = response.json() if response.ok else None
        if not isinstance(current, dict):
            return APIError(failure.status, failure.message, settled=False)
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        uid = (pod.raw.get("metadata") or {}).get("uid")
        if uid and meta.get("uid") != uid:
            return APIError(409, f"{failure.message} (pod {pod.key} was re-created)", settled=True)
        bound_to = spec.get("nodeName")
        if bound_to == node_name:
            return None
        if bound_to:
            return APIError(409, f"{failure.message} (bound to {bound_to})", settled=True)
        return APIError(failure.status, failure.message, settled=False)


_KIND = {409: "conflict", 404: "gone"}


def _retry_in(response: Response, backoff: float) -> float | None:
    """Seconds to wait before sending the binding again, or None when it is not worth sending again."""
    if response.status not in _TRANSIENT:
        return None
    if response.retry_after is not None and response.status >= 429:
        return min(response.retry_after, MAX_RETRY_AFTER)
    return backoff
