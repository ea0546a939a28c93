"""The SchedulingProfiles shipped in profiles/ and examples/ are accepted by an operator running with its
default bounds (``api/bounds.py``): no reserved scheduler name, no TLS file outside the TLS directory, no
extender at a metadata address, no timeout beyond the limit; and their plugin arguments and extender
weights are within the bounds every profile is held to (``test_profile_argument_bounds.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fake_api import FakeAPI

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.profile import parse_profile
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "profiles").glob("*.yaml")) + sorted((ROOT / "examples").rglob("*.yaml"))


def _profiles(path: Path) -> list[dict]:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    return [d for d in docs if d.get("kind") == "SchedulingProfile"]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_shipped_profiles_are_within_the_operators_default_bounds(path: Path) -> None:
    for doc in _profiles(path):
        spec = parse_profile(doc, ProfileBounds())
        assert spec.scheduler_name == doc["spec"]["schedulerName"]
        build_framework(spec, new_registry(autoload=False), default_plugins(), FakeAPI(strict=True))


def test_there_are_profiles_to_check() -> None:
    assert sum(len(_profiles(p)) for p in FILES) >= 3
