"""Consumable capacity (``DRAConsumableCapacity``; ``consumable_capacity.go`` of the structured allocator at
v0.37.2): what a request consumes of a device's capacities, and whether it fits.

- What is consumed of each capacity of the device: without a request for it, the policy's ``default``
  (else the whole capacity); with one, the request rounded up by the policy: to ``validRange``'s ``min``
  and then to the next ``step`` above it, or to the first of ``validValues`` not below it (a request
  above them all stays as asked).
- It fits when the request names no capacity the device lacks, what is consumed keeps to the policy
  (at most ``max``, on a step, one of the valid values; the default always passes), and with what is
  allocated already (in the cluster, and in this search) stays within the capacity.
- Steps are counted in thousandths when ``DRAFractionalCapacityRange`` is on and ``min``, ``max`` and
  ``step`` are whole thousandths (``step`` at least ``1m``), else in whole units (each rounded up).
- A request that cannot be rounded (past the int64 range upstream counts in) is an error for every node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction

from kopf_scheduler.api.quantity import INT64_MAX, format_quantity, quantity_text
from kopf_scheduler.framework.objects.resource_slices import Amount, CapacityPolicy, Device

#: a request's ``capacity.requests``: (capacity, amount, its text) each
Requests = Sequence[tuple[str, Fraction, str]]
_BINARY = re.compile(r"[KMGTPE]i$")
_EXPONENT = re.compile(r"[eE][+-]?\d+$")


class CapacityError(Exception):
    """The request cannot be rounded by the device's policy; the message is upstream's wrapped error."""


def consumed(requests: Requests | None, device: Device, fractional: bool) -> dict[str, Amount] | None:
    """What a request takes of each capacity of the device; None when it names one the device lacks.
    Raises ``CapacityError``."""
    asked = {name: Amount(value, text) for name, value, text in requests or ()}
    if any(name not in device.capacity for name in asked):
        return None
    policies = device.policies or {}
    texts = device.capacity_text or {}
    out = {}
    for name, value in device.capacity.items():
        policy = policies.get(name)
        request = asked.get(name)
        if request is None:
            found = policy.default if policy is not None and policy.default is not None else None
            amount = found or Amount(value, texts.get(name, str(value)))
        elif policy is None:
            amount = request
        elif policy.minimum is not None:
            amount = _round_up_range(name, request, policy, fractional)
        elif policy.valid_values:
            amount = next((v for v in policy.valid_values if request.value <= v.value), request)
        else:
            amount = request
        if amount.value < 0:
            raise CapacityError(f'capacity "{name}": capacity value is negative')
        out[name] = amount
    return out


def fits(
    take: Mapping[str, Amount],
    device: Device,
    fractional: bool,
    allocated: Mapping[str, Fraction] | None,
    allocating: Mapping[str, Fraction] | None,
) -> bool:
    """``take`` (``consumed``) keeps to the device's policies and fits beside ``allocated`` (in the
    cluster) and ``allocating`` (in this search)."""
    policies = device.policies or {}
    for name, capacity in device.capacity.items():
        amount = take[name].value
        policy = policies.get(name)
        if policy is not None and _violates(amount, policy, fractional):
            return False
        total = amount + (allocated or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if total > capacity:
            return False
    return True


def _violates(amount: Fraction, policy: CapacityPolicy, fractional: bool) -> bool:
    if policy.default is not None and amount == policy.default.value:
        return False
    if policy.minimum is not None or policy.maximum is not None or policy.step is not None:
        if policy.maximum is not None and amount > policy.maximum.value:
            return True
        if policy.step is not None:
            minimum = policy.minimum.value if policy.minimum is not None else Fraction(0)
            if _use_milli(policy, fractional):
                requested = _milli(amount)
                if requested is None:
                    return True
                step, low = _ceil(policy.step.value * 1000), _ceil(minimum * 1000)
            else:
                requested, step, low = _ceil(amount), _ceil(policy.step.value), _ceil(minimum)
            return step == 0 or (requested - low) % step != 0
        return False
    if policy.valid_values:
        return all(amount != v.value for v in policy.valid_values)
    return False


def _round_up_range(name: str, request: Amount, policy: CapacityPolicy, fractional: bool) -> Amount:
    assert policy.minimum is not None
    if request.value < policy.minimum.value:
        return policy.minimum
    step = policy.step
    if step is None:
        return request
    shown = format_quantity(request.text)
    if _use_milli(policy, fractional):
        requested = _milli(request.value)
        if requested is None:
            raise CapacityError(
                f'capacity "{name}": {_NOT_REPRESENTABLE}: request {shown} is not a representable milli value'
            )
        step_milli, low = _ceil(step.value * 1000), _ceil(policy.minimum.value * 1000)
        n = -(-(requested - low) // step_milli)
        if n > (INT64_MAX - low) // step_milli:
            raise CapacityError(
                f'capacity "{name}": {_NOT_REPRESENTABLE}: rounding request {shown} up to the next step '
                "passes the milli-value range"
            )
        return _formatted(Fraction(low + step_milli * n, 1000), step.text)
    if request.value > INT64_MAX:
        raise CapacityError(f'capacity "{name}": {_NOT_REPRESENTABLE}: request {shown} exceeds MaxInt64')
    requested, step_int, low = _ceil(request.value), _ceil(step.value), _ceil(policy.minimum.value)
    n = -(-(requested - low) // step_int)
    if low >= 0 and n > (INT64_MAX - low) // step_int:
        raise CapacityError(
            f'capacity "{name}": {_NOT_REPRESENTABLE}: rounding request {shown} up to the next step passes '
            "MaxInt64"
        )
    return _formatted(Fraction(low + step_int * n), step.text)


_NOT_REPRESENTABLE = "capacity request cannot be represented in the device's range arithmetic"


def _formatted(value: Fraction, like: str) -> Amount:
    """``value`` printed in the format of the quantity ``like`` (``resource.NewQuantity(v, format)``)."""
    like = like.strip()
    binary = _BINARY.search(like) is not None
    return Amount(value, quantity_text(value, binary, _EXPONENT.search(like) is not None))


def _use_milli(policy: CapacityPolicy, fractional: bool) -> bool:
    if not fractional:
        return False
    for bound in (policy.minimum, policy.maximum, policy.step):
        if bound is not None and _milli(bound.value) is None:
            return False
    return policy.step is None or _ceil(policy.step.value * 1000) >= 1


def _milli(value: Fraction) -> int | None:
    """The value in thousandths when that is exact and within int64 (``safeMilliValue``)."""
    milli = value * 1000
    if milli.denominator != 1 or abs(milli.numerator) > INT64_MAX:
        return None
    return milli.numerator


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)
