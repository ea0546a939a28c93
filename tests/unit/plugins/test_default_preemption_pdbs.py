"""PodDisruptionBudgets as the scheduler keeps them: parsed from policy/v1 objects, added, replaced and
deleted through the scheduler's intake, and read by preemption through the handle."""

from __future__ import annotations

from typing import Any

import pytest
from _preemption_kit import PROFILE

from kopf_scheduler.framework.disruption_budgets import BudgetParseError, DisruptionBudget
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.simulate.client import SimulatedCluster


def pdb(name: str = "b", namespace: str | None = "apps", allowed: Any = 1, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta,
        "spec": spec or {"selector": {"matchLabels": {"app": "x"}}},
        "status": {"disruptionsAllowed": allowed, "disruptedPods": {"gone-1": "2026-01-01T00:00:00Z"}},
    }


def test_parse() -> None:
    budget = DisruptionBudget.parse(pdb())
    assert (budget.key, budget.disruptions_allowed, budget.disrupted_pods) == (
        "apps/b",
        1,
        frozenset({"gone-1"}),
    )
    assert budget.covers("apps", {"app": "x", "more": "y"})
    assert not budget.covers("other", {"app": "x"})
    assert not budget.covers("apps", {"app": "y"})
    assert DisruptionBudget.parse(pdb(namespace=None)).namespace == "default"


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        pytest.param({"metadata": {}}, "metadata.name: required", id="no-name"),
        pytest.param(
            pdb(allowed="1"), "status.disruptionsAllowed: must be an integer, not '1'", id="allowed-str"
        ),
    ],
)
def test_parse_errors(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(BudgetParseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        DisruptionBudget.parse(obj)


@pytest.mark.parametrize(
    ("spec", "labels", "covered"),
    [
        pytest.param({}, {"app": "x"}, False, id="no-selector"),
        pytest.param({"selector": {}}, {"app": "x"}, False, id="empty-selector"),
        pytest.param(
            {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["x", "y"]}]}},
            {"app": "y"},
            True,
            id="expression",
        ),
        pytest.param(
            {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}},
            {"app": "y"},
            False,
            id="invalid-selector",
        ),
    ],
)
def test_selectors(spec: dict[str, Any], labels: dict[str, str], covered: bool) -> None:
    obj = pdb()
    obj["spec"] = spec
    assert DisruptionBudget.parse(obj).covers("apps", labels) is covered


def test_scheduler_intake_feeds_every_profile() -> None:
    sched = Scheduler(SimulatedCluster())
    sched.use_default_profiles((PROFILE, "other"))
    sched.add_pdb(pdb("a", allowed=1))
    sched.add_pdb(pdb("b", allowed=0))
    sched.update_pdb(pdb("a", allowed=3))
    sched.add_pdb(
        {"metadata": {"name": "broken"}, "status": {"disruptionsAllowed": "many"}}
    )  # logged, ignored
    for name in (PROFILE, "other"):
        assert {b.key: b.disruptions_allowed for b in sched.profiles[name].pdbs()} == {
            "apps/a": 3,
            "apps/b": 0,
        }
    sched.delete_pdb(pdb("a"))
    sched.delete_pdb(pdb("unknown"))
    assert [b.key for b in sched.profiles[PROFILE].pdbs()] == ["apps/b"]


def test_the_handle_rng_is_the_schedulers() -> None:
    sched = Scheduler(SimulatedCluster())
    sched.use_default_profiles((PROFILE,))
    assert sched.profiles[PROFILE].rng is sched.rng
