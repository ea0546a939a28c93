"""Tolerations against taints, as ``v1.Toleration.ToleratesTaint`` judges them."""

import pytest

from kopf_scheduler.framework.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    Taint,
    Toleration,
    first_untolerated,
    tolerated,
)
from kopf_scheduler.plugins.node_unschedulable.plugin import UNSCHEDULABLE_TAINT

DEDICATED = Taint("dedicated", "gpu", NO_SCHEDULE)


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"operator": "Exists"}, DEDICATED, True),
        ({"operator": "Exists"}, Taint("other", "x", NO_EXECUTE), True),
        ({"operator": "Exists", "effect": NO_SCHEDULE}, Taint("other", "x", NO_EXECUTE), False),
        ({"key": "dedicated", "operator": "Exists"}, DEDICATED, True),
        ({"key": "dedicated", "operator": "Equal", "value": "gpu"}, DEDICATED, True),
        ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, DEDICATED, False),
        ({"key": "dedicated", "value": "gpu"}, DEDICATED, True),
        ({"key": "dedicated"}, DEDICATED, False),
        ({"key": "dedicated", "operator": "Exists", "effect": NO_EXECUTE}, DEDICATED, False),
        ({"key": "dedicated", "operator": "Exists", "effect": NO_SCHEDULE}, DEDICATED, True),
        ({"key": "other", "operator": "Exists"}, DEDICATED, False),
        ({"key": "dedicated", "operator": "Gt", "value": "gpu"}, DEDICATED, False),
        ({"key": "k", "operator": "Equal"}, Taint("k", "", PREFER_NO_SCHEDULE), True),
    ],
    ids=[
        "empty-key-exists-tolerates-all",
        "empty-key-exists-any-effect",
        "empty-key-exists-effect-mismatch",
        "key-exists",
        "equal-value",
        "equal-value-mismatch",
        "operator-defaults-to-equal",
        "equal-empty-value-vs-value",
        "effect-mismatch",
        "effect-match",
        "key-mismatch",
        "unknown-operator",
        "equal-empty-values",
    ],
)
def test_tolerates(toleration: dict[str, str], taint: Taint, expected: bool) -> None:
    assert Toleration.parse(toleration).tolerates(taint) is expected


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ([], False),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": NO_SCHEDULE}], True),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], True),
        ([{"operator": "Exists"}], True),
        ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": NO_EXECUTE}], False),
        ([{"key": "dedicated", "operator": "Exists"}, {"operator": "Exists", "effect": NO_SCHEDULE}], True),
    ],
    ids=["none", "exact", "any-effect", "wildcard", "wrong-effect", "second-toleration"],
)
def test_the_node_unschedulable_toleration(tolerations: list[dict[str, str]], expected: bool) -> None:
    assert Taint("node.kubernetes.io/unschedulable", "", NO_SCHEDULE) == UNSCHEDULABLE_TAINT
    assert tolerated(UNSCHEDULABLE_TAINT, tuple(Toleration.parse(t) for t in tolerations)) is expected


def test_first_untolerated_skips_other_effects_and_tolerated_taints() -> None:
    taints = (
        Taint("soft", "", PREFER_NO_SCHEDULE),
        Taint("ok", "", NO_SCHEDULE),
        Taint("bad", "1", NO_EXECUTE),
        Taint("worse", "", NO_SCHEDULE),
    )
    tolerations = (Toleration.parse({"key": "ok", "operator": "Exists"}),)
    effects = frozenset({NO_SCHEDULE, NO_EXECUTE})
    assert first_untolerated(taints, tolerations, effects) == Taint("bad", "1", NO_EXECUTE)
    assert first_untolerated(taints[:2], tolerations, effects) is None
