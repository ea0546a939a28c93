"""DynamicResourcesArgs (``types_pluginargs.go`` upstream): ``filterTimeout``, how long Filter may search
one node for devices before it gives up on that node (``DRASchedulerFilterTimeout``, beta and on in
v1.34; default 10s; 0 means no limit), checked as ``ValidateDynamicResourcesArgs`` checks it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.framework.args import ArgsError
from kopf_scheduler.framework.go_duration import go_duration

DEFAULT_FILTER_TIMEOUT_SECONDS = 10.0
#: upstream only refuses negative values: Filter runs in the synchronous scheduling cycle, so one node's
#: search may hold every profile's pods this long at most (the extenders' ``httpTimeout`` bound too)
MAX_FILTER_TIMEOUT_SECONDS = 300.0


@dataclass
class Args:
    filter_timeout_seconds: float = DEFAULT_FILTER_TIMEOUT_SECONDS

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        unknown = sorted(set(raw) - {"filterTimeout"})
        if unknown:
            raise ArgsError(unknown[0], "unknown field; known: filterTimeout")
        value = raw.get("filterTimeout")
        if value is None:
            return cls()
        if not isinstance(value, str):
            raise ArgsError("filterTimeout", f"must be a duration string, not {value!r}")
        try:
            return cls(parse_duration(value))
        except DurationError as e:
            raise ArgsError("filterTimeout", str(e)) from None

    def validate(self) -> None:
        if self.filter_timeout_seconds < 0:
            raise ArgsError("filterTimeout", "must be zero or positive")
        if self.filter_timeout_seconds > MAX_FILTER_TIMEOUT_SECONDS:
            raise ArgsError(
                "filterTimeout",
                f"must be at most {go_duration(MAX_FILTER_TIMEOUT_SECONDS)} (Filter runs in the scheduling "
                f"cycle), not {go_duration(self.filter_timeout_seconds)}",
            )
