"""DynamicResourcesArgs as v1.37.2 decodes, defaults and validates them: upstream's
``TestValidateDynamicResourcesArgs`` (``pkg/scheduler/apis/config/validation``) as literals, with the
messages of ``ValidateDynamicResourcesArgs``, and ``bindingTimeout``'s default under the gates in force."""

from __future__ import annotations

from typing import Any

import pytest

from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.plugins.dynamic_resources import Args

ON = FeatureGates((1, 37))
#: DRADeviceBindingConditions=false (upstream's ``bindingConditionsDisabled``)
NO_BINDING_CONDITIONS = FeatureGates((1, 37), {"DRADeviceBindingConditions": False})
#: DRAResourceClaimDeviceStatus=false (``deviceStatusDisabled``; locked on from 1.37, so at 1.36)
NO_DEVICE_STATUS = FeatureGates((1, 36), {"DRAResourceClaimDeviceStatus": False})
_GATES_OFF = "DRADeviceBindingConditions or DRAResourceClaimDeviceStatus feature gate is disabled"
#: DRASchedulerFilterTimeout=false (upstream's ``filterTimeoutDisabled``)
NO_FILTER_TIMEOUT = FeatureGates((1, 37), {"DRASchedulerFilterTimeout": False})


def _args(raw: dict[str, Any], gates: FeatureGates = ON) -> Args:
    args = decode_args(Args, raw, gates)
    args.validate()
    return args


@pytest.mark.parametrize(
    ("raw", "gates", "message"),
    [
        pytest.param({"filterTimeout": "10s", "bindingTimeout": "10m"}, ON, None, id="valid-args-default"),
        pytest.param({}, ON, None, id="valid-args-disabled"),
        pytest.param(
            {"filterTimeout": "-1s"},
            ON,
            'filterTimeout: Invalid value: "-1s": must be zero or positive',
            id="negative-filter-timeout",
        ),
        pytest.param(
            {"filterTimeout": "10s"},
            NO_FILTER_TIMEOUT,
            "filterTimeout: Forbidden: DRASchedulingFilterTimeout feature gate is disabled",
            id="filter-timeout-set-but-disabled",
        ),
        pytest.param({}, NO_FILTER_TIMEOUT, None, id="filter-timeout-unset-and-disabled"),
        pytest.param({"bindingTimeout": "30s"}, ON, None, id="valid-binding-timeout"),
        pytest.param(
            {"bindingTimeout": "0s"},
            ON,
            'bindingTimeout: Invalid value: "0s": must be at least 1 second',
            id="binding-timeout-0s",
        ),
        pytest.param(
            {"bindingTimeout": "-1s"},
            ON,
            'bindingTimeout: Invalid value: "-1s": must be at least 1 second',
            id="binding-timeout-negative",
        ),
        pytest.param(
            {"bindingTimeout": "1s"},
            NO_BINDING_CONDITIONS,
            f"bindingTimeout: Forbidden: {_GATES_OFF}",
            id="binding-timeout-set-but-binding-conditions-disabled",
        ),
        pytest.param(
            {"bindingTimeout": "1s"},
            NO_DEVICE_STATUS,
            f"bindingTimeout: Forbidden: {_GATES_OFF}",
            id="binding-timeout-set-but-device-status-disabled",
        ),
    ],
)
def test_validation_as_upstream(raw: dict[str, Any], gates: FeatureGates, message: str | None) -> None:
    if message is None:
        _args(raw, gates)
        return
    with pytest.raises(ArgsError) as e:
        _args(raw, gates)
    assert str(e.value) == message


@pytest.mark.parametrize(
    ("gates", "timeout"),
    [
        (ON, 600.0),
        (FeatureGates((1, 36)), 600.0),
        (FeatureGates((1, 35)), None),
        (NO_BINDING_CONDITIONS, None),
    ],
    ids=["1.37", "1.36", "1.35", "binding-conditions-off"],
)
def test_binding_timeout_defaults_to_ten_minutes_while_both_gates_are_on(
    gates: FeatureGates, timeout: float | None
) -> None:
    args = _args({}, gates)
    assert (args.filter_timeout_seconds, args.binding_timeout_seconds) == (10.0, timeout)
    assert _args({"bindingTimeout": "1m30s"}).binding_timeout_seconds == 90.0


def test_binding_timeout_is_refused_where_its_gate_is_alpha() -> None:
    # DRADeviceBindingConditions is alpha and off at 1.34 and 1.35
    with pytest.raises(ArgsError) as e:
        _args({"bindingTimeout": "5m"}, FeatureGates((1, 35)))
    assert str(e.value) == f"bindingTimeout: Forbidden: {_GATES_OFF}"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"bindingTimeout": 30}, "bindingTimeout: must be a duration string, not 30"),
        ({"bindingTimeout": "30"}, 'bindingTimeout: time: missing unit in duration "30"'),
        (
            {"bindingTimeout": "25h"},
            "bindingTimeout: must be at most 24h0m0s (PreBind holds the pod's binding that long), "
            "not 25h0m0s",
        ),
        ({"bindTimeout": "1s"}, "bindTimeout: unknown field; known: bindingTimeout, filterTimeout"),
    ],
    ids=["not-a-string", "no-unit", "above-a-day", "unknown-field"],
)
def test_decoding_and_bounds(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as e:
        _args(raw)
    assert str(e.value) == message


def test_filter_timeout_has_no_default_while_its_gate_is_off() -> None:
    assert _args({}, NO_FILTER_TIMEOUT).filter_timeout_seconds is None
    assert _args({"filterTimeout": "0s"}).filter_timeout_seconds == 0.0
