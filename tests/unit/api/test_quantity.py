"""Kubernetes quantities, rounded up like ``Quantity.Value()`` / ``MilliValue()``."""

from fractions import Fraction

import pytest

from kopf_scheduler.api.quantity import QuantityError, milli_value_of, parse_quantity, value_of


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
    assert milli_value_of(text) == milli
    assert value_of(text) == value


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
