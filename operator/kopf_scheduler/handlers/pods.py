"""Pods: every event goes to the scheduler (assigned pods to the cache, pending ones to the queue)."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.event("", "v1", "pods")
async def pod_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    memo["service"].pod_event(event["type"], event["object"])
