"""deploy/rbac.yaml grants the watched kinds exactly what their informers use: list and watch."""

from __future__ import annotations

from pathlib import Path

import yaml

from kopf_scheduler.framework.objects import WATCHED_KINDS

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"


def _cluster_role_verbs() -> dict[tuple[str, str], set[str]]:
    role = next(doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc["kind"] == "ClusterRole")
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def test_every_watched_kind_may_be_listed_and_watched_and_nothing_more() -> None:
    verbs = _cluster_role_verbs()
    for kind in WATCHED_KINDS:
        assert verbs.get((kind.group, kind.plural)) == {"list", "watch"}, kind
