"""Kubernetes resource quantities (``500m``, ``1.5Gi``, ``2e3``) read as kube-scheduler reads them.

``int64_value_of`` and ``int64_milli_value_of`` give the int64 that ``resource.Quantity.Value()`` and
``MilliValue()`` return upstream (apimachinery ``pkg/api/resource``, the same in v0.34 and v0.37): rounded
up, so a request of ``0.1m`` CPU counts as 1 millicore and ``1.5`` bytes as 2, and, for a value that does
not fit an int64, the very number upstream computes, never an error. The scheduler's resource arithmetic
(requests, allocatable: ``framework.pod_requests``, ``framework.node_info``) reads quantities so, as
kube-scheduler's ``Resource.Add`` and ``SetMaxResource`` do. ``value_of`` and ``milli_value_of`` round
the exact value up instead, however large: what ``Quantity.Cmp`` compares. Upstream, for reference:

- ``ParseQuantity`` keeps a short quantity (at most 18 digits, exponent >= -9) as an int64 mantissa and a
  power of ten (``int64Amount``), anything else as an exact decimal rounded up to nano units (``inf.Dec``).
  A binary-suffixed amount above 2^63-1 is capped there (``10Ei`` is stored as ``9223372036854775807``);
  a decimal one is not (``1e30`` stays ``1e30``; the API server accepts both).
- ``ScaledValue`` (behind ``Value`` and ``MilliValue``) ignores every overflow flag: an ``int64Amount``
  scaled by 10, 100, 1000, 10^6 or 10^9 wraps around (``int64MultiplyScale``), by another power of ten it
  gives 0 (``positiveScaleInt64``'s loop); an ``inf.Dec`` gives the low 64 bits of the result
  (``scaledValue`` in ``scale_int.go``, ``big.Int.Int64``). So ``cpu: 1e30`` is 0 millicores,
  ``memory: 10Ei`` is 2^63-1 bytes but ``cpu: 10Ei`` is -1000 millicores.

Sums of such values wrap around like Go's int64 ``+=`` (``add_int64``), so every amount the scheduler keeps
fits a numpy int64 column. The int64 readers compute no power of ten beyond what the input's own length
allows (``1e999999999`` costs what ``1e9`` costs); the exact ones (``parse_quantity``, ``value_of``)
refuse an exponent beyond ``EXACT_EXPONENT_LIMIT`` rather than spend minutes on it. Texts of more than
4300 digits, which ``int()`` refuses, are read too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from kopf_scheduler.api.errors import json_type

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_MOD64 = 1 << 64
#: ``parse_quantity`` refuses a decimal exponent beyond this (10^100000 takes a few ms to compute)
EXACT_EXPONENT_LIMIT = 100_000

_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# ASCII digits only, as upstream's scanner
_QUANTITY = re.compile(
    r"^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$", re.ASCII
)
_NANO = 10**9


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message quotes the value."""


def wrong_type(value: object) -> QuantityError:
    """The error for a value no quantity is written as (a list, an object). The readers' caches raise
    ``TypeError`` for such a value (it cannot be hashed) before reading it: code reading raw objects
    catches that and raises this, which costs nothing on a valid quantity's path."""
    return QuantityError(f"must be a quantity (a string or a number), not {json_type(value)}")


def wrap_int64(value: int) -> int:
    """``value`` as a Go int64 holds it: the low 64 bits, two's complement."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    value &= _MOD64 - 1
    return value - _MOD64 if value > INT64_MAX else value


def add_int64(a: int, b: int) -> int:
    """Go's ``a + b`` on int64: wraps around instead of growing (``NodeInfo.update`` sums requests so)."""
    total = a + b
    if INT64_MIN <= total <= INT64_MAX:
        return total
    return wrap_int64(total)


def _wrap32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value > 0x7FFFFFFF else value


