"""Plugin arguments: typed dataclasses decoded from a profile's ``pluginConfig[].args``.

A plugin's ``Args`` is a dataclass whose fields are snake_case forms of the camelCase keys upstream uses
(``hardPodAffinityWeight`` -> ``hard_pod_affinity_weight``), with defaults, and a ``validate()`` that
raises ``ArgsError`` naming the bad field. Nested structures decode through an ``Args.from_dict``
classmethod when the plain mapping below is not enough. Defaults that depend on feature gates (upstream's
``SetDefaults_<Plugin>Args`` read them) come from an optional ``set_defaults(gates)`` method, called with
the gates in force once the arguments are decoded; it may keep what ``validate()`` needs to know of the
gates in fields declared ``init=False``, which are never read from ``args``.

Messages are the bodies of upstream's ``field.Error`` (``invalid``, ``required``, ``forbidden``,
``not_supported``), so that a refusal reads as kube-scheduler's; ``validate_shape`` is upstream's
``validateFunctionShape``, shared by the plugins that score along a utilization shape.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates

T = TypeVar("T")

#: ``config.MaxCustomPriorityScore``: shape scores are 0..10, scaled by 10 into the framework's 0..100
MAX_CUSTOM_PRIORITY_SCORE = 10
MAX_UTILIZATION = 100


class ArgsError(ValueError):
    """A bad plugin argument; ``field`` is its path inside ``args`` (``scoringStrategy.type``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def camel_case(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclasses.dataclass
class NoArgs:
    """For plugins that take no arguments."""

    def validate(self) -> None:
        return None


def decode_args(cls: type[T], raw: Mapping[str, Any] | None, gates: FeatureGates = DEFAULT_GATES) -> T:
    """An ``Args`` instance from camelCase ``raw``, defaulted for ``gates``; unknown keys and wrong scalar
    types are errors."""
    raw = dict(raw or {})
    custom = getattr(cls, "from_dict", None)
    if callable(custom):
        args = typing.cast(T, custom(raw))
    elif not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    else:
        hints = typing.get_type_hints(cls)
        fields = {camel_case(f.name): f for f in dataclasses.fields(cls) if f.init}
        values: dict[str, Any] = {}
        for key, value in raw.items():
            f = fields.get(key)
            if f is None:
                raise ArgsError(key, f"unknown field; known: {', '.join(sorted(fields)) or 'none'}")
            values[f.name] = _check_type(key, value, hints.get(f.name, Any))
        args = cls(**values)
    set_defaults = getattr(args, "set_defaults", None)
    if callable(set_defaults):
        set_defaults(gates)
    return args


def _check_type(key: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool and not isinstance(value, bool):
        raise ArgsError(key, f"must be a boolean, not {value!r}")
    if hint is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ArgsError(key, f"must be an integer, not {value!r}")
    if hint is str and not isinstance(value, str):
        raise ArgsError(key, f"must be a string, not {value!r}")
    if origin in (list, tuple) and not isinstance(value, list | tuple):
        raise ArgsError(key, f"must be a list, not {value!r}")
    if origin is dict and not isinstance(value, Mapping):
        raise ArgsError(key, f"must be an object, not {value!r}")
    if origin is tuple:
        return tuple(value)
    return value


# -- upstream's field.Error bodies ----------------------------------------------------------------------
def bad_value(value: Any) -> str:
    """A value as ``field.Error.ErrorBody`` prints it: numbers and booleans bare, strings quoted, anything
    else as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def invalid(value: Any, detail: str) -> str:
    return f"Invalid value: {bad_value(value)}: {detail}"


def required(detail: str) -> str:
    return f"Required value: {detail}"


def forbidden(detail: str) -> str:
    return f"Forbidden: {detail}"


def not_supported(value: Any, supported: Iterable[str]) -> str:
    return f"Unsupported value: {bad_value(value)}: supported values: " + ", ".join(
        json.dumps(s) for s in supported
    )


# -- utilization shapes ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ShapePoint:
    """``UtilizationShapePoint``: the score (0-10) a utilization (0-100) maps to."""

    utilization: int
    score: int


def decode_shape(raw: Any, path: str) -> tuple[ShapePoint, ...]:
    """A list of ``{utilization, score}`` objects (a missing value is 0) at ``path`` of the args."""
    if not isinstance(raw, list):
        raise ArgsError(path, "must be a list")
    points = []
    for i, point in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(point, Mapping):
            raise ArgsError(where, "must be an object")
        values = []
        for key in ("utilization", "score"):
            value = point.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgsError(f"{where}.{key}", f"must be an integer, not {value!r}")
            values.append(value)
        points.append(ShapePoint(*values))
    return tuple(points)


def validate_shape(shape: Sequence[ShapePoint], path: str) -> None:
    """Upstream's ``validateFunctionShape``: raises its first error."""
    if not shape:
        raise ArgsError(path, required("at least one point must be specified"))
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            raise ArgsError(
                f"{path}[{i}].utilization",
                invalid(shape[i].utilization, "values must be sorted in increasing order"),
            )
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            raise ArgsError(
                f"{path}[{i}].utilization",
                invalid(point.utilization, f"not in valid range [0, {MAX_UTILIZATION}]"),
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ArgsError(
                f"{path}[{i}].score",
                invalid(point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
            )
