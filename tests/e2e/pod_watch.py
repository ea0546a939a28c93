"""A watch on the pods of one namespace, for the e2e tier: every state the API server recorded, in order,
including the short-lived ones a poll would miss (``status.nominatedNodeName`` while a binding cycle
waits, cleared when the pod is bound).

``PodWatch(cp, namespace)`` lists the namespace, then watches from the list's resourceVersion in a
thread, re-watching from the last version it saw each time the server ends a watch (``timeoutSeconds``).
``states(name)`` is the pod's sequence of distinct ``(nodeName, nominatedNodeName)`` pairs, the first
being its state when created.
"""

from __future__ import annotations

import json
import ssl
import threading
import urllib.parse
import urllib.request
from typing import Any

from kopf_scheduler.devcluster.harness import ClusterHarness

State = tuple[str, str]


def state_of(pod: dict[str, Any]) -> State:
    """``(spec.nodeName, status.nominatedNodeName)``, "" for either when unset."""
    return str(pod["spec"].get("nodeName") or ""), str(
        (pod.get("status") or {}).get("nominatedNodeName") or ""
    )


class PodWatch:
    def __init__(self, cp: ClusterHarness, namespace: str) -> None:
        self.cp = cp
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.errors: list[str] = []
        self._states: dict[str, list[State]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch-{namespace}", daemon=True)
        self._version = ""

    def __enter__(self) -> PodWatch:
        listed = self.cp.get(self.path)
        for pod in listed["items"]:
            self._record(pod)
        self._version = listed["metadata"]["resourceVersion"]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def states(self, name: str) -> list[State]:
        with self._lock:
            return list(self._states.get(name, ()))

    def _record(self, pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        state = state_of(pod)
        with self._lock:
            seen = self._states.setdefault(name, [])
            if not seen or seen[-1] != state:
                seen.append(state)

    def _run(self) -> None:
        context = ssl.create_default_context(cafile=str(self.cp.ca_file))
        while not self._stop.is_set():
            query = urllib.parse.urlencode(
                {"watch": "1", "resourceVersion": self._version, "timeoutSeconds": "2"}
            )
            request = urllib.request.Request(
                f"{self.cp.server}{self.path}?{query}", headers={"Authorization": f"Bearer {self.cp.token}"}
            )
            try:
                with urllib.request.urlopen(request, context=context, timeout=10) as response:
                    for line in response:
                        event = json.loads(line)
                        if event["type"] == "ERROR":
                            raise RuntimeError(f"watch error: {event['object']}")
                        obj = event["object"]
                        self._version = obj["metadata"]["resourceVersion"]
                        if event["type"] in ("ADDED", "MODIFIED"):
                            self._record(obj)
            except Exception as e:  # reported by the test; the watch goes on from the last version seen
                self.errors.append(f"{type(e).__name__}: {e}")
                self._stop.wait(0.2)