def _digits(text: str) -> int:
    """``int(text)`` for ASCII digits of any length (``int()`` refuses more than 4300 digits)."""
    text = text.lstrip("0")
    if len(text) <= 4000:
        return int(text or "0")
    value = 0
    for i in range(0, len(text), 4000):
        chunk = text[i : i + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


@dataclass(frozen=True, slots=True)
class _Text:
    """A quantity's text split the way ``parseQuantityString`` splits it."""

    negative: bool
    num: str  # integer digits without leading zeros, "0" when none
    denom: str  # fraction digits as written
    binary: int  # the binary suffix's power of two (``Ki`` 10 ... ``Ei`` 60), 0 for none
    exponent: int  # the decimal exponent (suffix or ``e<n>``) as upstream's int32 holds it

    @property
    def zero(self) -> bool:
        return self.num == "0" and not self.denom.strip("0")


def _split(value: str | int | float) -> _Text:
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, float):
        text = repr(value)  # 1e+30, 0.5; inf and nan do not match
    else:
        try:
            text = str(value).strip()
        except ValueError:  # an int too long to print
            raise QuantityError("invalid quantity: too many digits") from None
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {value!r}")
    sign, whole, frac, exponent, suffix = match.groups()
    if not whole and not frac:  # a number needs a digit: "e3", ".", "Gi" are refused
        raise QuantityError(f"invalid quantity {value!r}")
    if exponent is not None:
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        # ``strconv.ParseInt(..., 64)``, then ``int32(...)``: an exponent beyond int64 is refused
        if len(digits) > 19 or int(digits) > INT64_MAX + (exponent[0] == "-"):
            raise QuantityError(f"invalid quantity {value!r}")
        power = _wrap32(-int(digits) if exponent[0] == "-" else int(digits))
        binary = 0
    elif suffix in _BINARY_EXPONENTS:
        power, binary = 0, _BINARY_EXPONENTS[suffix]
    else:
        power, binary = _DECIMAL_EXPONENTS[suffix or ""], 0
    return _Text(sign == "-", whole.lstrip("0") or "0", frac or "", binary, power)


# -- the exact value ----------------------------------------------------------------------------------------
@lru_cache(maxsize=4096, typed=True)  # typed: True == 1 == 1.0 must not share an entry
def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a quantity as written. Raises ``QuantityError`` for anything else (``lots``,
    ``1.5.3``) and for a decimal exponent beyond ``EXACT_EXPONENT_LIMIT`` (``1e999999999``: exact, it
    would take minutes)."""
    text = _split(value)
    if text.zero:
        return Fraction(0)
    if abs(text.exponent) > EXACT_EXPONENT_LIMIT:
        raise QuantityError(f"invalid quantity {value!r}: exponent out of range")
    amount = Fraction(_digits(text.num + text.denom) << text.binary, 10 ** len(text.denom))
    amount *= Fraction(10) ** text.exponent
    return -amount if text.negative else amount


def is_negative(value: str | int | float) -> bool:
    """``Quantity.Sign() < 0``, without computing the value. Raises ``QuantityError``."""
    text = _split(value)
    return text.negative and not text.zero


# -- Value() and MilliValue() ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Int64Amount:
    """``int64Amount``: ``value * 10^scale``."""

    value: int
    scale: int


@dataclass(frozen=True, slots=True)
class _Dec:
    """``inf.Dec``: ``mantissa * 10^zeros * 10^-scale``, the trailing zeros kept apart so a huge exponent
    costs nothing."""

    mantissa: int
    zeros: int
    scale: int


def _go_div(a: int, b: int) -> int:
    """Go's integer division: toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int64_multiply_scale(a: int, b: int) -> tuple[int, bool]:
    """``int64MultiplyScale`` (and its ``10``/``100``/``1000`` twins): ``a * b`` wrapped, and whether it
    fit."""
    if a in (0, 1):
        return a * b, True
    if a == INT64_MIN:
        return 0, False
    c = wrap_int64(a * b)
    return c, _go_div(c, b) == a


def _positive_scale_int64(base: int, scale: int) -> int:
    """``positiveScaleInt64``'s first result (``ScaledValue`` drops the second): multiplies by 10^scale;
    the unrolled scales wrap around on overflow, the loop gives 0; a negative scale is left as is."""
    if scale == 0:
        return base
    if scale in (1, 2, 3, 6, 9):
        return _int64_multiply_scale(base, 10**scale)[0]
    if base == 0:  # upstream loops ``scale`` times over the zero
        return 0
    value = base
    for _ in range(scale):  # a non-zero value overflows within 19 rounds
        value, ok = _int64_multiply_scale(value, 10)
        if not ok:
            return 0
    return value


def _negative_scale_int64(base: int, scale: int) -> int:
    """``negativeScaleInt64``: divides by 10^scale, rounding away from zero."""
    if scale == 0:
        return base
    value, fraction = base, False
    for _ in range(scale):  # a value reaches 0 within 19 rounds
        if not fraction and value - _go_div(value, 10) * 10 != 0:
            fraction = True
        value = _go_div(value, 10)
        if value == 0:
            if fraction:
                return 1 if base > 0 else -1
            return 0
    if fraction:
        value = value + 1 if base > 0 else value - 1
    return value


