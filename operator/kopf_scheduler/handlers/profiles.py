"""SchedulingProfiles: create, update, delete and resume (the initial list) rebuild the profile's
framework between cycles; status conditions are written by the profile manager."""

from __future__ import annotations

from typing import Any

import kopf

from kopf_scheduler.api.schema import GROUP, PLURAL, VERSION


@kopf.on.event(GROUP, VERSION, PLURAL)
async def profile_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    await memo["service"].profile_event(event["type"], event["object"])
