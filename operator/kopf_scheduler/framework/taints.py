"""Taints and tolerations as component-helpers judges them (``v1.Toleration.ToleratesTaint``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(str(raw.get("key") or ""), str(raw.get("value") or ""), str(raw.get("effect") or ""))

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Toleration:
        return cls(
            str(raw.get("key") or ""),
            str(raw.get("operator") or "Equal"),
            str(raw.get("value") or ""),
            str(raw.get("effect") or ""),
        )

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        # An empty key with operator Exists matches every key.
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator == "Equal":
            return self.value == taint.value
        return False


def tolerated(taint: Taint, tolerations: tuple[Toleration, ...]) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def first_untolerated(
    taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[str]
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates (upstream's
    ``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint.effect in effects and not tolerated(taint, tolerations):
            return taint
    return None
