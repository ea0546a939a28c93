"""The documents stay true to the repository: README.md, docs/*.md and bench/README.md.

Every relative link points at a file that exists (and a link's anchor at a heading of a Markdown target);
every `make <target>` they name is a target of the Makefile; every repository path they name in code
(`tests/...py`, `service/config.py`, `file.py::test_name`) exists; the README stays a front door (under
300 lines); docs/configuration.md names every field of the SchedulingProfile CRD's `spec`, so a field
added to the schema cannot go undocumented.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "kopf_scheduler"
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
OPERATIONS = ROOT / "docs" / "operations.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
README_MAX_LINES = 300

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
MAKE = re.compile(r"(?:^|[\s;&|(])make\s+([A-Za-z][\w.-]*)")
MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", re.MULTILINE)
#: top-level folders of the repository, and the package's own, as paths in code spans start
REPO_PATH = re.compile(r"^(?:tests|operator|deploy|crds|profiles|charts|examples|hack|bench)/[\w./-]*$")
PACKAGE_PATH = re.compile(
    r"^(?:api|framework|plugins|backend|scheduling|service|cli|handlers|k8s|simulate|devcluster|testing)"
    r"/[\w./-]*$"
)
PLACEHOLDER = re.compile(r"<[A-Za-z]+>")


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def prose(text: str) -> str:
    """The text without its fenced code blocks (links and headings in code are not links)."""
    return FENCE.sub("", text)


def code(text: str) -> list[str]:
    """Every piece of code in the text: fenced blocks and inline code spans."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    return blocks + INLINE_CODE.findall(prose(text))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in HEADING.findall(prose(path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(path: Path) -> Iterator[str]:
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            yield f"{target}: no such file {_id(resolved)}"
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            yield f"{target}: no heading #{anchor} in {_id(resolved)}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_id)
def test_relative_links_point_at_existing_files(document: Path) -> None:
    assert list(broken_links(document)) == []


def makefile_targets() -> set[str]:
    return set(MAKE_TARGET.findall((ROOT / "Makefile").read_text()))


@pytest.mark.parametrize("document", DOCUMENTS, ids=_id)
def test_make_targets_exist(document: Path) -> None:
    named = {target for piece in code(document.read_text()) for target in MAKE.findall(piece)}
    assert named - makefile_targets() == set()


def missing_paths(document: Path) -> Iterator[str]:
    for span in INLINE_CODE.findall(prose(document.read_text())):
        path, _, function = span.partition("::")
        if path.endswith(".go"):  # upstream's files
            continue
        if REPO_PATH.match(path):
            where = ROOT / path
        elif PACKAGE_PATH.match(path):
            where = PACKAGE / path
        else:
            continue
        if not where.exists():
            yield f"{span}: no such path {_id(where)}"
        elif function and not re.search(
            rf"^\s*(?:async\s+)?def {re.escape(function)}\(", where.read_text(), re.M
        ):
            yield f"{span}: no function {function} in {_id(where)}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_id)
def test_named_paths_and_tests_exist(document: Path) -> None:
    assert list(missing_paths(document)) == []


def test_readme_is_a_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; the rest belongs in docs/"


def test_readme_metrics_bullet() -> None:
    """tests/e2e/test_operator_scheduling.py reads the metric names of the README's Metrics bullet and
    checks each against a live operator: the bullet must stay, with the two it always checks."""
    text = README.read_text()
    assert "\n- **Metrics**" in text
    bullet = text[text.index("\n- **Metrics**") + 1 :].split("\n- ", 1)[0]
    named = set(re.findall(r"`(scheduler_[a-z_]+)`", bullet))
    assert {"scheduler_schedule_attempts_total", "scheduler_pending_pods"} <= named


