"""The raw binder: binds every pending pod of one ``schedulerName`` to the nodes in turn, with no
scheduling at all. What it reaches is the ceiling this API server, on this machine, allows a scheduler:
the cost of a watch event in and a binding out, nothing else.

It lists the nodes once, lists the pending pods (field selector ``spec.schedulerName=<name>,
spec.nodeName=``) and watches from there; each pod seen unbound goes to a queue that ``--concurrency``
workers drain with ``POST pods/<name>/binding`` (round-robin over the nodes). A 409 (already bound) or
404 (gone) is dropped; other failures are retried a few times. Prints ``raw-binder ready`` once it
watches, and a count of bindings when it stops (SIGTERM).

    python -m bench.raw_binder --kubeconfig KUBECONFIG [--scheduler-name raw-binder] [--concurrency 128]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import sys
from collections import Counter
from typing import Any
from urllib.parse import quote

import aiohttp

from kopf_scheduler.k8s import load_connection

RETRIES = 5


class RawBinder:
    def __init__(self, kubeconfig: str, scheduler_name: str, concurrency: int) -> None:
        self.info = load_connection(kubeconfig)
        self.scheduler_name = scheduler_name
        self.concurrency = concurrency
        self.queue: asyncio.Queue[tuple[str, str, str]] = asyncio.Queue()
        self.seen: set[str] = set()
        self.results: Counter[str] = Counter()
        self.nodes: list[str] = []
        self._next = itertools.count()

    def session(self) -> aiohttp.ClientSession:
        headers = {"User-Agent": "raw-binder", "Accept": "application/json", **self.info.auth_headers()}
        connector = aiohttp.TCPConnector(limit=self.concurrency + 4, ssl=self.info.ssl_context() or False)
        return aiohttp.ClientSession(connector=connector, headers=headers)

    def selector(self) -> str:
        return quote(f"spec.schedulerName={self.scheduler_name},spec.nodeName=", safe="=,")

    def offer(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        if uid in self.seen or (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
            return
        self.seen.add(uid)
        self.queue.put_nowait((meta["namespace"], meta["name"], uid))

    async def run(self) -> None:
        async with self.session() as session:
            server = self.info.server
            async with session.get(f"{server}/api/v1/nodes") as resp:
                resp.raise_for_status()
                self.nodes = [n["metadata"]["name"] for n in (await resp.json())["items"]]
            if not self.nodes:
                raise SystemExit("raw-binder: no nodes")
            workers = [asyncio.create_task(self.worker(session)) for _ in range(self.concurrency)]
            try:
                await self.watch(session)
            finally:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)

    async def watch(self, session: aiohttp.ClientSession) -> None:
        server, selector = self.info.server, self.selector()
        announced = False
        while True:
            async with session.get(f"{server}/api/v1/pods?fieldSelector={selector}") as resp:
                resp.raise_for_status()
                listed = await resp.json()
            for pod in listed["items"]:
                self.offer(pod)
            version = listed["metadata"]["resourceVersion"]
            if not announced:
                print(
                    f"raw-binder ready: {len(self.nodes)} nodes, {len(listed['items'])} pending pods",
                    flush=True,
                )
                announced = True
            while True:  # re-watch from the last version until it is too old (410), then re-list
                url = (
                    f"{server}/api/v1/pods?watch=1&allowWatchBookmarks=true&fieldSelector={selector}"
                    f"&resourceVersion={version}&timeoutSeconds=3600"
                )
                gone = False
                timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
                async with session.get(url, timeout=timeout) as resp:
                    self.results["watches"] += 1
                    if resp.status == 410:
                        break
                    resp.raise_for_status()
                    async for line in resp.content:
                        event = json.loads(line)
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            gone = obj.get("code") == 410
                            break
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self.offer(obj)
                if gone:
                    break

    async def worker(self, session: aiohttp.ClientSession) -> None:
        server = self.info.server
        while True:
            namespace, name, uid = await self.queue.get()
            node = self.nodes[next(self._next) % len(self.nodes)]
            body = json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name, "namespace": namespace, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                },
                separators=(",", ":"),
            ).encode()
            url = f"{server}/api/v1/namespaces/{namespace}/pods/{name}/binding"
            for attempt in range(RETRIES):
                try:
                    async with session.post(
                        url, data=body, headers={"Content-Type": "application/json"}
                    ) as resp:
                        await resp.read()
                        status = resp.status
                except (aiohttp.ClientError, OSError, TimeoutError):
                    status = 0
                if status in (200, 201):
                    self.results["bound"] += 1
                    break
                if status in (404, 409):
                    self.results[str(status)] += 1
                    break
                await asyncio.sleep(0.05 * 2**attempt)
            else:
                self.results["failed"] += 1


async def amain(args: argparse.Namespace) -> int:
    binder = RawBinder(args.kubeconfig, args.scheduler_name, args.concurrency)
    task = asyncio.create_task(binder.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    print(f"raw-binder stopped: {dict(binder.results)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.raw_binder", description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", default="raw-binder")
    parser.add_argument("--concurrency", type=int, default=128)
    return asyncio.run(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
