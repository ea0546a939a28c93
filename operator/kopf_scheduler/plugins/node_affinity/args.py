"""NodeAffinityArgs: ``addedAffinity``, a node affinity the profile applies to every pod it schedules
(``types_pluginargs.go``; validated like ``ValidateNodeAffinityArgs``, preferred weights bounded)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kopf_scheduler.framework.args import ArgsError
from kopf_scheduler.plugins.node_affinity.terms import check_term

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
#: upstream parses these terms without checking their int32 weights; the same terms on a pod must weigh
#: 1-100 (the API server's ValidatePreferredSchedulingTerms), and the profile's terms add to theirs: 0-100
#: here, 0 being a term upstream ignores
MAX_PREFERRED_WEIGHT = 100


@dataclass
class Args:
    #: a ``v1.NodeAffinity`` object: ``requiredDuringSchedulingIgnoredDuringExecution`` (a node selector)
    #: and ``preferredDuringSchedulingIgnoredDuringExecution`` (weighted terms).
    added_affinity: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Args:
        for key in raw:
            if key != "addedAffinity":
                raise ArgsError(key, "unknown field; known: addedAffinity")
        added = raw.get("addedAffinity")
        if added is not None and not isinstance(added, Mapping):
            raise ArgsError("addedAffinity", f"must be an object, not {added!r}")
        return cls(added)

    def validate(self) -> None:
        added = self.added_affinity
        if added is None:
            return
        for key in added:
            if key not in (REQUIRED, PREFERRED):
                raise ArgsError(f"addedAffinity.{key}", f"unknown field; known: {PREFERRED}, {REQUIRED}")
        required = added.get(REQUIRED)
        if required is not None:
            path = f"addedAffinity.{REQUIRED}"
            if not isinstance(required, Mapping):
                raise ArgsError(path, "must be an object")
            terms = required.get("nodeSelectorTerms") or []
            if not isinstance(terms, list):
                raise ArgsError(f"{path}.nodeSelectorTerms", "must be a list")
            for i, term in enumerate(terms):
                _check(term, f"{path}.nodeSelectorTerms[{i}]")
        preferred = added.get(PREFERRED) or []
        if not isinstance(preferred, list):
            raise ArgsError(f"addedAffinity.{PREFERRED}", "must be a list")
        for i, item in enumerate(preferred):
            path = f"addedAffinity.{PREFERRED}[{i}]"
            if not isinstance(item, Mapping):
                raise ArgsError(path, "must be an object")
            weight = item.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ArgsError(f"{path}.weight", f"must be an integer, not {weight!r}")
            if not 0 <= weight <= MAX_PREFERRED_WEIGHT:
                raise ArgsError(
                    f"{path}.weight", f"must be in the range 0-{MAX_PREFERRED_WEIGHT}, not {weight}"
                )
            preference = item.get("preference") or {}
            # Terms without weight or requirements are ignored, so upstream does not parse them.
            if (
                weight
                and isinstance(preference, Mapping)
                and not (preference.get("matchExpressions") or preference.get("matchFields"))
            ):
                continue
            if weight:
                _check(preference, f"{path}.preference")


def _check(term: Any, path: str) -> None:
    problem = check_term(term)
    if problem is None:
        return
    where, _, message = problem.partition(": ")
    if not message:
        raise ArgsError(path, where)
    raise ArgsError(f"{path}.{where}", message)
