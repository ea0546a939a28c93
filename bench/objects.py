"""What a workload adds to the cluster beside nodes and pods (volumes, classes, ResourceSlices, claims),
and the bulk requests that create it during setup.

A workload with ``Workload.extras`` gets three calls: ``before_pods`` once the namespaces and nodes
exist (objects the pods refer to: claims, volumes, classes, slices, CSINodes), ``after_init_pods`` once
the initial pods exist (what needs their uids, e.g. a claim reserved for its pod), ``companion``: a
helper that runs beside the scheduler during the measured phase in the harness's own process (a volume
provisioner), whose API requests are the harness's, not the scheduler's, and ``check`` once the
measured phase is over: a scheduler that bound every pod but left a claim unallocated or a volume in
the wrong zone has not completed the run. Setup happens before the scheduler starts and the check
after the API server's counters are read, so neither counts as the scheduler's.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from bench.apimetrics import Key
from kopf_scheduler.devcluster import ApiClient

RETRIABLE = (0, 429, 500, 502, 503, 504)
MERGE_PATCH = "application/merge-patch+json"
T = TypeVar("T")


class Loader:
    """Setup requests, ``concurrency`` in flight over one session, retried on 429/5xx and network errors;
    any other failure raises. Use as ``async with Loader(api) as loader``."""

    def __init__(self, api: ApiClient, concurrency: int = 64) -> None:
        self.api = api
        self.concurrency = concurrency
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Loader:
        connector = aiohttp.TCPConnector(limit=self.concurrency, ssl=self.api.ssl_context())
        self._session = aiohttp.ClientSession(
            base_url=self.api.server,
            connector=connector,
            headers=self.api.headers(),
            timeout=aiohttp.ClientTimeout(total=120),
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def request(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json"
    ) -> Any:
        assert self._session is not None, "use the loader as an async context manager"
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        status, text = 0, ""
        for attempt in range(6):
            try:
                async with self._session.request(
                    method, path, data=data, headers={"Content-Type": content_type}
                ) as resp:
                    status, text = resp.status, await resp.text()
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                status, text = 0, f"{type(e).__name__}: {e}"
            if 200 <= status < 300:
                return json.loads(text) if text else None
            if status not in RETRIABLE:
                break
            await asyncio.sleep(0.1 * 2**attempt)
        raise RuntimeError(f"{method} {path}: HTTP {status}: {text[:300]}")

    async def create(self, path: str, body: dict[str, Any]) -> Any:
        return await self.request("POST", path, body)

    async def patch_status(self, path: str, status: dict[str, Any]) -> Any:
        """A merge patch of ``<path>/status`` (creating an object resets its status, as upstream's
        scheduler_perf notes, so a status is written in a second request)."""
        return await self.request("PATCH", f"{path}/status", {"status": status}, content_type=MERGE_PATCH)

    async def each(self, items: Iterable[T], work: Callable[[T], Awaitable[object]]) -> None:
        """``work(item)`` for every item, ``concurrency`` at a time; the first failure raises."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(item: T) -> None:
            async with gate:
                await work(item)

        await asyncio.gather(*(one(item) for item in items))


@dataclass(frozen=True)
class Setup:
    """What ``Extras`` hooks get: the loader (open during setup only), the workload's nodes, its
    namespaces, the names of its initial and measured pods and their ``schedulerName``."""

    loader: Loader
    nodes: list[str]
    init_namespace: str
    measured_namespace: str
    init_pods: list[str]
    measured_pods: list[str]
    #: the pods' ``schedulerName``
    scheduler_name: str = ""

    @property
    def api(self) -> ApiClient:
        return self.loader.api


class Companion:
    """A helper running beside the scheduler during the measured phase (in the harness process)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    @property
    def requests(self) -> Counter[Key]:
        """The API requests it sent, keyed as ``apiserver_request_total`` counts them."""
        raise NotImplementedError

    def summary(self) -> dict[str, Any]:
        """What it did, for the run's record."""
        return {}


class Extras:
    """The objects (and helper) a workload adds; see the module docstring. The default adds nothing."""

    async def before_pods(self, setup: Setup) -> None:
        return None

    async def after_init_pods(self, setup: Setup) -> None:
        return None

    def companion(self, api: ApiClient, setup: Setup) -> Companion | None:
        return None

    async def check(self, setup: Setup) -> list[str]:
        """After the measured phase (and after the API counters are read): what is wrong with the
        state the scheduler left, beyond every pod being bound (e.g. a claim not allocated on its pod's
        node). A run with problems is not complete."""
        return []
