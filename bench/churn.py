"""Objects created (and deleted) beside the measured pods while they are scheduled: upstream
scheduler_perf's ``churn`` operation (``test/integration/scheduler_perf``, ``churnOp``).

Every ``interval`` seconds the companion does one step for each template:

- ``create``: makes one more object (Unschedulable: a pod no node can hold, five a second, which every
  scheduler keeps trying and, having priority, tries to preempt for);
- ``recreate``: makes one object, and on the next step deletes it (SchedulingWithMixedChurn: a node, an
  unschedulable pod and a Service come and go every second, each an event the scheduler must handle).

It runs in its own thread with its own event loop, so the harness's pod creations do not delay it; its
API requests are counted as the harness's. Pods carry the scheduler's ``schedulerName`` and live in the
``churn`` namespace, so the measured pods' watch does not count them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.apimetrics import Key
from bench.objects import RETRIABLE, Companion, Extras, Setup
from kopf_scheduler.devcluster import ApiClient

NAMESPACE = "churn"

#: (object name, namespace, schedulerName) -> the object
Builder = Callable[[str, str, str], dict[str, Any]]


@dataclass(frozen=True)
class Template:
    #: the API collection: ``/api/v1/nodes``, ``/api/v1/namespaces/{namespace}/pods``, ...
    collection: str
    #: the resource as ``apiserver_request_total`` names it (for the request count)
    resource: str
    prefix: str
    build: Builder


def churn_node(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/churn/node-default.yaml``: a Ready node with room for no pod."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "capacity": {"pods": "0"},
            "allocatable": {"pods": "0"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def churn_service(name: str, namespace: str, scheduler: str) -> dict[str, Any]:
    """``templates/churn/service-default.yaml``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"app": "foo"},
            "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}],
        },
    }


NODES = Template("/api/v1/nodes", "nodes", "node-churn-", churn_node)
SERVICES = Template(f"/api/v1/namespaces/{NAMESPACE}/services", "services", "service-churn-", churn_service)


def pods(build: Builder) -> Template:
    return Template(f"/api/v1/namespaces/{NAMESPACE}/pods", "pods", "pod-h-", build)


class Churner(Companion):
    def __init__(
        self, api: ApiClient, scheduler: str, templates: tuple[Template, ...], mode: str, interval: float
    ) -> None:
        self.api = api
        self.scheduler = scheduler
        self.templates = templates
        self.mode = mode
        self.interval = interval
        self.created = 0
        self.deleted = 0
        self.errors: list[str] = []
        self._requests: Counter[Key] = Counter()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._main, name="churn", daemon=True)

    @property
    def requests(self) -> Counter[Key]:
        return self._requests

    def summary(self) -> dict[str, Any]:
        return {"churn_created": self.created, "churn_deleted": self.deleted, "churn_errors": self.errors[:5]}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(limit=8, ssl=self.api.ssl_context())
        async with aiohttp.ClientSession(
            base_url=self.api.server, connector=connector, headers=self.api.headers()
        ) as session:
            live: dict[Template, str] = {}
            started = time.monotonic()
            step = 0
            while not self._stopping.is_set():
                for template in self.templates:
                    name = live.pop(template, None)
                    if name is not None:
                        await self._delete(session, template, name)
                    else:
                        name = f"{template.prefix}{step}"
                        if await self._create(session, template, name) and self.mode == "recreate":
                            live[template] = name
                step += 1
                await asyncio.sleep(max(0.0, started + step * self.interval - time.monotonic()))

    async def _send(self, session: aiohttp.ClientSession, method: str, path: str, body: bytes) -> int:
        status, text = 0, ""
        for attempt in range(4):
            try:
                async with session.request(method, path, data=body) as resp:
                    status, text = resp.status, (await resp.read()).decode(errors="replace")
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                status, text = 0, f"{type(e).__name__}: {e}"
            if status not in RETRIABLE:
                break
            await asyncio.sleep(0.1 * 2**attempt)
        if status >= 300 or status == 0:
            self.errors.append(f"{method} {path}: HTTP {status}: {text[:200]}")
        return status

    async def _create(self, session: aiohttp.ClientSession, template: Template, name: str) -> bool:
        body = json.dumps(template.build(name, NAMESPACE, self.scheduler)).encode()
        status = await self._send(session, "POST", template.collection, body)
        self._requests[("POST", "", template.resource, "")] += status != 0
        self.created += status == 201
        return status == 201

    async def _delete(self, session: aiohttp.ClientSession, template: Template, name: str) -> None:
        body = json.dumps({"gracePeriodSeconds": 0}).encode()
        status = await self._send(session, "DELETE", f"{template.collection}/{name}", body)
        self._requests[("DELETE", "", template.resource, "")] += status != 0
        self.deleted += status == 200


class Churn(Extras):
    """A workload's churn: the ``churn`` namespace, and the companion that makes (and unmakes) the objects
    of ``templates`` every ``interval`` seconds during the measured phase."""

    def __init__(self, templates: tuple[Template, ...], *, mode: str, interval: float) -> None:
        assert mode in ("create", "recreate"), mode
        self.templates = templates
        self.mode = mode
        self.interval = interval
        self._churner: Churner | None = None

    async def before_pods(self, setup: Setup) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await setup.loader.create("/api/v1/namespaces", body)

    def companion(self, api: ApiClient, setup: Setup) -> Companion | None:
        self._churner = Churner(api, setup.scheduler_name, self.templates, self.mode, self.interval)
        return self._churner

    async def check(self, setup: Setup) -> list[str]:
        """A churn that made nothing, or failed, did not load the scheduler as the workload says."""
        churner = self._churner
        if churner is None:
            return []
        problems = [f"churn: {e}" for e in churner.errors[:3]]
        if churner.created == 0:
            problems.append("churn: no object was created during the measured phase")
        return problems
