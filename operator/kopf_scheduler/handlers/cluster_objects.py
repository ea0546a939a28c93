"""Namespaces, Services, controllers and the other kinds in ``framework.objects.WATCHED_KINDS``: one
``on.event`` handler per kind forwards every event to the scheduler's stores. ``on.event`` never writes,
so Kopf leaves these objects untouched."""

from __future__ import annotations

from typing import Any

import kopf

from kopf_scheduler.framework.objects import WATCHED_KINDS, ObjectKind


def _register(kind: ObjectKind[Any]) -> None:
    async def handler(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        memo["service"].object_event(kind, event["type"], event["object"])

    kopf.on.event(kind.group, kind.version, kind.plural, id=f"{kind.plural}_event")(handler)


for _kind in WATCHED_KINDS:
    _register(_kind)
