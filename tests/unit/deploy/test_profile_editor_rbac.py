"""deploy/ and the privilege of writing SchedulingProfiles: a profile is as powerful as kube-scheduler's
configuration, so the role for delegating it (``kopf-scheduler-profile-editor``) is shipped but never
aggregated into the built-in admin, edit or view roles; the scheduler itself cannot write profiles; and
the Deployment mounts the one directory extender TLS files are read from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.bounds import DEFAULT_EXTENDER_TLS_DIR
from kopf_scheduler.api.schema import GROUP, PLURAL

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
EDITOR = "kopf-scheduler-profile-editor"
BUILT_IN_AGGREGATION = ("admin", "edit", "view")


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _all_documents() -> list[dict[str, Any]]:
    files = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    return [d for name in files if name.endswith(".yaml") for d in _documents(name)]


def _verbs(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    verbs: dict[tuple[str, str], set[str]] = {}
    for rule in role.get("rules") or ():
        for group in rule.get("apiGroups", ()):  # none in a rule of non-resource URLs
            for resource in rule["resources"]:
                verbs.setdefault((group, resource), set()).update(rule["verbs"])
    return verbs


def test_the_profile_editor_role_is_shipped() -> None:
    assert "profile-editor.yaml" in yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    [role] = [d for d in _all_documents() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == EDITOR]
    assert _verbs(role) == {
        (GROUP, PLURAL): {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"},
        (GROUP, f"{PLURAL}/status"): {"get"},  # the scheduler's verdict: editors read it, never write it
    }


def test_the_profile_editor_role_is_not_aggregated_into_built_in_roles() -> None:
    [role] = [d for d in _documents("profile-editor.yaml") if d["metadata"]["name"] == EDITOR]
    labels = role["metadata"]["labels"]
    for built_in in BUILT_IN_AGGREGATION:
        assert labels[f"rbac.authorization.k8s.io/aggregate-to-{built_in}"] == "false"
    assert "aggregationRule" not in role  # its rules are its own: nothing else can widen it by a label


def test_no_role_aggregates_profile_access_into_built_in_roles() -> None:
    for doc in _all_documents():
        if doc["kind"] != "ClusterRole":
            continue
        labels = doc["metadata"].get("labels") or {}
        aggregated = [
            b
            for b in BUILT_IN_AGGREGATION
            if labels.get(f"rbac.authorization.k8s.io/aggregate-to-{b}") == "true"
        ]
        touches_profiles = any(group == GROUP for group, _ in _verbs(doc))
        assert not (aggregated and touches_profiles), doc["metadata"]["name"]


def test_the_scheduler_cannot_write_profiles() -> None:
    """A scheduler that could write SchedulingProfiles could widen what it may do itself."""
    [role] = [
        d
        for d in _documents("rbac.yaml")
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "kopf-scheduler"
    ]
    verbs = _verbs(role)
    assert verbs[(GROUP, PLURAL)] == {"get", "list", "watch"}
    assert verbs[(GROUP, f"{PLURAL}/status")] == {"get", "patch", "update"}


def test_the_deployment_mounts_the_extender_tls_directory_read_only() -> None:
    [deployment] = [d for d in _documents("deployment.yaml") if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == DEFAULT_EXTENDER_TLS_DIR]
    assert mount["readOnly"] is True
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"] == {"secretName": "kopf-scheduler-extender-tls", "optional": True}
    assert not any(a.startswith("--extender-tls-dir") for a in container["args"])  # the default is used
