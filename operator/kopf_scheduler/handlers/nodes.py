"""Nodes: every event goes to the scheduler's cache."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.event("", "v1", "nodes")
async def node_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    memo["service"].node_event(event["type"], event["object"])
