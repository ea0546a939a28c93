"""Kubernetes quantities, rounded up like ``Quantity.Value()`` / ``MilliValue()``, and beyond int64 the very
int64 those give upstream."""

import time
from fractions import Fraction

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from kopf_scheduler.api.quantity import (
    EXACT_EXPONENT_LIMIT,
    INT64_MAX,
    INT64_MIN,
    QuantityError,
    add_int64,
    format_quantity,
    int64_milli_value_of,
    int64_value_of,
    is_negative,
    milli_value_of,
    parse_quantity,
    value_of,
    wrap_int64,
)


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("500m", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("2e3", Fraction(2000)),
        ("2E3", Fraction(2000)),
        ("1e-3", Fraction(1, 1000)),
        ("100Mi", Fraction(100 * 2**20)),
        ("1Ki", Fraction(1024)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1E", Fraction(10**18)),
        ("250u", Fraction(1, 4000)),
        ("5n", Fraction(1, 200_000_000)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("+1", Fraction(1)),
        (3, Fraction(3)),
        (0.5, Fraction(1, 2)),
    ],
    ids=lambda v: repr(v),
)
def test_parse_quantity_exact(text: str | int | float, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("500m", 500, 1),
        ("1", 1000, 1),
        ("0.1m", 1, 1),  # a tenth of a millicore still counts as one millicore
        ("1.5", 1500, 2),  # 1.5 bytes count as 2
        ("1.5Gi", 1610612736000, 1610612736),
        ("2e3", 2_000_000, 2000),
        ("1n", 1, 1),
        ("0", 0, 0),
    ],
    ids=["500m", "1", "0.1m-rounds-up", "1.5-rounds-up", "1.5Gi", "2e3", "1n", "0"],
)
def test_value_and_milli_value_round_up(text: str, milli: int, value: int) -> None:
    assert milli_value_of(text) == int64_milli_value_of(text) == milli
    assert value_of(text) == int64_value_of(text) == value


@pytest.mark.parametrize(
    "text",
    ["lots", "1.5.3", "", "1K", "1Kb", "e3", "1 m", "Gi", "1e", "--1"],
    ids=[
        "lots",
        "1.5.3",
        "empty",
        "upper-K",
        "Kb",
        "bare-exponent",
        "inner-space",
        "suffix-only",
        "e-no-digits",
        "--1",
    ],
)
def test_invalid_quantity_raises(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert str(info.value) == f"invalid quantity {text!r}"


def test_bool_is_not_a_quantity_even_after_an_equal_number_was_cached() -> None:
    parse_quantity(1.0)  # True == 1.0 and hashes alike: the cache must not hand back 1
    with pytest.raises(QuantityError):
        parse_quantity(True)


# -- quantities that do not fit an int64 -------------------------------------------------------------------
#: ``resource.MustParse(text)`` then ``.Value()`` and ``.MilliValue()``, printed by a Go program built
#: against k8s.io/apimachinery v0.37.2 (v0.34.10's ``pkg/api/resource`` computes the same: only
#: annotations and ``QuantityPtrEqual`` differ)
UPSTREAM = [
    ("1e30", 0, 0),  # int64Amount{1, 30}: positiveScaleInt64's loop overflows and gives 0
    ("-1e30", 0, 0),
    ("10Ei", 2**63 - 1, -1000),  # capped by ParseQuantity; x1000 wraps around
    ("8Ei", 2**63 - 1, -1000),  # 2^63: capped too
    ("7Ei", 8070450532247928832, -(2**63)),
    ("-10Ei", -(2**63 - 1), 1000),
    ("9223372036854775807", 2**63 - 1, -1000),  # 2^63-1, as the API server stores 10Ei
    ("9223372036854775808", -(2**63), 0),  # 2^63: inf.Dec, its low 64 bits
    ("-9223372036854775808", 0, 0),
    ("-9223372036854775809", -1, -1000),
    ("1E", 10**18, 0),
    ("9E", 9 * 10**18, 0),
    ("10E", 0, 0),
    ("1e19", 0, 0),
    ("9.2e15", 9200000000000000, 9200000000000000000),
    ("9.3e15", 9300000000000000, 0),
    ("9223372036854775807m", 9223372036854776, 2**63 - 1),
    ("9223372036854776", 9223372036854776, -9223372036854775616),  # x1000 wraps around
    ("1e999999999", 0, 0),
    ("1e2147483647", 0, 1),  # the int32 scale wraps around in MilliValue
    ("1e4294967296", 1, 1000),  # the exponent is an int32: 2^32 is 0
    ("0e999999999", 0, 0),
    ("1.5", 2, 1500),
    ("-1.5", -2, -1500),  # rounded away from zero
    ("1e-30", 1, 1),
    ("1234567890123456789e25", -2074221847909498880, -8186511654029099008),
    ("-1234567890123456789e25", -5791930609, -5791930610321),
    ("12345678901234567890Ki", 2**63 - 1, -1000),
    ("1.5Ei", 1729382256910270464, -4611686018427387904),
    ("1.5Gi", 1610612736, 1610612736000),
]


@pytest.mark.parametrize(("text", "value", "milli"), UPSTREAM, ids=[t for t, _, _ in UPSTREAM])
def test_values_beyond_int64_are_upstreams(text: str, value: int, milli: int) -> None:
    assert (int64_value_of(text), int64_milli_value_of(text)) == (value, milli)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (10**30, (5076944270305263616, 4089650035136921600)),  # 31 digits: inf.Dec, its low 64 bits
        (1e30, (0, 0)),  # 1e+30: int64Amount{1, 30}
        (2**63, (-(2**63), 0)),
        (2**63 - 1, (2**63 - 1, -1000)),
    ],
    ids=["int-1e30", "float-1e30", "int-2^63", "int-2^63-1"],
)
def test_json_numbers_read_as_their_text(value: int | float, expected: tuple[int, int]) -> None:
    """A JSON number reaches upstream as its text (``1e+30``, ``1000...``): the same path, the same int64."""
    assert (int64_value_of(value), int64_milli_value_of(value)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "1e999999999",
        "-1e999999999",
        "1234567890123456789e999999999",
        "1e-999999999",
        "1" * 5000,
        "1" * 5000 + "Ki",
        "0." + "0" * 5000 + "1",
        "1" * 5000 + "e-4990",
    ],
    ids=["1e999999999", "-1e999999999", "19-digits-e999999999", "1e-999999999", "5000-digits",
         "5000-digits-Ki", "5000-decimals", "5000-digits-e-4990"],
)  # fmt: skip
def test_oversized_text_gives_an_int64_at_once(text: str) -> None:
    """No power of ten beyond the text's own length is computed; ``int()`` refuses 4300 digits."""
    started = time.perf_counter()
    for read in (int64_value_of, int64_milli_value_of):
        assert INT64_MIN <= read(text) <= INT64_MAX
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    "text",
    ["1e99999999999999999999", "1e-9223372036854775809", "1e" + "9" * 5000],
    ids=["e-beyond-int64", "e-below-int64", "e-5000-digits"],
)
def test_exponent_beyond_int64_is_not_a_quantity(text: str) -> None:
    """``strconv.ParseInt`` refuses the exponent, so ``ParseQuantity`` refuses the quantity."""
    for read in (int64_value_of, int64_milli_value_of, value_of, parse_quantity, is_negative):
        with pytest.raises(QuantityError):
            read(text)


