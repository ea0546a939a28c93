"""A stand-in for a CSI external-provisioner, for the WaitForFirstConsumer workload: it makes the volume
of every claim the scheduler picked a node for, the way external-provisioner does with delayed binding.
Adapted from the e2e tier's ``tests/e2e/volume_provisioner.py`` (same volume shape), but event-driven:
one watch on the claims of a namespace instead of a list every 200 ms.

It lists the nodes once (their zones) and the claims, then watches the claims. A claim that
kube-controller-manager's PV controller has handed to this provisioner (annotation
``volume.kubernetes.io/storage-provisioner`` = its driver name, set once the claim has
``volume.kubernetes.io/selected-node``) and that has no volume yet gets a PersistentVolume
``pvc-<claim uid>``: the claim's size, access modes, mode and class, a ``claimRef`` to the claim (with its
uid) and node affinity to the selected node's zone. The PV controller then binds the two.

It runs in its own thread with its own event loop, so the harness's pod creations do not delay it; its
API requests are counted (keyed as ``apiserver_request_total`` counts them) so that they are the
harness's, not the scheduler's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from typing import Any
from urllib.parse import quote

import aiohttp

from bench.apimetrics import Key
from bench.objects import Companion
from kopf_scheduler.devcluster import ApiClient

ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"


class Provisioner(Companion):
    def __init__(self, api: ApiClient, namespace: str, driver: str, concurrency: int = 16) -> None:
        self.api = api
        self.namespace = namespace
        self.driver = driver
        self.concurrency = concurrency
        self.made = 0
        self.errors: list[str] = []
        self._requests: Counter[Key] = Counter()
        self._handled: set[str] = set()
        self._zones: dict[str, str] = {}
        self._ready = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name="provisioner", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._work: set[asyncio.Task[None]] = set()
        self._gate: asyncio.Semaphore | None = None

    @property
    def requests(self) -> Counter[Key]:
        return self._requests

    def summary(self) -> dict[str, Any]:
        return {"provisioned_volumes": self.made, "provisioner_errors": self.errors[:5]}

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(60):
            self.stop()
            raise RuntimeError(f"the provisioner did not start: {self.errors}")

    def stop(self) -> None:
        self._stopping = True
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(task.cancel)
        self._thread.join(timeout=15)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._task = loop.create_task(self._run())
            if self._stopping:
                self._task.cancel()
            loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except Exception as e:
            self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            loop.close()

    async def _run(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency + 2, ssl=self.api.ssl_context())
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
        self._gate = asyncio.Semaphore(self.concurrency)
        async with aiohttp.ClientSession(
            base_url=self.api.server, connector=connector, headers=self.api.headers(), timeout=timeout
        ) as session:
            try:
                async with session.get("/api/v1/nodes") as resp:
                    resp.raise_for_status()
                    nodes = (await resp.json())["items"]
                self._requests[("LIST", "", "nodes", "")] += 1
                self._zones = {n["metadata"]["name"]: n["metadata"]["labels"].get(ZONE, "") for n in nodes}
                await self._watch(session)
            finally:
                if self._work:
                    await asyncio.gather(*self._work, return_exceptions=True)

    async def _watch(self, session: aiohttp.ClientSession) -> None:
        claims = f"/api/v1/namespaces/{self.namespace}/persistentvolumeclaims"
        while True:
            async with session.get(claims) as resp:
                resp.raise_for_status()
                listed = await resp.json()
            self._requests[("LIST", "", "persistentvolumeclaims", "")] += 1
            for claim in listed["items"]:
                self._offer(session, claim)
            version = listed["metadata"]["resourceVersion"]
            self._ready.set()
            while True:  # re-watch from the last version until it is too old (410), then re-list
                url = f"{claims}?watch=1&allowWatchBookmarks=true&resourceVersion={quote(version)}"
                gone = False
                async with session.get(url) as resp:
                    self._requests[("WATCH", "", "persistentvolumeclaims", "")] += 1
                    if resp.status == 410:
                        break
                    resp.raise_for_status()
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            gone = obj.get("code") == 410
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._offer(session, obj)
                if gone:
                    break

    def _offer(self, session: aiohttp.ClientSession, claim: dict[str, Any]) -> None:
        meta = claim.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        uid = meta.get("uid", "")
        node = annotations.get(SELECTED_NODE)
        if (
            annotations.get(STORAGE_PROVISIONER) != self.driver
            or not node
            or (claim.get("spec") or {}).get("volumeName")
            or uid in self._handled
        ):
            return
        self._handled.add(uid)
        task = asyncio.create_task(self._provision(session, claim, node))
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def _provision(self, session: aiohttp.ClientSession, claim: dict[str, Any], node: str) -> None:
        assert self._gate is not None
        body = json.dumps(self.volume(claim, self._zones.get(node, ""))).encode()
        async with self._gate:
            for attempt in range(5):
                try:
                    async with session.post("/api/v1/persistentvolumes", data=body) as resp:
                        status, text = resp.status, await resp.text()
                except (aiohttp.ClientError, OSError) as e:
                    status, text = 0, f"{type(e).__name__}: {e}"
                self._requests[("POST", "", "persistentvolumes", "")] += status != 0
                if status in (201, 409):
                    self.made += status == 201
                    return
                if status not in (0, 429, 500, 503):
                    break
                await asyncio.sleep(0.1 * 2**attempt)
        self.errors.append(f"volume for {claim['metadata']['name']}: HTTP {status}: {text[:200]}")

    def volume(self, claim: dict[str, Any], zone: str) -> dict[str, Any]:
        meta, spec = claim["metadata"], claim["spec"]
        name = f"pvc-{meta['uid']}"
        volume: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": self.driver}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "storageClassName": spec.get("storageClassName") or "",
                "persistentVolumeReclaimPolicy": "Delete",
                "csi": {"driver": self.driver, "volumeHandle": name},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": meta["namespace"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        if zone:
            term = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
            volume["spec"]["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
        return volume
