"""The Kubernetes CEL libraries a device selector may call, as functions for ``celpy``: quantities
(``k8s.io/apiserver/pkg/cel/library/quantity.go``), semantic versions (``semverlib.go``, version 1, in the
base environment since v1.33) and the most used string extensions (``ext.Strings``).

A function returns a ``CELEvalError`` carrying upstream's error text for a value it refuses (an
unparseable quantity, a version that is not semver); a wrong argument type raises ``TypeError``, which
``celpy`` reports as ``no such overload``, as cel-go does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from celpy import CELEvalError, celtypes

from kopf_scheduler.api.quantity import QuantityError, parse_quantity

#: ``resource.ErrFormatWrong``
QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_INT64 = (-(2**63), 2**63 - 1)


class Quantity:
    """``apiservercel.Quantity``: an exact amount; equal when the amounts are (``Quantity.Equal``)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError("no such overload")
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class Semver:
    """``apiservercel.Semver`` (blang/semver): ordered by semantic-version precedence."""

    __slots__ = ("major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[str, ...]) -> None:
        self.major, self.minor, self.patch, self.pre = major, minor, patch, pre

    def _key(self) -> tuple[Any, ...]:
        # a version without pre-release parts ranks above any with; numeric parts below alphanumeric ones
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def compare(self, other: Semver) -> int:
        a, b = self._key(), other._key()
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise TypeError("no such overload")
        return self.compare(other) == 0

    def __hash__(self) -> int:
        return hash(self._key())


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """Raises ``ValueError`` with blang/semver's message."""
    if normalize:  # ``normalizeAndParse``: a leading v, leading zeros, missing minor and patch
        parts = text.removeprefix("v").split(".", 2)
        for i, part in enumerate(parts):
            if len(part) > 1:
                part = part.lstrip("0")
                parts[i] = part if part[:1].isdigit() else "0" + part
        if len(parts) < 3:
            if any(c in parts[-1] for c in "+-"):
                raise ValueError("short version cannot contain PreRelease/Build meta data")
            parts += ["0"] * (3 - len(parts))
        text = ".".join(parts)
    match = _SEMVER.match(text)
    if match is None:
        if not re.match(r"^\d+\.\d+\.\d+", text):
            raise ValueError("No Major.Minor.Patch elements found")
        raise ValueError(f"Invalid semver: {text!r}")
    pre = tuple(match.group(4).split(".")) if match.group(4) else ()
    return Semver(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre)


def semver_of(text: str) -> Semver | None:
    """A device's ``version`` attribute as a Semver; None when it is not one."""
    try:
        return parse_semver(text)
    except ValueError:
        return None


# -- functions ------------------------------------------------------------------------------------------
def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("no such overload")
    return str(value)


def quantity(text: Any) -> Quantity | CELEvalError:
    try:
        return Quantity(parse_quantity(_string(text)))
    except QuantityError:
        return CELEvalError(QUANTITY_FORMAT)


def is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(_string(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def semver(text: Any, normalize: Any = False) -> Semver | CELEvalError:
    try:
        return parse_semver(_string(text), bool(normalize))
    except ValueError as e:
        return CELEvalError(str(e))


def is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    try:
        parse_semver(_string(text), bool(normalize))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a.value > b.value) - (a.value < b.value)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    raise TypeError("no such overload")


def compare_to(a: Any, b: Any) -> celtypes.IntType:
    return celtypes.IntType(_compare(a, b))


def is_greater_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) > 0)


def is_less_than(a: Any, b: Any) -> celtypes.BoolType:
    return celtypes.BoolType(_compare(a, b) < 0)


def _quantity(value: Any) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    raise TypeError("no such overload")


def _amount(value: Any) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(int(value))
    raise TypeError("no such overload")


def add(a: Any, b: Any) -> Quantity:
    return Quantity(_quantity(a) + _amount(b))


def sub(a: Any, b: Any) -> Quantity:
    return Quantity(_quantity(a) - _amount(b))


def sign(a: Any) -> celtypes.IntType:
    value = _quantity(a)
    return celtypes.IntType((value > 0) - (value < 0))


def is_integer(a: Any) -> celtypes.BoolType:
    value = _quantity(a)
    return celtypes.BoolType(value.denominator == 1 and _INT64[0] <= value <= _INT64[1])


def as_integer(a: Any) -> celtypes.IntType | CELEvalError:
    if not is_integer(a):
        return CELEvalError("cannot convert value to integer")
    return celtypes.IntType(int(_quantity(a)))


def as_approximate_float(a: Any) -> celtypes.DoubleType:
    return celtypes.DoubleType(float(_quantity(a)))


def _version_part(name: str) -> Callable[[Any], celtypes.IntType]:
    def part(v: Any) -> celtypes.IntType:
        if not isinstance(v, Semver):
            raise TypeError("no such overload")
        return celtypes.IntType(getattr(v, name))

    return part


def lower_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.lower() if c.isascii() else c for c in _string(s)))


def upper_ascii(s: Any) -> celtypes.StringType:
    return celtypes.StringType("".join(c.upper() if c.isascii() else c for c in _string(s)))


def trim(s: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(s).strip())


def index_of(s: Any, sub_: Any) -> celtypes.IntType:
    return celtypes.IntType(_string(s).find(_string(sub_)))


def last_index_of(s: Any, sub_: Any) -> celtypes.IntType:
    return celtypes.IntType(_string(s).rfind(_string(sub_)))


def split(s: Any, sep: Any) -> celtypes.ListType:
    return celtypes.ListType([celtypes.StringType(p) for p in _string(s).split(_string(sep))])


def replace(s: Any, old: Any, new: Any) -> celtypes.StringType:
    return celtypes.StringType(_string(s).replace(_string(old), _string(new)))


#: name -> function; a name that is both a global function and a method is called the same either way
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "semver": semver,
    "isSemver": is_semver,
    "compareTo": compare_to,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "add": add,
    "sub": sub,
    "sign": sign,
    "isInteger": is_integer,
    "asInteger": as_integer,
    "asApproximateFloat": as_approximate_float,
    "major": _version_part("major"),
    "minor": _version_part("minor"),
    "patch": _version_part("patch"),
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "trim": trim,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "split": split,
    "replace": replace,
}
