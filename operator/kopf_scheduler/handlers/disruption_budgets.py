"""PodDisruptionBudgets: preemption prefers victims whose budget allows the disruption."""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.event("policy", "v1", "poddisruptionbudgets")
async def pdb_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    memo["service"].pdb_event(event["type"], event["object"])
