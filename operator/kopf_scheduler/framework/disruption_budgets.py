"""PodDisruptionBudgets (``policy/v1``) as preemption reads them: which pods a budget covers and how many
more of them may be disrupted now.

Only what kube-scheduler's preemption uses is kept: the namespace, the selector, ``status.disruptionsAllowed``
and ``status.disruptedPods`` (pods already being disrupted, which must not be counted twice). A budget
whose selector cannot be parsed is kept and matches nothing, as upstream treats it.

The store is written by the scheduler's event intake and read by plugins through the handle; ``list``
returns the same tuple until the next change, so readers pay nothing per scheduling cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.selectors import LabelSelector, SelectorError


class BudgetParseError(ValueError):
    """The object cannot be read as a PodDisruptionBudget; the message names the field path."""


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    #: None when the budget has no selector or an invalid one: it then covers no pod
    selector: LabelSelector | None
    disruptions_allowed: int
    #: names of pods the API server has already admitted an eviction for
    disrupted_pods: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Whether the budget counts a pod with these labels; an empty selector covers nothing here
        (kube-scheduler's preemption skips empty selectors, unlike the disruption controller)."""
        if namespace != self.namespace or not labels:
            return False
        selector = self.selector
        return selector is not None and not selector.empty and selector.matches(labels)

    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> DisruptionBudget:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or not isinstance(status, Mapping):
            raise BudgetParseError("metadata/spec/status: must be objects")
        name = str(meta.get("name") or "")
        if not name:
            raise BudgetParseError("metadata.name: required")
        allowed = status.get("disruptionsAllowed") or 0
        if isinstance(allowed, bool) or not isinstance(allowed, int):
            raise BudgetParseError(f"status.disruptionsAllowed: must be an integer, not {allowed!r}")
        disrupted = status.get("disruptedPods") or {}
        if not isinstance(disrupted, Mapping):
            raise BudgetParseError("status.disruptedPods: must be a map of pod names to timestamps")
        raw_selector = spec.get("selector")
        try:
            selector = LabelSelector.parse(raw_selector) if isinstance(raw_selector, Mapping) else None
        except SelectorError:
            selector = None
        return cls(
            namespace=str(meta.get("namespace") or "default"),
            name=name,
            selector=selector,
            disruptions_allowed=allowed,
            disrupted_pods=frozenset(str(p) for p in disrupted),
        )


class DisruptionBudgets:
    """The budgets the scheduler knows, by ``namespace/name``."""

    __slots__ = ("_budgets", "_listed")

    def __init__(self) -> None:
        self._budgets: dict[str, DisruptionBudget] = {}
        self._listed: tuple[DisruptionBudget, ...] | None = ()

    def set(self, budget: DisruptionBudget) -> None:
        self._budgets[budget.key] = budget
        self._listed = None

    def delete(self, namespace: str, name: str) -> DisruptionBudget | None:
        removed = self._budgets.pop(f"{namespace}/{name}", None)
        if removed is not None:
            self._listed = None
        return removed

    def list(self) -> tuple[DisruptionBudget, ...]:
        if self._listed is None:
            self._listed = tuple(self._budgets.values())
        return self._listed

    def __len__(self) -> int:
        return len(self._budgets)