def test_exact_values_stay_exact_beyond_int64() -> None:
    """What ``Quantity.Cmp`` compares (a volume's capacity with a claim's request): no int64 there."""
    assert (value_of("1e30"), milli_value_of("1e30")) == (10**30, 10**33)
    assert value_of("10Ei") == 10 * 2**60  # as written: the API server stores 2^63-1
    assert value_of("-1.5") == -1


def test_exact_value_refuses_an_exponent_it_cannot_compute() -> None:
    assert parse_quantity(f"1e{EXACT_EXPONENT_LIMIT}") == 10**EXACT_EXPONENT_LIMIT
    started = time.perf_counter()
    for read in (parse_quantity, value_of, milli_value_of):
        with pytest.raises(QuantityError):
            read("1e999999999")
    assert time.perf_counter() - started < 0.5
    with pytest.raises(QuantityError) as info:
        parse_quantity(f"1e{EXACT_EXPONENT_LIMIT + 1}")
    assert str(info.value) == f"invalid quantity '1e{EXACT_EXPONENT_LIMIT + 1}': exponent out of range"


@given(
    st.from_regex(
        r"\A[+-]?[0-9]{0,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,12}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?\Z"
    )
)
@settings(max_examples=500, deadline=None)
def test_any_text_gives_an_int64_or_a_quantity_error(text: str) -> None:
    try:
        value, milli = int64_value_of(text), int64_milli_value_of(text)
    except QuantityError:
        return
    assert INT64_MIN <= value <= INT64_MAX
    assert INT64_MIN <= milli <= INT64_MAX


@pytest.mark.parametrize(
    ("text", "negative"),
    [("-1", True), ("-0", False), ("-0.000", False), ("-1e999999999", True), ("1e30", False), ("-.5m", True)],
)
def test_is_negative_reads_the_sign_without_the_value(text: str, negative: bool) -> None:
    assert is_negative(text) is negative


@pytest.mark.parametrize(
    ("a", "b", "total"),
    [
        (1, 2, 3),
        (INT64_MAX, 1, INT64_MIN),
        (INT64_MAX, INT64_MAX, -2),
        (INT64_MIN, -1, INT64_MAX),
        (-2, -INT64_MAX, INT64_MAX),  # the wrapped sum comes back when the pod is taken off
    ],
    ids=["small", "max+1", "max+max", "min-1", "back"],
)
def test_sums_wrap_around_as_go_int64(a: int, b: int, total: int) -> None:
    assert add_int64(a, b) == total
    assert wrap_int64(a + b) == total


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("-" + "1" * 5000, "-" + "1" * 5000),
        ("-1e999999999", "-1e999999999"),
        ("-10Ei", "-9223372036854775807"),
    ],
    ids=["5000-digits", "e999999999", "10Ei-capped"],
)
def test_oversized_negative_quantities_print_as_the_api_server_prints_them(text: str, shown: str) -> None:
    """What simulate's admission quotes when it refuses them (``Quantity.String()`` upstream)."""
    assert format_quantity(text) == shown
