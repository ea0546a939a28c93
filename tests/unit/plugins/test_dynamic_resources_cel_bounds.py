"""Bounds on a device selector's evaluation: upstream's cost limit in upstream's units, and the time one
claim's selectors may hold the scheduling loop in one attempt (``cel_env.CLAIM_SECONDS``).

The selectors here are a few hundred characters. ``STALL`` is what the issue saw: cel-go evaluates it
to true (cost 528,517, 0.3 s), celpy took 5.7 s per device with the parse-tree visits counted as cost
(6.6 s with upstream's units). ``OVER_COST`` (2,576 characters, most of them two strings) is cheap in
Python, but cel-go has counted 1,000,438 units when it stops it, after 0.2 ms: the parse-tree visits let
it through.
"""

from __future__ import annotations

import time

import pytest
from _dra_kit import DRIVER, Handle, claim, device, device_class, node, objects, pod, request, resource_slice

from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.objects.resource_slices import Device
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.status import Code
from kopf_scheduler.plugins.dynamic_resources import Args, DynamicResources, cel_env
from kopf_scheduler.plugins.dynamic_resources.cel_env import (
    Clock,
    DeviceMatcher,
    SelectorError,
    SelectorTimeout,
)

_LIST = "[" + ",".join(str(i) for i in range(32)) + "]"
STALL = (
    f"{_LIST}.all(a, {_LIST}.all(b, {_LIST}.all(c, "
    f'device.attributes["{DRIVER}"].model.lowerAscii() + string(a * b * c) != "x"))) '
    f'&& device.driver == "{DRIVER}"'
)
_TEN = "[0,1,2,3,4,5,6,7,8,9]"
OVER_COST = f'{_TEN}.all(i, {_TEN}.all(j, !"{"abcdefghij" * 200}".contains("{"klmnopqrst" * 50}")))'
#: far below what one attempt may take when the selector ran to its end; far above the claim's bound
SECONDS = 1.0


def _filter(expression: str) -> tuple[DynamicResources, float, object]:
    gpu = device_class("gpu", f'device.driver == "{DRIVER}"')
    slices = resource_slice("n1", device("d0", model="a100"), device("d1", model="a100"))
    selector = {"cel": {"expression": expression}}
    pl = DynamicResources(Args(), Handle(objects(gpu, slices, claim("c", request(selectors=[selector])))))
    state, subject = CycleState(), pod("p", "c")
    assert pl.pre_filter(state, subject, [])[1] is None
    start = time.perf_counter()
    status = Framework.run_filters([pl], state, subject, node("n1"))
    return pl, time.perf_counter() - start, status


def test_a_stalling_selector_fails_the_attempt_within_the_bound() -> None:
    _, elapsed, status = _filter(STALL)
    assert elapsed < SECONDS
    assert status is not None and status.code == Code.ERROR
    assert status.reasons == (
        'running "DynamicResources" filter plugin: claim default/c: selector #0 on device '
        "gpu.example.com/n1/d0: CEL runtime error: operation interrupted: the selectors of claim default/c "
        "took more than 100ms to evaluate in this scheduling attempt",
    )


def test_a_selector_over_upstreams_cost_fails_with_upstreams_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel_env, "CLAIM_SECONDS", 5.0)  # the cost decides, however loaded the machine
    _, elapsed, status = _filter(OVER_COST)
    assert elapsed < SECONDS
    assert status is not None and status.code == Code.ERROR
    assert status.reasons == (
        'running "DynamicResources" filter plugin: claim default/c: selector #0 on device '
        "gpu.example.com/n1/d0: CEL runtime error: operation cancelled: actual cost limit exceeded",
    )


def test_the_next_attempt_starts_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A time-out is not the device's verdict: the next attempt evaluates the selector again."""
    monkeypatch.setattr(cel_env, "CLAIM_SECONDS", 0.0)
    pl, _, status = _filter(f'device.attributes["{DRIVER}"].model == "a100"')
    assert status is not None and status.code == Code.ERROR
    assert "took more than 0ms" in status.reasons[0]
    monkeypatch.setattr(cel_env, "CLAIM_SECONDS", 0.1)
    state, subject = CycleState(), pod("p", "c")
    pl.pre_filter(state, subject, [])
    assert Framework.run_filters([pl], state, subject, node("n1")) is None


def _device(name: str) -> Device:
    return Device(name, {"model": ("string", "a100")}, {})


def test_verdicts_found_before_the_clock_ran_out_are_kept() -> None:
    matcher, expression = DeviceMatcher(), f'device.attributes["{DRIVER}"].model == "a100"'
    d0, d1 = _device("d0"), _device("d1")
    assert matcher.matches(expression, DRIVER, d0, Clock())
    spent = Clock(0.0)
    assert matcher.matches(expression, DRIVER, d0, spent)  # known: nothing to evaluate
    with pytest.raises(SelectorTimeout):
        matcher.matches(expression, DRIVER, d1, spent)
    assert matcher.matches(expression, DRIVER, d1, Clock())  # the time-out was not kept


def test_a_clock_is_charged_what_evaluations_take() -> None:
    clock, matcher = Clock(10.0), DeviceMatcher()
    matcher.matches(f'device.attributes["{DRIVER}"].model == "a100"', DRIVER, _device("d0"), clock)
    assert 0 < 10.0 - clock.left < SECONDS
    with pytest.raises(SelectorError):
        matcher.matches(OVER_COST, DRIVER, _device("d1"), clock)
