"""The SchedulingProfiles shipped in profiles/ and examples/ are accepted by an operator running with its
default bounds (``api/bounds.py``): no reserved scheduler name, no TLS file outside the TLS directory, no
extender at a metadata address, no timeout beyond the limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.profile import parse_profile

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "profiles").glob("*.yaml")) + sorted((ROOT / "examples").rglob("*.yaml"))


def _profiles(path: Path) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return [d for d in docs if d.get("kind") == "SchedulingProfile"]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_shipped_profiles_are_within_the_operators_default_bounds(path: Path) -> None:
    for doc in _profiles(path):
        assert parse_profile(doc, ProfileBounds()).scheduler_name == doc["spec"]["schedulerName"]


def test_there_are_profiles_to_check() -> None:
    assert sum(len(_profiles(p)) for p in FILES) >= 3
