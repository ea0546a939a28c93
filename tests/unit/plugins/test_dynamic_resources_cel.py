"""Device selectors in the DRA CEL environment: ``device.driver``, attributes and capacities by domain,
quantity and semver functions, and upstream's error texts."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kopf_scheduler.plugins.dynamic_resources import cel_cost, cel_env
from kopf_scheduler.plugins.dynamic_resources.cel_env import (
    SelectorCache,
    SelectorError,
    compile_selector,
    matches,
)

DRIVER = "gpu.example.com"
CONTEXT = cel_env.device_context(
    DRIVER,
    {
        "model": ("string", "a100"),
        "cores": ("int", 108),
        "mig": ("bool", True),
        "driverVersion": ("version", "1.2.3"),
        "numa.example.com/node": ("int", 1),
    },
    {"memory": Fraction(40 * 2**30)},
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "a100"', True),
        (
            'device.attributes["gpu.example.com"].cores > 100 && device.attributes["gpu.example.com"].mig',
            True,
        ),
        ('device.attributes["numa.example.com"].node == 1', True),
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))', False),
        ('device.capacity["gpu.example.com"].memory == quantity("40960Mi")', True),
        ('device.capacity["gpu.example.com"].memory.asInteger() == 42949672960', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('semver("v1.2", true) == semver("1.2.0")', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
        ('has(device.attributes["other.example.com"].model)', False),
        ('"model" in device.attributes["gpu.example.com"]', True),
        ('device.attributes["gpu.example.com"].model.lowerAscii().startsWith("a1")', True),
        ("[1, 2, 3].all(x, x > 0)", True),
    ],
)
def test_selector_matches(expression: str, expected: bool) -> None:
    assert matches(compile_selector(expression), CONTEXT) is expected


@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        ('device.attributes["other.example.com"].model == "x"', "no such key: model"),
        ('device.attributes["gpu.example.com"].model > 3', "no such overload"),
        (
            'quantity("lots") == quantity("1")',
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        (
            'device.capacity["gpu.example.com"].memory.asInteger() == quantity("1Mi").asInteger() / 0',
            "division by zero",
        ),
        ("device.driver", "CEL result of type string could not be converted to bool"),
    ],
)
def test_runtime_errors(expression: str, detail: str) -> None:
    with pytest.raises(SelectorError) as e:
        matches(compile_selector(expression), CONTEXT)
    assert not e.value.compile_error
    assert e.value.detail.startswith(detail)


# The texts k8s.io/dynamic-resource-allocation v0.34.10's CompileCELExpression gives (printed by a program
# built against it). A syntax error's text is upstream's up to the offending input: the ANTLR parser's list
# of what it expected there (" expecting {'[', '{', ...}") is not reproduced.
@pytest.mark.parametrize(
    ("expression", "detail"),
    [
        (
            "device.nothing == 1",
            "compilation failed: ERROR: <input>:1:7: undefined field 'nothing'\n"
            " | device.nothing == 1\n | ......^",
        ),
        (
            "device . nothing == 1",
            "compilation failed: ERROR: <input>:1:8: undefined field 'nothing'\n"
            " | device . nothing == 1\n | .......^",
        ),
        (
            "other == 1",
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'other' (in container '')\n"
            " | other == 1\n | ^",
        ),
        (
            "device.driver == x",
            "compilation failed: ERROR: <input>:1:18: undeclared reference to 'x' (in container '')\n"
            " | device.driver == x\n | .................^",
        ),
        (
            "[1].all(x, y > 0)",
            "compilation failed: ERROR: <input>:1:12: undeclared reference to 'y' (in container '')\n"
            " | [1].all(x, y > 0)\n | ...........^",
        ),
        (
            "device.driver.frobnicate()",
            "compilation failed: ERROR: <input>:1:25: "
            "undeclared reference to 'frobnicate' (in container '')\n"
            " | device.driver.frobnicate()\n | ........................^",
        ),
        (
            "device.driver.frob (1)",
            "compilation failed: ERROR: <input>:1:20: undeclared reference to 'frob' (in container '')\n"
            " | device.driver.frob (1)\n | ...................^",
        ),
        (
            "frob(1) == 1",
            "compilation failed: ERROR: <input>:1:5: undeclared reference to 'frob' (in container '')\n"
            " | frob(1) == 1\n | ....^",
        ),
        (
            "device.driver ==",
            "compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>'\n"
            " | device.driver ==\n | ................^",
        ),
        (
            "device.driver in [1, 2",
            "compilation failed: ERROR: <input>:1:23: Syntax error: mismatched input '<EOF>'\n"
            " | device.driver in [1, 2\n | ......................^",
        ),
    ],
)
def test_compile_errors(expression: str, detail: str) -> None:
    compiled = compile_selector(expression)
    assert compiled.runner is None and compiled.error == detail
    with pytest.raises(SelectorError) as e:
        matches(compiled, CONTEXT)
    assert e.value.compile_error and e.value.detail == detail


def test_cost_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel_cost, "MAX_COST", 500)
    with pytest.raises(SelectorError) as e:
        matches(
            compile_selector("[1, 2, 3, 4, 5, 6, 7, 8].all(x, [1, 2, 3, 4, 5, 6, 7, 8].all(y, x + y > 0))"),
            CONTEXT,
        )
    assert e.value.detail == "operation cancelled: actual cost limit exceeded"


def test_compiled_once() -> None:
    cache = SelectorCache(size=2)
    first = cache.get_or_compile("device.driver == 'a'")
    assert cache.get_or_compile("device.driver == 'a'") is first
    cache.get_or_compile("device.driver == 'b'")
    cache.get_or_compile("device.driver == 'c'")
    assert cache.get_or_compile("device.driver == 'a'") is not first  # evicted: least recently used
