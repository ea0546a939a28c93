"""Every rejection reason and scheduling message the plugins and the framework keep as a module constant
appears as a literal in a test or a scenario: a test that only compares the constant with itself would
pass whatever the text says, and the text is what users read (FailedScheduling events, PodScheduled
conditions) and what kube-scheduler's must equal.

The constants are found, not listed: every public module-level string constant with a space in it under
``plugins/`` and ``framework/`` (reasons like ``node(s) had untolerated taint(s)``, message parts like
``preemption: ``). A constant with ``{}`` placeholders matches a literal with anything in their place.
Literals are read from the tests' Python files (string constants, implicit concatenation joined) and the
scenario and e2e YAML files; this file's own text does not count.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "kopf_scheduler"
TESTS = ROOT / "tests"


def _constants() -> dict[str, str]:
    """``module:NAME`` -> value, for the public string constants with a space in them."""
    found: dict[str, str] = {}
    for sub in ("plugins", "framework"):
        for path in sorted((PACKAGE / sub).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
                if isinstance(node, ast.AnnAssign):
                    target = node.target
                value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                if (
                    isinstance(target, ast.Name)
                    and target.id.isupper()
                    and not target.id.startswith("_")
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                    and " " in value.value
                ):
                    found[f"{path.relative_to(PACKAGE).with_suffix('')}:{target.id}"] = value.value
    return found


def _literals() -> list[str]:
    texts: list[str] = []
    for path in sorted(TESTS.rglob("*")):
        if path == Path(__file__).resolve() or not path.is_file():
            continue
        if path.suffix == ".py":
            texts += [
                n.value
                for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
        elif path.suffix in (".yaml", ".yml"):
            texts.append(path.read_text())
    return texts


CONSTANTS = _constants()
LITERALS = _literals()


def test_the_constants_are_found() -> None:
    assert len(CONSTANTS) >= 40
    assert (
        CONSTANTS["plugins/taint_toleration/plugin:ERR_REASON_UNTOLERATED"]
        == "node(s) had untolerated taint(s)"
    )


@pytest.mark.parametrize("where", sorted(CONSTANTS))
def test_reason_appears_as_a_literal_in_a_test_or_scenario(where: str) -> None:
    value = CONSTANTS[where]
    pattern = re.compile(".+?".join(re.escape(part) for part in value.split("{}")), re.DOTALL)
    assert any(pattern.search(text) for text in LITERALS), (
        f"{where} = {value!r} is compared only with itself: write the text literally in a test that "
        "exercises it"
    )
