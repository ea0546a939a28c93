"""NodeResourcesFitArgs: ignored resources and the scoring strategy (``types_pluginargs.go`` upstream),
defaulted as ``SetDefaults_NodeResourcesFitArgs`` defaults them and checked as v1.37's
``ValidateNodeResourcesFitArgs`` checks them, with its messages: ignored resources and groups are label
names; ``requestedToCapacityRatio`` is required with the type RequestedToCapacityRatio and forbidden with
any other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.framework.args import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    ArgsError,
    ShapePoint,
    decode_shape,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_shape,
)
from kopf_scheduler.plugins._helpers import label_name_error

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
_RATIO = "scoringStrategy.requestedToCapacityRatio"

#: the shape's bounds and points are shared with other scoring plugins (``framework/args.py``)
__all__ = ["MAX_CUSTOM_PRIORITY_SCORE", "MAX_UTILIZATION", "STRATEGIES", "Args", "ResourceSpec", "ShapePoint"]


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int = 1


def _default_resources() -> tuple[ResourceSpec, ...]:
    return (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


@dataclass
class Args:
    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    #: ``scoringStrategy.type``; a strategy given without one has the type "", which is refused
    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = field(default_factory=_default_resources)
    #: ``scoringStrategy.requestedToCapacityRatio.shape``
    shape: tuple[ShapePoint, ...] = ()
    #: whether ``requestedToCapacityRatio`` was given (upstream: a non-nil pointer)
    has_ratio: bool = False

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
        kind = strategy.get("type", "")
        if not isinstance(kind, str):
            raise ArgsError("scoringStrategy.type", f"must be a string, not {kind!r}")
        args.strategy = kind
        resources = strategy.get("resources") or []
        if not isinstance(resources, list):
            raise ArgsError("scoringStrategy.resources", "must be a list")
        specs = []
        for i, item in enumerate(resources):
            path = f"scoringStrategy.resources[{i}]"
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise ArgsError(path, "must be an object with a name")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ArgsError(f"{path}.weight", f"must be an integer, not {weight!r}")
            specs.append(ResourceSpec(item["name"], weight or 1))  # 0 and unset weigh 1 (defaulting)
        if specs:  # none: cpu and memory (defaulting)
            args.resources = tuple(specs)
        ratio = strategy.get("requestedToCapacityRatio")
        if ratio is not None:
            if not isinstance(ratio, Mapping):
                raise ArgsError(_RATIO, "must be an object")
            args.has_ratio = True
            shape = ratio.get("shape")
            args.shape = () if shape is None else decode_shape(shape, f"{_RATIO}.shape")
        return args

    def validate(self) -> None:
        for i, name in enumerate(self.ignored_resources):
            problem = label_name_error(name)
            if problem:
                raise ArgsError(f"ignoredResources[{i}]", invalid(name, problem))
        for i, group in enumerate(self.ignored_resource_groups):
            if "/" in group:
                raise ArgsError(
                    f"ignoredResourceGroups[{i}]", invalid(group, "resource group name can't contain '/'")
                )
            problem = label_name_error(group)
            if problem:
                raise ArgsError(f"ignoredResourceGroups[{i}]", invalid(group, problem))
        if self.strategy not in STRATEGIES:
            raise ArgsError("scoringStrategy.type", not_supported(self.strategy, STRATEGIES))
        for i, spec in enumerate(self.resources):
            if not 0 < spec.weight <= 100:
                raise ArgsError(
                    f"scoringStrategy.resources[{i}].weight",
                    invalid(spec.weight, f"resource weight of {spec.name} not in valid range (0, 100]"),
                )
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            if not self.has_ratio:
                raise ArgsError(_RATIO, required("must be specified when type is RequestedToCapacityRatio"))
            validate_shape(self.shape, f"{_RATIO}.shape")
        elif self.has_ratio:
            raise ArgsError(_RATIO, forbidden("must be nil when type is not RequestedToCapacityRatio"))


def _str_list(raw: Mapping[str, Any], key: str) -> list[str]:
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ArgsError(key, "must be a list of strings")
    return value
