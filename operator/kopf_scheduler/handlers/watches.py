"""The watches of ``kopf run -m kopf_scheduler.handlers`` (one process): an ``on.event`` handler for each
resource of ``intake_link.WATCHES`` hands every event to the ``SchedulerService`` in ``memo``, as the
intake process of ``kopf-scheduler run`` hands it over its pipe. ``on.event`` never writes, so Kopf
leaves pods, nodes and the other watched objects untouched; SchedulingProfile status is written by the
profile manager."""

from __future__ import annotations

from typing import Any

import kopf

from kopf_scheduler.service.intake_link import WATCHES, Watch


def _register(watch: Watch) -> None:
    async def handler(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        later = watch.deliver(memo["service"], event["type"], event["object"])
        if later is not None:
            await later

    kopf.on.event(watch.group, watch.version, watch.plural, id=f"{watch.plural}_event")(handler)


for _watch in WATCHES:
    _register(_watch)
