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
