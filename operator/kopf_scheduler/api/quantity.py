"""Kubernetes resource quantities (``500m``, ``1.5Gi``, ``2e3``) parsed exactly.

Values are rounded up like ``resource.Quantity.Value()`` / ``MilliValue()`` upstream, so a request of
``0.1m`` CPU counts as 1 millicore and ``1.5`` bytes as 2.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message quotes the value."""


@lru_cache(maxsize=4096, typed=True)  # typed: True == 1 == 1.0 must not share an entry
def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity. Raises ``QuantityError`` for anything else (``lots``, ``1.5.3``)."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {value!r}")
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        return amount * Fraction(10) ** int(exponent[1:])
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    return amount * _DECIMAL[suffix or ""]


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def value_of(value: str | int | float) -> int:
    """``Quantity.Value()``: the integer value, rounded up (bytes, counts)."""
    return _ceil(parse_quantity(value))


def milli_value_of(value: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (CPU in millicores)."""
    return _ceil(parse_quantity(value) * 1000)


# -- printing, as the API server does in its messages ------------------------------------------------------
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIXES = {e: s for s, e in _DECIMAL_EXPONENTS.items()}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SUFFIXES = {e // 10: s for s, e in _BINARY_EXPONENTS.items()} | {0: ""}
_NANO = 10**9
_MAX_BINARY = 2**63 - 1
_SPLIT = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")
_EXPONENT = re.compile(r"^[eE][+-]?\d+$")


def format_quantity(value: str | int | float) -> str:
    """``Quantity.String()`` of a quantity as the API server parsed it (apimachinery
    ``pkg/api/resource/quantity.go``: ``ParseQuantity`` then ``CanonicalizeBytes``), for messages that
    quote a value the way the API server does: ``-1``, ``-500m`` for ``-0.5``, ``-1k`` for ``-1000``,
    ``-1536Mi`` for ``-1.5Gi``. A short input already in canonical form is kept as written, as upstream
    keeps it. Raises ``QuantityError`` for what ``parse_quantity`` refuses."""
    exact = parse_quantity(value)
    text = value if isinstance(value, str) else str(value)
    text = text.strip()
    if text == "0" or exact == 0:
        return "0"
    match = _SPLIT.match(text)
    assert match is not None  # parse_quantity accepted it
    num = match.group(2).lstrip("0") or "0"
    denom = match.group(3) or ""
    suffix = match.group(4)
    exponent_format = _EXPONENT.match(suffix) is not None  # "e3", "E-6"; "E" alone is exa
    if suffix in _BINARY_EXPONENTS:
        exponent, binary = _BINARY_EXPONENTS[suffix], True
        if exponent >= 0 and not denom:  # ParseQuantity's fast path for binary suffixes
            precision = 15 - len(num) - exponent * 3 // 10 - 1
            if precision >= 0 and int(num) << exponent < 2**63:
                if int(num) & 0x07:
                    return text  # kept as written
                return _canonical(exact, binary=True, exponent_format=False)
    else:
        binary = False
        exponent = int(suffix[1:]) if exponent_format else _DECIMAL_EXPONENTS[suffix]
        # ParseQuantity's fast path keeps a short input written with a multiple-of-3 exponent, no
        # trailing "000" and no leading zero
        shifted = num + denom
        scale = exponent - len(denom)
        if 18 - len(shifted) >= 0 and scale >= -9 and int(shifted) < 2**63:
            if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                return text
            return _canonical(exact, binary=False, exponent_format=exponent_format)
    # the slow path: rounded away from zero to nano units; a binary amount below 1 prints as decimal
    nanos = abs(exact) * _NANO
    magnitude = Fraction(_ceil(nanos), _NANO)
    if binary and magnitude > _MAX_BINARY:  # upstream caps binary amounts
        magnitude = Fraction(_MAX_BINARY)
    if binary and magnitude < 1:
        binary = False
    return _canonical(magnitude if exact > 0 else -magnitude, binary=binary, exponent_format=exponent_format)


def _canonical(value: Fraction, binary: bool, exponent_format: bool) -> str:
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if binary and magnitude >= 1024 and magnitude.denominator == 1:
        amount, times = magnitude.numerator, 0
        while amount >= 1024 and amount % 1024 == 0:
            amount, times = amount // 1024, times + 1
        return f"{sign}{amount}{_BINARY_SUFFIXES[times]}"
    # m x 10^e with e a multiple of 3 and m as small as that allows
    amount, exponent = _ceil(magnitude * _NANO), -9
    while amount >= 10 and amount % 10 == 0:
        amount, exponent = amount // 10, exponent + 1
    while exponent % 3:
        amount, exponent = amount * 10, exponent - 1
    if exponent_format:
        return f"{sign}{amount}" + (f"e{exponent}" if exponent else "")
    # upstream prints no suffix for an exponent it has none for (beyond E)
    return f"{sign}{amount}{_DECIMAL_SUFFIXES.get(exponent, '')}"