def _go_pow10_int64(n: int) -> int:
    """``int64(math.Pow10(n))``: exact up to 18; above, the float does not fit and amd64 gives MinInt64."""
    return 10**n if n <= 18 else INT64_MIN


def _dec_scaled_value(d: _Dec, new_scale: int) -> int:
    """``scaledValue(unscaled, scale, newScale)`` (``scale_int.go``): the value at ``new_scale`` rounded
    up, ``big.Int.Int64()`` (the low 64 bits) where it does not fit."""
    huge = d.zeros > 64  # then |unscaled| > 10^64: only its low 64 bits are ever needed
    unscaled = 0 if huge else d.mantissa * 10**d.zeros
    dif = d.scale - new_scale
    if dif == 0:
        return wrap_int64(d.mantissa * pow(10, d.zeros, _MOD64)) if huge else wrap_int64(unscaled)
    if dif < 0:
        low = wrap_int64(d.mantissa * pow(10, d.zeros, _MOD64)) if huge else wrap_int64(unscaled)
        return wrap_int64(low * _go_pow10_int64(-dif))
    below_max = d.mantissa < 0 if huge else unscaled < INT64_MAX
    if below_max and dif < 19:
        low = wrap_int64(d.mantissa * pow(10, d.zeros, _MOD64)) if huge else wrap_int64(unscaled)
        divisor = 10**dif
        result = _go_div(low, divisor)
        return result + 1 if low - result * divisor != 0 else result
    if huge and d.zeros >= dif:  # an exact quotient: unscaled / 10^dif = mantissa * 10^(zeros - dif)
        return wrap_int64(d.mantissa * pow(10, d.zeros - dif, _MOD64))
    if huge:
        unscaled = d.mantissa * 10**d.zeros
    quotient, remainder = divmod(unscaled, 10**dif)  # big.Int.DivMod: Euclidean, as floor for 10^dif > 0
    return wrap_int64(wrap_int64(quotient) + (1 if remainder else 0))


