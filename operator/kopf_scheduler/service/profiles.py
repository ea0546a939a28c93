"""Turns SchedulingProfile objects into served frameworks, live.

Rules:
- A valid profile is built and serves its ``schedulerName`` from the next cycle on; its status gets
  ``Accepted=True`` and ``Ready=True`` with ``observedGeneration`` and the effective plugins.
- An invalid profile (schema, unknown plugin, bad plugin args, beyond the operator's bounds: a reserved
  scheduler name, a TLS file outside the TLS directory, ...) gets ``Accepted=False`` (reason
  ``InvalidSpec``) and ``Stalled=True`` with a message naming the field; if an earlier generation of the
  same object was accepted, that last good version keeps serving.
- Two profiles claiming one ``schedulerName``: the older (creation time, then name) serves; the newer
  gets ``Accepted=False`` (reason ``SchedulerNameConflict``). When the older goes, the newer takes over.
- A deleted profile stops serving its name; with no profile for it, the built-in default profile serves
  the default name (``kopf-scheduler``).
- The profiles of ``kopf-scheduler run --config`` (``file_profiles``) are the starting profiles: each
  serves its ``schedulerName`` while no SchedulingProfile does. A SchedulingProfile accepted for that name
  (or whose last good generation serves it) takes over; when it is deleted, or never accepted, the file's
  profile serves again. The file's profiles are built at the first reconcile, all of them, so that a
  profile the operator cannot build stops it at start (``ProfileError``), not when a SchedulingProfile
  goes.
- Status is written only when it changes, so the status update's own watch event changes nothing; a
  status the object already shows (written before a restart or a failover) is not written again, and its
  conditions keep their ``lastTransitionTime``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.scheduling.scheduler import Scheduler

log = logging.getLogger("kopf_scheduler.profiles")

StatusWriter = Callable[[str, dict[str, Any]], Awaitable[None]]

ACCEPTED = "Accepted"
READY = "Ready"
STALLED = "Stalled"
#: ``serving()``'s name for a profile of ``run --config``
FROM_FILE = "<config file>"


@dataclass
class _Served:
    object_name: str
    generation: int | None
    scheduler_name: str
    framework: Framework


#: tells a refusal: (the SchedulingProfile, reason, message) -> whether it was told (a standby does not)
Warner = Callable[[Mapping[str, Any], str, str], bool]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, ok: bool, reason: str, message: str, generation: int | None) -> dict[str, Any]:
    condition: dict[str, Any] = {"type": kind, "status": "True" if ok else "False", "reason": reason}
    condition["message"] = message
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


class ProfileManager:
    def __init__(
        self,
        scheduler: Scheduler,
        write_status: StatusWriter,
        default_name: str | None,
        bounds: ProfileBounds | None = None,
        warn: Warner | None = None,
        file_profiles: Sequence[ProfileSpec] = (),
    ) -> None:
        """``warn(obj, reason, message)``: a Warning event about a refused profile, once per refusal;
        ``file_profiles``: the profiles of ``run --config``, served where no SchedulingProfile serves."""
        self.scheduler = scheduler
        self.write_status = write_status
        self.default_name = default_name
        #: what profiles may claim and reach (``api/bounds.py``); the operator's defaults when None
        self.bounds = bounds if bounds is not None else ProfileBounds()
        self._objects: dict[str, Mapping[str, Any]] = {}
        #: object name -> the version that serves (possibly an older generation than the object's)
        self._served: dict[str, _Served] = {}
        self._default: Framework | None = None
        self.file_profiles = list(file_profiles)
        #: schedulerName -> the file's profile built (None: not built yet)
        self._file: dict[str, Framework] | None = None
        self._written: dict[str, dict[str, Any]] = {}
        self._transitions: dict[tuple[str, str], tuple[str, str]] = {}
        #: object name -> whether its current generation is accepted (the Accepted condition)
        self._accepted: dict[str, bool] = {}
        self.warn = warn
        #: object name -> the refusal last told in an event, and in the log (again only when it changes)
        self._warned: dict[str, str] = {}
        self._logged: dict[str, str] = {}

    async def on_event(self, kind: str | None, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name:
            return
        if kind == "DELETED":
            self._objects.pop(name, None)
            self._served.pop(name, None)
            self._written.pop(name, None)
            self._accepted.pop(name, None)
            self._warned.pop(name, None)
            self._logged.pop(name, None)
            for key in [key for key in self._transitions if key[0] == name]:
                del self._transitions[key]
        else:
            self._objects[name] = obj
        await self.reconcile()

    async def load(self, objs: Iterable[Mapping[str, Any]]) -> None:
        """The initial list: every object first, then one reconcile, so that name conflicts are judged with
        all claimants known (one by one, a newer profile listed first would serve for a moment and flip
        its status)."""
        for obj in objs:
            name = str((obj.get("metadata") or {}).get("name") or "")
            if name:
                self._objects[name] = obj
        await self.reconcile()

    def serving(self) -> dict[str, str]:
        """schedulerName -> the SchedulingProfile serving it (``<built-in>`` for the default,
        ``<config file>`` for a profile of ``run --config``)."""
        out = {s.scheduler_name: s.object_name for s in self._served.values()}
        for scheduler_name in self._file or {}:
            out.setdefault(scheduler_name, FROM_FILE)
        if self._default is not None and self.default_name not in out:
            out[self.default_name or ""] = "<built-in>"
        return out

    def accepted_counts(self) -> dict[str, int]:
        """How many SchedulingProfiles are accepted (``"true"``) and refused (``"false"``) as they stand."""
        accepted = sum(self._accepted.values())
        return {"true": accepted, "false": len(self._accepted) - accepted}

    async def reconcile(self) -> None:
        claimed: dict[str, str] = {}
        statuses: dict[str, dict[str, Any]] = {}
        for name, obj in sorted(self._objects.items(), key=lambda kv: (_created(kv[1]), kv[0])):
            statuses[name] = self._reconcile_one(name, obj, claimed)
        self._apply(claimed)
        for name, status in statuses.items():
            accepted = status["conditions"][0]
            self._accepted[name] = accepted["status"] == "True"
            self._tell_refusal(name, accepted)
            if self._written.get(name) == status:
                continue
            if _shown(self._objects.get(name)) == _without_nulls(status):
                self._written[name] = status  # already there (written before a restart, or by a peer)
                continue
            await self._write(name, status)

    def _tell_refusal(self, name: str, accepted: Mapping[str, Any]) -> None:
        """A refused generation gets one Warning event on the profile (``kubectl describe sprof``), with
        the condition's reason and message; accepted again, a later refusal is told again."""
        if accepted["status"] == "True":
            self._warned.pop(name, None)
            self._logged.pop(name, None)
            return
        told = f"{accepted['reason']}: {accepted['message']}"
        if self._logged.get(name) != told:  # once per refusal, not at every reconcile while it stands
            self._logged[name] = told
            log.warning("SchedulingProfile %s rejected: %s", name, told)
        if self._warned.get(name) == told or self.warn is None:
            return
        if self.warn(self._objects[name], str(accepted["reason"]), str(accepted["message"])):
            self._warned[name] = told

    def _reconcile_one(self, name: str, obj: Mapping[str, Any], claimed: dict[str, str]) -> dict[str, Any]:
        generation = (obj.get("metadata") or {}).get("generation")
        served = self._served.get(name)
        spec: ProfileSpec | None = None
        error: ProfileError | None = None
        framework: Framework | None = None
        if served is not None and served.generation == generation:
            framework = served.framework
            scheduler_name = served.scheduler_name
        else:
            try:
                spec = parse_profile(obj, self.bounds)
                framework = self.scheduler.build_profile(spec)
                scheduler_name = spec.scheduler_name
            except ProfileError as e:
                error = e
                scheduler_name = served.scheduler_name if served is not None else ""
        if error is not None:
            if served is not None and served.scheduler_name not in claimed:
                claimed[served.scheduler_name] = name  # the last good version keeps serving
            message = str(error)
            if served is not None:
                message += f" (generation {served.generation} keeps serving {served.scheduler_name!r})"
            return self._status(name, generation, False, "InvalidSpec", message, served)
        assert framework is not None
        owner = claimed.get(scheduler_name)
        if owner is not None:
            self._served.pop(name, None)
            message = (
                f"schedulerName {scheduler_name!r} is already served by SchedulingProfile {owner!r} (older)"
            )
            return self._status(name, generation, False, "SchedulerNameConflict", message, None)
        claimed[scheduler_name] = name
        self._served[name] = _Served(name, generation, scheduler_name, framework)
        message = f"serving schedulerName {scheduler_name!r}"
        if any(spec.scheduler_name == scheduler_name for spec in self.file_profiles):
            message += " in place of the --config file's profile"
        return self._status(name, generation, True, "Accepted", message, self._served[name])

    def _status(
        self, name: str, generation: int | None, ok: bool, reason: str, message: str, served: _Served | None
    ) -> dict[str, Any]:
        serving = served is not None and (ok or served.generation != generation)
        conditions = [
            _condition(ACCEPTED, ok, reason, message, generation),
            _condition(READY, serving, "Serving" if serving else reason, message, generation),
            _condition(
                STALLED, not ok, reason if not ok else "Accepted", message if not ok else "", generation
            ),
        ]
        shown = {c.get("type"): c for c in _shown(self._objects.get(name)).get("conditions") or ()}
        for condition in conditions:
            key = (name, condition["type"])
            previous = self._transitions.get(key)
            if previous is None:  # first look since start: a condition already shown keeps its time
                old = shown.get(condition["type"]) or {}
                if old.get("status") == condition["status"] and old.get("lastTransitionTime"):
                    previous = self._transitions[key] = (condition["status"], str(old["lastTransitionTime"]))
            if previous is None or previous[0] != condition["status"]:
                self._transitions[key] = (condition["status"], _now())
            condition["lastTransitionTime"] = self._transitions[key][1]
        status: dict[str, Any] = {"observedGeneration": generation, "conditions": conditions}
        status["effectivePlugins"] = served.framework.describe() if served is not None and serving else None
        return status

    def _apply(self, claimed: dict[str, str]) -> None:
        wanted: dict[str, Framework] = {}
        for scheduler_name, object_name in claimed.items():
            wanted[scheduler_name] = self._served[object_name].framework
        if self._file is None:
            self._file = {
                spec.scheduler_name: self.scheduler.build_profile(spec) for spec in self.file_profiles
            }
        for scheduler_name, framework in self._file.items():
            wanted.setdefault(scheduler_name, framework)
        if self.default_name and self.default_name not in wanted:
            if self._default is None:
                self._default = self.scheduler.build_profile(ProfileSpec(scheduler_name=self.default_name))
            wanted[self.default_name] = self._default
        for scheduler_name in list(self.scheduler.profiles):
            if scheduler_name not in wanted:
                log.info("schedulerName %r is no longer served", scheduler_name)
                self.scheduler.remove_profile(scheduler_name)
        served_by = self.serving()
        for scheduler_name, framework in wanted.items():
            if self.scheduler.profiles.get(scheduler_name) is not framework:
                log.info(
                    "serving schedulerName %r (%s): %s",
                    scheduler_name,
                    served_by.get(scheduler_name, "?"),
                    summary(framework.describe()),
                )
                self.scheduler.install(framework)

    async def _write(self, name: str, status: dict[str, Any]) -> None:
        try:
            await self.write_status(name, status)
            self._written[name] = status
        except Exception as e:  # the next event retries; serving does not depend on the status write
            log.warning("cannot update the status of SchedulingProfile %s: %s", name, e)


def summary(plugins: Mapping[str, Any]) -> str:
    """A profile's effective plugins in one short line: how many, the filters' count, the scores with
    their weights and the binder (the whole list is in the profile's status)."""
    names = {p if isinstance(p, str) else p["name"] for point in plugins.values() for p in point}
    scores = ", ".join(f"{p['name']}={p['weight']}" for p in plugins.get("score") or ())
    binders = ", ".join(plugins.get("bind") or ()) or "none"
    filters = len(plugins.get("filter") or ())
    return f"{len(names)} plugins; {filters} filter; score {scores or 'none'}; bind {binders}"


def _shown(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status the object shows now ({} when none)."""
    status = (obj or {}).get("status")
    return dict(status) if isinstance(status, Mapping) else {}


def _without_nulls(status: Mapping[str, Any]) -> dict[str, Any]:
    """``status`` as the API server stores it (a merge patch drops null fields)."""
    return {k: v for k, v in status.items() if v is not None}


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")
