"""Every SchedulingProfile shipped in profiles/ is valid and builds a framework; the CRD in crds/ is the
one generated from the schema the operator validates with."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fake_api import FakeAPI

from kopf_scheduler.api import crd
from kopf_scheduler.api.profile import parse_profile, schema_errors
from kopf_scheduler.framework.runtime.build import build_framework
from kopf_scheduler.plugins.defaults import default_plugins
from kopf_scheduler.plugins.registry import new_registry

ROOT = Path(__file__).resolve().parents[2]
PROFILE_FILES = sorted((ROOT / "profiles").glob("*.yaml"))


def test_there_are_profiles() -> None:
    assert len(PROFILE_FILES) >= 2


@pytest.mark.parametrize("path", PROFILE_FILES, ids=[p.name for p in PROFILE_FILES])
def test_profile_validates_and_builds(path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert docs, f"{path.name} holds no SchedulingProfile"
    for doc in docs:
        assert doc["kind"] == "SchedulingProfile"
        assert schema_errors(doc["spec"]) == []
        spec = parse_profile(doc)
        framework = build_framework(
            spec, new_registry(autoload=False), default_plugins(), FakeAPI(strict=True)
        )
        assert framework.profile_name == doc["spec"]["schedulerName"]
        assert framework.bind, "a profile must bind pods"


def test_profile_files_start_with_a_comment_saying_when_to_use_them() -> None:
    for path in PROFILE_FILES:
        assert path.read_text().startswith("#"), f"{path.name} lacks a comment saying when to use it"


def test_committed_crd_is_generated_from_the_schema() -> None:
    committed = (ROOT / "crds" / "schedulingprofile.yaml").read_text()
    assert committed == crd.render(), "run: python -m kopf_scheduler.api.crd > crds/schedulingprofile.yaml"


def test_crd_schema_is_structural() -> None:
    schema = crd.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            assert node.get("additionalProperties") is not False, f"{path}: additionalProperties: false"
            if "exclusiveMinimum" in node:
                assert isinstance(node["exclusiveMinimum"], bool), (
                    f"{path}: exclusiveMinimum must be a boolean"
                )
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(schema, "openAPIV3Schema")


def test_every_field_of_the_crd_says_what_it_is_for() -> None:
    """`kubectl explain sprof.spec...` prints a description for every field, not `<no description>`
    (metadata is the API server's own)."""
    schema = crd.crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    undescribed: list[str] = []

    def walk(node: dict[str, object], path: str) -> None:
        if path != "metadata" and not node.get("description"):
            undescribed.append(path or "<root>")
        for name, child in (node.get("properties") or {}).items():  # type: ignore[attr-defined]
            walk(child, f"{path}.{name}" if path else name)
        items = node.get("items")
        if isinstance(items, dict):
            walk(items, f"{path}[]")

    walk(schema, "")
    assert undescribed == []