@lru_cache(maxsize=4096, typed=True)
def _go_quantity(value: str | int | float) -> _Int64Amount | _Dec:
    """What ``ParseQuantity`` (``quantity.go``) builds from ``value``."""
    text = _split(value)
    if text.zero:
        return _Int64Amount(0, 0)
    # the int64 fast path
    mantissa = 1
    if text.binary:
        scale = 0
        if not text.denom:
            mantissa = 1 << text.binary
            precision = 15 - len(text.num) - text.binary * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale = text.exponent
        precision = 18 - (len(text.num) + len(text.denom))
    if precision >= 0:
        scale = _wrap32(scale - len(text.denom))
        if scale >= -9:
            digits = int(text.num + text.denom)
            result, fits = _int64_multiply_scale(digits, mantissa) if mantissa > 1 else (digits, True)
            if fits:
                return _Int64Amount(-result if text.negative else result, scale)
    # the inf.Dec path: exact, rounded up to nano units (away from zero), binary amounts capped
    digits = _digits(text.num + text.denom)
    if text.binary:
        exact = Fraction(digits << text.binary, 10 ** len(text.denom))
        nanos = -((-exact.numerator * _NANO) // exact.denominator)
        if nanos > INT64_MAX * _NANO:
            mantissa, zeros, scale = INT64_MAX, 0, 0
        else:
            mantissa, zeros, scale = nanos, 0, 9
    else:
        dec_scale = _wrap32(len(text.denom) + _wrap32(-text.exponent))  # ``SetScale``: 10^-dec_scale
        if dec_scale <= 9:
            mantissa, zeros, scale = digits, 9 - dec_scale, 9
        elif dec_scale - 9 >= len((text.num + text.denom).lstrip("0")):  # under a nano unit: one
            mantissa, zeros, scale = 1, 0, 9
        else:
            mantissa, zeros, scale = -((-digits) // 10 ** (dec_scale - 9)), 0, 9
    return _Dec(-mantissa if text.negative else mantissa, zeros, scale)


def _scaled_value(value: str | int | float, scale: int) -> int:
    """``Quantity.ScaledValue(scale)``: ``ceil(q / 10^scale)`` as upstream computes it."""
    q = _go_quantity(value)
    if isinstance(q, _Int64Amount):  # ``int64Amount.AsScaledInt64``, its flag dropped
        if q.scale < scale:
            return _negative_scale_int64(q.value, _wrap32(scale - q.scale))
        return _positive_scale_int64(q.value, _wrap32(q.scale - scale))
    return _dec_scaled_value(q, -scale)


@lru_cache(maxsize=4096, typed=True)
def int64_value_of(value: str | int | float) -> int:
    """``Quantity.Value()``: the integer value, rounded up (bytes, counts), as the int64 upstream returns
    even when the quantity does not fit one (see the module docstring). Raises ``QuantityError``."""
    return _scaled_value(value, 0)


@lru_cache(maxsize=4096, typed=True)
def int64_milli_value_of(value: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (CPU in millicores), as the int64 upstream
    returns even when the quantity does not fit one. Raises ``QuantityError``."""
    return _scaled_value(value, -3)


def value_of(value: str | int | float) -> int:
    """The exact value rounded up (bytes, counts), however large: what ``Quantity.Cmp`` compares (a
    volume's capacity with a claim's request). ``Value()`` itself is ``int64_value_of``; the two differ
    only where the quantity does not fit an int64. Raises ``QuantityError``."""
    return _ceil(parse_quantity(value))


def milli_value_of(value: str | int | float) -> int:
    """The exact value in thousandths rounded up, however large; ``MilliValue()`` itself is
    ``int64_milli_value_of``. Raises ``QuantityError``."""
    return _ceil(parse_quantity(value) * 1000)


# -- printing, as the API server does in its messages ------------------------------------------------------
_DECIMAL_SUFFIXES = {e: s for s, e in _DECIMAL_EXPONENTS.items()}
_BINARY_SUFFIXES = {e // 10: s for s, e in _BINARY_EXPONENTS.items()} | {0: ""}
_MAX_BINARY = 2**63 - 1
_SPLIT = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")
_EXPONENT = re.compile(r"^[eE][+-]?\d+$")


def format_quantity(value: str | int | float) -> str:
    """``Quantity.String()`` of a quantity as the API server parsed it (apimachinery
    ``pkg/api/resource/quantity.go``: ``ParseQuantity`` then ``CanonicalizeBytes``), for messages that
    quote a value the way the API server does: ``-1``, ``-500m`` for ``-0.5``, ``-1k`` for ``-1000``,
    ``-1536Mi`` for ``-1.5Gi``. A short input already in canonical form is kept as written, as upstream
    keeps it, and so is one whose exponent is too large to canonicalise (``EXACT_EXPONENT_LIMIT``).
    Raises ``QuantityError`` for what is not a quantity."""
    parts = _split(value)
    text = value if isinstance(value, str) else str(value)
    text = text.strip()
    if parts.zero:
        return "0"
    if abs(parts.exponent) > EXACT_EXPONENT_LIMIT:
        return text
    exact = parse_quantity(value)
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
        exponent = parts.exponent
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


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


_CHUNK = 10**4000


def _int_text(value: int) -> str:
    """``str(value)`` for a non-negative int of any length (``str()`` refuses more than 4300 digits)."""
    if value < _CHUNK:
        return str(value)
    high, low = divmod(value, _CHUNK)
    return _int_text(high) + str(low).rjust(4000, "0")


def _canonical(value: Fraction, binary: bool, exponent_format: bool) -> str:
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if binary and magnitude >= 1024 and magnitude.denominator == 1:
        amount, times = magnitude.numerator, 0
        while amount >= 1024 and amount % 1024 == 0:
            amount, times = amount // 1024, times + 1
        return f"{sign}{_int_text(amount)}{_BINARY_SUFFIXES[times]}"
    # m x 10^e with e a multiple of 3 and m as small as that allows
    amount, exponent = _ceil(magnitude * _NANO), -9
    while amount >= 10 and amount % 10 == 0:
        amount, exponent = amount // 10, exponent + 1
    while exponent % 3:
        amount, exponent = amount * 10, exponent - 1
    if exponent_format:
        return f"{sign}{_int_text(amount)}" + (f"e{exponent}" if exponent else "")
    # upstream prints no suffix for an exponent it has none for (beyond E)
    return f"{sign}{_int_text(amount)}{_DECIMAL_SUFFIXES.get(exponent, '')}"


def quantity_text(value: Fraction, binary: bool, exponent_format: bool = False) -> str:
    """``Quantity.String()`` of ``resource.NewQuantity``/``NewMilliQuantity`` (``value``) in a format:
    binary (``BinarySI``), exponent (``DecimalExponent``) or decimal (``DecimalSI``)."""
    return _canonical(value, binary=binary, exponent_format=exponent_format)
