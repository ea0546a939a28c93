"""Plugin arguments: typed dataclasses decoded from a profile's ``pluginConfig[].args``.

A plugin's ``Args`` is a dataclass whose fields are snake_case forms of the camelCase keys upstream uses
(``hardPodAffinityWeight`` -> ``hard_pod_affinity_weight``), with defaults, and a ``validate()`` that
raises ``ArgsError`` naming the bad field. Nested structures decode through an ``Args.from_dict``
classmethod when the plain mapping below is not enough.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


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


def decode_args(cls: type[T], raw: Mapping[str, Any] | None) -> T:
    """An ``Args`` instance from camelCase ``raw``; unknown keys and wrong scalar types are errors."""
    raw = dict(raw or {})
    custom = getattr(cls, "from_dict", None)
    if callable(custom):
        return typing.cast(T, custom(raw))
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {camel_case(f.name): f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        f = fields.get(key)
        if f is None:
            raise ArgsError(key, f"unknown field; known: {', '.join(sorted(fields)) or 'none'}")
        values[f.name] = _check_type(key, value, hints.get(f.name, Any))
    return cls(**values)


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