def test_readme_profile_is_a_shipped_one() -> None:
    """The SchedulingProfile shown in the README is one of profiles/, word for word once parsed."""
    shipped = [
        doc
        for path in sorted((ROOT / "profiles").glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    shown = [
        yaml.safe_load(block.split("\n", 1)[1].rsplit("```", 1)[0])
        for block in (m.group(0) for m in FENCE.finditer(README.read_text()))
        if block.startswith("```yaml") and "kind: SchedulingProfile" in block
    ]
    assert shown, "the README shows no SchedulingProfile"
    for profile in shown:
        assert profile in shipped, profile["metadata"]["name"]


# -- docs/operations.md against the command line and the configuration module -------------------------


def test_operations_names_every_flag_of_run() -> None:
    """Every option of `kopf-scheduler run` is in docs/operations.md (the parser is built, not run)."""
    from kopf_scheduler.cli import run

    sub = argparse.ArgumentParser().add_subparsers()
    run.add_parser(sub, "run")
    options = {o for a in sub.choices["run"]._actions for o in a.option_strings if o.startswith("--")}
    assert len(options) > 10
    text = " ".join(code(OPERATIONS.read_text()))
    assert {o for o in options - {"--help"} if not re.search(rf"{re.escape(o)}(?![\w-])", text)} == set()


def test_operations_names_every_variable_of_the_configuration() -> None:
    """Every variable `service/config.py` reads (module constants naming them after the prefix) is in
    docs/operations.md with its prefix."""
    source = (PACKAGE / "service" / "config.py").read_text()
    prefix = re.search(r'^PREFIX = "([A-Z_]+)"$', source, re.M)
    assert prefix is not None
    names = re.findall(r'^[A-Z_]+ = "([A-Z][A-Z0-9_]+)"$', source, re.M)
    assert len(names) > 10
    text = OPERATIONS.read_text()
    assert [n for n in names if f"`{prefix.group(1)}{n}`" not in text and n != prefix.group(1)] == []


# -- the SchedulingProfile reference against the CRD --------------------------------------------------


def profile_spec_schemas() -> list[dict[str, Any]]:
    """The `spec` schema of every version of the SchedulingProfile CRD found in crds/."""
    schemas = []
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["spec"]["names"]["kind"] != "SchedulingProfile":
                continue
            for version in doc["spec"]["versions"]:
                schemas.append(version["schema"]["openAPIV3Schema"]["properties"]["spec"])
    return schemas


def field_paths(schema: dict[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    """(path, name) of every property under ``schema``, nested through objects, list items and maps:
    ``spec.extenders[].tlsConfig.caFile``."""
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}"
        yield path, name
        yield from field_paths(sub, path)
        items = sub.get("items")
        if isinstance(items, dict):
            yield from field_paths(items, path + "[]")
        values = sub.get("additionalProperties")
        if isinstance(values, dict):
            yield from field_paths(values, path + ".<key>")


def documented(text: str) -> tuple[list[re.Pattern[str]], set[str]]:
    """The field paths the document writes in code (``spec.plugins.<point>.enabled[].name``, a
    ``<placeholder>`` standing for any one key) as patterns, and every name it writes in code."""
    spans = INLINE_CODE.findall(prose(text))
    patterns = []
    for span in spans:
        if span.startswith("spec."):
            parts = PLACEHOLDER.split(span)
            patterns.append(re.compile(r"[A-Za-z]+".join(re.escape(p) for p in parts)))
    names = {word for span in spans for word in re.split(r"[.\[\]\s,:]+", span) if word}
    return patterns, names


def undocumented_fields(schema: dict[str, Any], text: str) -> list[str]:
    patterns, names = documented(text)
    missing = []
    for path, name in field_paths(schema, "spec"):
        if not any(p.fullmatch(path) for p in patterns):
            missing.append(f"{path}: no row")
        elif name not in names:
            missing.append(f"{path}: `{name}` not named")
    return missing


def test_the_crd_has_a_profile_spec() -> None:
    schemas = profile_spec_schemas()
    assert schemas, "no SchedulingProfile CRD in crds/"
    assert len(list(field_paths(schemas[0], "spec"))) > 20


def test_configuration_names_every_spec_field_of_the_crd() -> None:
    text = CONFIGURATION.read_text()
    for schema in profile_spec_schemas():
        assert undocumented_fields(schema, text) == []


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("`spec.a` `spec.a.b`", []),
        ("`spec.a`", ["spec.a.b: no row"]),
        ("`spec.a` `spec.<x>.b`", []),
        ("`spec.a` `spec.a.<x>`", ["spec.a.b: `b` not named"]),
        ("`spec.a` `spec.a.<x>` (`b`)", []),
    ],
    ids=["named", "no-row", "placeholder-row", "placeholder-unnamed", "placeholder-named"],
)
def test_the_field_check_fails_on_a_missing_field(text: str, missing: list[str]) -> None:
    schema = {"properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}
    assert undocumented_fields(schema, text) == missing


def test_the_link_check_fails_on_a_broken_link(tmp_path: Path) -> None:
    document = ROOT / "docs" / "operations.md"
    broken = tmp_path / "broken.md"
    broken.write_text("[gone](no-such-file.md) [ok](#here) [bad anchor](#nowhere)\n\n# Here\n")
    found = [line.split(":")[0] for line in broken_links(broken)]
    assert found == ["no-such-file.md", "#nowhere"]
    assert list(broken_links(document)) == []
