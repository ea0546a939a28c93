"""PodTopologySpreadArgs: cluster-level default constraints and how they are chosen
(``types_pluginargs.go`` upstream; validation as ``ValidatePodTopologySpreadArgs`` does it).

``defaultingType: System`` (the default) uses the built-in constraints (hostname maxSkew 3, zone
maxSkew 5, both ScheduleAnyway) and requires ``defaultConstraints`` to be empty; ``List`` uses
``defaultConstraints``. Default constraints never carry a label selector: the selector is deduced per
pod from the Services and controllers that select or own it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.args import ArgsError
from kopf_scheduler.plugins._helpers import label_name_error

SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

#: the fields of a ``v1.TopologySpreadConstraint``, with the type each must have.
_CONSTRAINT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "maxSkew": int,
    "topologyKey": str,
    "whenUnsatisfiable": str,
    "labelSelector": Mapping,
    "minDomains": int,
    "nodeAffinityPolicy": str,
    "nodeTaintsPolicy": str,
    "matchLabelKeys": list,
}

_INT32_MAX = 2**31 - 1


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


@dataclass
class Args:
    #: raw ``v1.TopologySpreadConstraint`` objects (camelCase keys), applied to pods that define none.
    default_constraints: tuple[Mapping[str, Any], ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        known = {"defaultConstraints", "defaultingType"}
        for key in raw:
            if key not in known:
                raise ArgsError(key, f"unknown field; known: {', '.join(sorted(known))}")
        defaulting = raw.get("defaultingType") or SYSTEM_DEFAULTING
        if not isinstance(defaulting, str):
            raise ArgsError("defaultingType", f"must be a string, not {defaulting!r}")
        constraints = raw.get("defaultConstraints") or []
        if not isinstance(constraints, list):
            raise ArgsError("defaultConstraints", "must be a list")
        for i, item in enumerate(constraints):
            path = f"defaultConstraints[{i}]"
            if not isinstance(item, Mapping):
                raise ArgsError(path, "must be an object")
            for key, value in item.items():
                kind = _CONSTRAINT_FIELDS.get(key)
                if kind is None:
                    raise ArgsError(
                        f"{path}.{key}", f"unknown field; known: {', '.join(sorted(_CONSTRAINT_FIELDS))}"
                    )
                if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
                    raise ArgsError(f"{path}.{key}", f"has the wrong type: {value!r}")
        return cls(default_constraints=tuple(dict(c) for c in constraints), defaulting_type=defaulting)

    def validate(self) -> None:
        if self.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
            raise ArgsError(
                "defaultingType",
                f'Unsupported value: {_quote(self.defaulting_type)}: supported values: "List", "System"',
            )
        if self.defaulting_type == SYSTEM_DEFAULTING and self.default_constraints:
            raise ArgsError(
                "defaultingType", 'Invalid value: "System": when .defaultConstraints are not empty'
            )
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(self.default_constraints):
            path = f"defaultConstraints[{i}]"
            max_skew = c.get("maxSkew") or 0
            if max_skew <= 0:
                raise ArgsError(f"{path}.maxSkew", f"Invalid value: {max_skew}: not in valid range (0, inf)")
            if max_skew > _INT32_MAX:  # an int32 upstream: a larger value does not decode
                raise ArgsError(
                    f"{path}.maxSkew", f"Invalid value: {max_skew}: not in valid range (0, {_INT32_MAX}]"
                )
            min_domains = c.get("minDomains")
            if min_domains is not None and not 0 < min_domains <= _INT32_MAX:  # as the Pod API checks it
                raise ArgsError(
                    f"{path}.minDomains", f"Invalid value: {min_domains}: must be greater than zero"
                )
            key = c.get("topologyKey") or ""
            if not key:
                raise ArgsError(f"{path}.topologyKey", "Required value: can not be empty")
            problem = label_name_error(key)
            if problem:
                raise ArgsError(f"{path}.topologyKey", f"Invalid value: {_quote(key)}: {problem}")
            action = c.get("whenUnsatisfiable") or ""
            if not action:
                raise ArgsError(f"{path}.whenUnsatisfiable", "Required value: can not be empty")
            if action not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
                raise ArgsError(
                    f"{path}.whenUnsatisfiable",
                    f"Unsupported value: {_quote(action)}: "
                    'supported values: "DoNotSchedule", "ScheduleAnyway"',
                )
            if c.get("labelSelector") is not None:
                raise ArgsError(
                    f"{path}.labelSelector",
                    "Forbidden: constraint must not define a selector, as they deduced for each pod",
                )
            if (key, action) in seen:
                raise ArgsError(path, f'Duplicate value: "{{{key}, {action}}}"')
            seen.add((key, action))
