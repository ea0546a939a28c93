"""Plugin arguments (``framework/args.py``): gate-dependent defaults applied once decoded, fields kept for
them never read from ``args``, upstream's ``field.Error`` bodies, ``validateFunctionShape``, and the gates
in force reaching the arguments when a profile is built."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.errors import ProfileError
from kopf_scheduler.api.feature_gates import FeatureGates
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.args import (
    ArgsError,
    ShapePoint,
    bad_value,
    decode_args,
    forbidden,
    invalid,
    not_supported,
    required,
    validate_shape,
)
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry


@dataclasses.dataclass
class _Args:
    timeout: int = 0
    scoring: bool = dataclasses.field(default=False, init=False)

    def set_defaults(self, gates: FeatureGates) -> None:
        self.scoring = gates.enabled("StorageCapacityScoring")
        if not self.timeout and self.scoring:
            self.timeout = 10


def test_gate_dependent_defaults_follow_the_gates_given() -> None:
    assert (decode_args(_Args, {}).timeout, decode_args(_Args, {}).scoring) == (10, True)  # 1.37's
    at_1_36 = decode_args(_Args, {}, FeatureGates((1, 36)))
    assert (at_1_36.timeout, at_1_36.scoring) == (0, False)
    assert decode_args(_Args, {"timeout": 3}).timeout == 3
    with pytest.raises(ArgsError) as e:
        decode_args(_Args, {"scoring": True})
    assert str(e.value) == "scoring: unknown field; known: timeout"


@pytest.mark.parametrize(
    ("value", "text"),
    [(-1, "-1"), (1.5, "1.5"), (True, "true"), ("a/b", '"a/b"'), ([{"Score": 1}], '[{"Score":1}]')],
)
def test_bad_values_print_as_upstream(value: Any, text: str) -> None:
    assert bad_value(value) == text


def test_field_error_bodies() -> None:
    assert invalid(3, "too big") == "Invalid value: 3: too big"
    assert required("at least one") == "Required value: at least one"
    assert forbidden("gate off") == "Forbidden: gate off"
    assert not_supported("X", ["A", "B"]) == 'Unsupported value: "X": supported values: "A", "B"'


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ([], "shape: Required value: at least one point must be specified"),
        (
            [(3, 3), (1, 1)],
            "shape[1].utilization: Invalid value: 1: values must be sorted in increasing order",
        ),
        # the sorting error comes first, then each point's ranges in order
        (
            [(-1, 1), (10, -1), (20, 11), (101, 1)],
            "shape[0].utilization: Invalid value: -1: not in valid range [0, 100]",
        ),
        ([(0, 0), (10, -1)], "shape[1].score: Invalid value: -1: not in valid range [0, 10]"),
        ([(0, 0), (100, 10)], None),
    ],
)
def test_validate_shape_as_upstream(shape: list[tuple[int, int]], message: str | None) -> None:
    points = [ShapePoint(*p) for p in shape]
    if message is None:
        validate_shape(points, "shape")
        return
    with pytest.raises(ArgsError) as e:
        validate_shape(points, "shape")
    assert str(e.value) == message


def _build(gates: FeatureGates, args: dict[str, Any]) -> None:
    spec = {"schedulerName": "s", "pluginConfig": [{"name": "DynamicResources", "args": args}]}
    build_framework(
        parse_profile(spec),
        new_registry(autoload=False),
        default_plugins(),
        FakeAPI(strict=True),
        feature_gates=gates,
    )


def test_the_profile_is_built_with_the_gates_in_force() -> None:
    _build(FeatureGates((1, 37)), {"bindingTimeout": "5m"})
    with pytest.raises(ProfileError) as e:
        _build(FeatureGates((1, 35)), {"bindingTimeout": "5m"})
    assert str(e.value) == (
        "spec.pluginConfig[0].args.bindingTimeout: Forbidden: DRADeviceBindingConditions or "
        "DRAResourceClaimDeviceStatus feature gate is disabled"
    )
