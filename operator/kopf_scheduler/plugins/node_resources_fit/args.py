"""NodeResourcesFitArgs: ignored resources and the scoring strategy (``types_pluginargs.go`` upstream),
checked as ``ValidateNodeResourcesFitArgs`` checks them (ignored resources and groups are label names)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.args import ArgsError
from kopf_scheduler.plugins._helpers import label_name_error

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
#: shape scores are 0..10 and scaled by 10 into the framework's 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int = 1


@dataclass(frozen=True)
class ShapePoint:
    utilization: int
    score: int


def _default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass
class Args:
    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = field(default_factory=_default_resources)
    shape: tuple[ShapePoint, ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        known = {"ignoredResources", "ignoredResourceGroups", "scoringStrategy"}
        for key in raw:
            if key not in known:
                raise ArgsError(key, f"unknown field; known: {', '.join(sorted(known))}")
        args = cls(
            ignored_resources=tuple(_str_list(raw, "ignoredResources")),
            ignored_resource_groups=tuple(_str_list(raw, "ignoredResourceGroups")),
        )
        strategy = raw.get("scoringStrategy")
        if strategy is None:
            return args
        if not isinstance(strategy, Mapping):
            raise ArgsError("scoringStrategy", "must be an object")
        args.strategy = strategy.get("type") or LEAST_ALLOCATED
        if strategy.get("resources") is not None:
            resources = strategy["resources"]
            if not isinstance(resources, list):
                raise ArgsError("scoringStrategy.resources", "must be a list")
            specs = []
            for i, item in enumerate(resources):
                path = f"scoringStrategy.resources[{i}]"
                if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                    raise ArgsError(path, "must be an object with a name")
                weight = item.get("weight", 1)
                if isinstance(weight, bool) or not isinstance(weight, int):
                    raise ArgsError(f"{path}.weight", f"must be an integer, not {weight!r}")
                specs.append(ResourceSpec(item["name"], weight))
            args.resources = tuple(specs)
        ratio = strategy.get("requestedToCapacityRatio")
        if ratio is not None:
            if not isinstance(ratio, Mapping) or not isinstance(ratio.get("shape"), list):
                raise ArgsError("scoringStrategy.requestedToCapacityRatio.shape", "must be a list")
            points = []
            for i, point in enumerate(ratio["shape"]):
                path = f"scoringStrategy.requestedToCapacityRatio.shape[{i}]"
                if not isinstance(point, Mapping):
                    raise ArgsError(path, "must be an object")
                values = []
                for key in ("utilization", "score"):
                    value = point.get(key, 0)
                    if isinstance(value, bool) or not isinstance(value, int):
                        raise ArgsError(f"{path}.{key}", f"must be an integer, not {value!r}")
                    values.append(value)
                points.append(ShapePoint(*values))
            args.shape = tuple(points)
        return args

    def validate(self) -> None:
        for i, name in enumerate(self.ignored_resources):
            problem = label_name_error(name)
            if problem:
                raise ArgsError(f"ignoredResources[{i}]", f'Invalid value: "{name}": {problem}')
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                raise ArgsError(
                    f"ignoredResourceGroups[{i}]", f"resource group name can't contain '/': {group!r}"
                )
            problem = label_name_error(group)
            if problem:
                raise ArgsError(f"ignoredResourceGroups[{i}]", f'Invalid value: "{group}": {problem}')
        if self.strategy not in STRATEGIES:
            raise ArgsError(
                "scoringStrategy.type", f"must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}"
            )
        seen: set[str] = set()
        for i, spec in enumerate(self.resources):
            if not 1 <= spec.weight <= 100:
                raise ArgsError(
                    f"scoringStrategy.resources[{i}].weight", f"must be in [1, 100], not {spec.weight}"
                )
            if spec.name in seen:
                raise ArgsError(f"scoringStrategy.resources[{i}].name", f"duplicate resource {spec.name!r}")
            seen.add(spec.name)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            path = "scoringStrategy.requestedToCapacityRatio.shape"
            if not self.shape:
                raise ArgsError(path, "at least one point is required")
            for i, point in enumerate(self.shape):
                if not 0 <= point.utilization <= MAX_UTILIZATION:
                    raise ArgsError(
                        f"{path}[{i}].utilization", f"must be in [0, 100], not {point.utilization}"
                    )
                if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
                    raise ArgsError(f"{path}[{i}].score", f"must be in [0, 10], not {point.score}")
                if i and point.utilization <= self.shape[i - 1].utilization:
                    raise ArgsError(f"{path}[{i}].utilization", "values must be sorted in increasing order")


def _str_list(raw: Mapping[str, Any], key: str) -> list[str]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ArgsError(key, "must be a list of strings")
    return value
