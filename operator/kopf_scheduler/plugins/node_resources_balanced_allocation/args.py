"""NodeResourcesBalancedAllocationArgs: the resources whose usage fractions should stay balanced
(``types_pluginargs.go``; defaulted and validated as upstream's ``SetDefaults_`` and
``ValidateNodeResourcesBalancedAllocationArgs`` do)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.args import ArgsError


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    #: must be 1: the score does not weigh resources (the field exists for symmetry with NodeResourcesFit)
    weight: int = 1


def _default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass
class Args:
    resources: tuple[ResourceSpec, ...] = field(default_factory=_default_resources)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        for key in raw:
            if key != "resources":
                raise ArgsError(key, "unknown field; known: resources")
        resources = raw.get("resources")
        if not resources:  # unset or empty: the defaults
            return cls()
        if not isinstance(resources, list):
            raise ArgsError("resources", "must be a list")
        specs = []
        for i, item in enumerate(resources):
            path = f"resources[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise ArgsError(path, "must be an object with a name")
            for key in item:
                if key not in ("name", "weight"):
                    raise ArgsError(f"{path}.{key}", "unknown field; known: name, weight")
            weight = item.get("weight") or 0
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ArgsError(f"{path}.weight", f"must be an integer, not {weight!r}")
            specs.append(ResourceSpec(item["name"], weight or 1))  # an unset or zero weight means 1
        return cls(tuple(specs))

    def validate(self) -> None:
        seen: set[str] = set()
        for i, spec in enumerate(self.resources):
            if spec.name in seen:
                raise ArgsError(f"resources[{i}].name", f"Duplicate value: {spec.name!r}")
            seen.add(spec.name)
            if spec.weight != 1:
                raise ArgsError(f"resources[{i}].weight", f"Invalid value: {spec.weight}: must be 1")
