"""Kopf's watches go on from the scheduling process's start-up lists instead of listing everything again.

Kopf begins each watch with a list of every object of its kind, then watches from that list's
resourceVersion. The scheduling process has just listed the same objects itself
(``SchedulerService._initial_sync``). Taking them through Kopf's per-object workers once more cost the
intake process minutes at 15,000 nodes and 150,000 pods, and an event that came meanwhile (a pod created
just after the start) waited behind all of them. So the first list of each watch the service has listed
is replaced by an empty one at the service's resourceVersion: the watch then delivers every change made
after the service's list, once, in order. A watch that starts over later (its resourceVersion expired:
410 Gone) lists as Kopf always does, and the resync follows that listing up.

This replaces ``kopf._cogs.clients.fetching.fetch_objs``, which Kopf's ``continuous_watch`` looks up at
each listing. That is not a public API of Kopf: where it is missing (another Kopf than the one pinned in
``constraints.txt``), nothing is replaced and every watch lists first, as before (logged once).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kopf_scheduler.service.intake_link import channel

log = logging.getLogger("kopf_scheduler")


class ResumeListings:
    """The resume points (channel to resourceVersion), each used by the first listing of its watch."""

    def __init__(self, versions: Mapping[str, str]) -> None:
        self.versions = {name: version for name, version in versions.items() if version}
        #: the channels whose first listing was skipped, in order
        self.resumed: list[str] = []
        self._module: Any = None
        self._replacement: Any = None

    def install(self) -> bool:
        """Puts the replacement in place; False (and a warning) when this Kopf has no ``fetch_objs``."""
        try:
            from kopf._cogs.clients import fetching as module
        except ImportError:
            module = None  # type: ignore[assignment]
        original = getattr(module, "fetch_objs", None)
        if original is None:
            log.warning("this Kopf lists each watched kind once more after the start-up lists")
            return False
        self._module = module
        self._replacement = self._replacing(getattr(original, "resumes_from", original))
        module.fetch_objs = self._replacement
        return True

    def uninstall(self) -> None:
        """Kopf's own listing again (when nothing replaced this one meanwhile)."""
        module, self._module = self._module, None
        if module is not None and module.fetch_objs is self._replacement:
            module.fetch_objs = self._replacement.resumes_from

    def _replacing(self, original: Callable[..., AsyncIterator[Any]]) -> Any:
        async def fetch_objs(*, resource: Any, **kwargs: Any) -> AsyncIterator[Any]:
            name = channel(resource)
            version = self.versions.pop(name, None)
            if version is None:
                async for chunk in original(resource=resource, **kwargs):
                    yield chunk
                return
            self.resumed.append(name)
            log.debug("watching %s from the start-up list's resourceVersion %s", name, version)
            yield [], version

        fetch_objs.resumes_from = original  # type: ignore[attr-defined]
        return fetch_objs
