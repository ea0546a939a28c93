"""``run --config``: a KubeSchedulerConfiguration read as kube-scheduler v1.37 reads it, combined with the
command line as ``options.go`` combines them: the ``--leader-elect*`` flags given win field by field, the
merged leader election is checked as upstream checks it, fields the operator cannot honour are warned
about one line each, and a bad file is one ``ProfileError`` naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.service.config_file import (
    LeaderElection,
    load_profiles,
    merge_leader_election,
    parse_config,
    read_document,
)

HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

FULL = (
    HEAD
    + """
parallelism: 8
percentageOfNodesToScore: 40
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
enableProfiling: true
leaderElection:
  leaderElect: true
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 1500ms
  resourceLock: leases
  resourceName: from-file
  resourceNamespace: sched
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 100
  burst: 200
extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
profiles:
- schedulerName: file-a
- schedulerName: file-b
  percentageOfNodesToScore: 70
  plugins:
    score:
      disabled:
      - name: "*"
"""
)

BOUNDS = ProfileBounds()


def parsed(text: str) -> Any:
    return yaml.safe_load(text)


def test_every_honoured_field_takes_effect() -> None:
    config = parse_config(parsed(FULL), BOUNDS)
    specs = [m["spec"] for m in config.profiles]
    assert [s["schedulerName"] for s in specs] == ["file-a", "file-b"]
    assert [s["percentageOfNodesToScore"] for s in specs] == [40, 70]  # top level unless the profile's own
    assert all(s["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8888/" for s in specs)
    assert specs[1]["plugins"]["score"]["disabled"] == [{"name": "*"}]
    assert config.leader_election == LeaderElection(
        leader_elect=True,
        lease_duration=30.0,
        renew_deadline=20.0,
        retry_period=1.5,
        lease_name="from-file",
        lease_namespace="sched",
        resource_lock="leases",
    )
    assert config.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert (config.initial_backoff, config.max_backoff) == (2.0, 20.0)


def test_fields_the_operator_cannot_honour_are_one_warning_each() -> None:
    config = parse_config(parsed(FULL + "delayCacheUntilActive: true\n"), BOUNDS)
    assert [w.split(":")[0] for w in config.warnings] == [
        "parallelism",
        "clientConnection.qps",
        "clientConnection.burst",
        "enableProfiling",
        "delayCacheUntilActive",
    ]
    assert all("\n" not in w and ": ignored (" in w for w in config.warnings)


def test_unset_fields_keep_the_operators_defaults() -> None:
    config = parse_config(parsed(HEAD + "profiles:\n- schedulerName: only\n"), BOUNDS)
    assert config.leader_election == LeaderElection()
    assert (config.kubeconfig, config.initial_backoff, config.max_backoff, config.warnings) == (
        None,
        None,
        None,
        [],
    )


@pytest.mark.parametrize(
    ("file", "flags", "merged"),
    [
        (LeaderElection(lease_name="file"), LeaderElection(), LeaderElection(lease_name="file")),
        (
            LeaderElection(lease_name="file", lease_duration=30.0, leader_elect=True),
            LeaderElection(lease_name="flag", leader_elect=False),
            LeaderElection(lease_name="flag", lease_duration=30.0, leader_elect=False),
        ),
        (
            LeaderElection(lease_namespace="file", retry_period=1.0),
            LeaderElection(retry_period=3.0),
            LeaderElection(lease_namespace="file", retry_period=3.0),
        ),
    ],
    ids=["file-only", "flags-win", "field-by-field"],
)
def test_flags_given_override_the_file_field_by_field(
    file: LeaderElection, flags: LeaderElection, merged: LeaderElection
) -> None:
    assert merge_leader_election(file, flags) == merged


def test_the_merged_leader_election_is_checked_as_upstream_checks_it() -> None:
    with pytest.raises(ProfileError) as e:
        merge_leader_election(LeaderElection(lease_duration=30.0), LeaderElection(renew_deadline=30.0))
    assert str(e.value) == "leaderElection.leaseDuration: must be greater than renewDeadline (30s <= 30s)"
    with pytest.raises(
        ProfileError, match=r"^leaderElection.leaseDuration: must be greater than renewDeadline"
    ):
        merge_leader_election(LeaderElection(lease_duration=5.0), LeaderElection())  # 5s against 10s
    endpoints = LeaderElection(leader_elect=False, resource_lock="endpoints", lease_duration=5.0)
    with pytest.raises(ProfileError) as e:
        merge_leader_election(endpoints, LeaderElection(leader_elect=True))
    assert str(e.value) == "leaderElection.resourceLock: must be \"leases\", not 'endpoints'"
    # not campaigning: nothing is checked (upstream's validation returns early)
    merge_leader_election(endpoints, LeaderElection())


def test_empty_names_are_unset_as_upstream_defaults_them() -> None:
    text = HEAD + "leaderElection:\n  resourceName: ''\n  resourceNamespace: ''\n  resourceLock: ''\n"
    config = parse_config(parsed(text + "profiles:\n- schedulerName: a\n"), BOUNDS)
    assert config.leader_election == LeaderElection()


MAX_BELOW = "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds"
BAD_FILES = {
    "duration": (
        "leaderElection:\n  leaseDuration: '15'\n",
        'leaderElection.leaseDuration: time: missing unit in duration "15"',
    ),
    "duration-type": (
        "leaderElection:\n  leaseDuration: 15\n",
        "leaderElection.leaseDuration: must be of type string, not 15",
    ),
    "unknown-field": (
        "leaderElection:\n  leaseDurationSeconds: 15\n",
        "leaderElection: unknown field(s) ('leaseDurationSeconds' was unexpected)",
    ),
    "burst": ("clientConnection:\n  burst: -1\n", "clientConnection.burst: must be >= 0, not -1"),
    "initial-backoff": ("podInitialBackoffSeconds: 0\n", "podInitialBackoffSeconds: must be > 0, not 0"),
    "max-below-default": ("podInitialBackoffSeconds: 20\n", MAX_BELOW),
    "max-below-initial": ("podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n", MAX_BELOW),
    "feature-gates": ("featureGates:\n  A: true\n", "unknown field(s) ('featureGates' was unexpected)"),
    "percentage": ("percentageOfNodesToScore: 101\n", "percentageOfNodesToScore: must be <= 100, not 101"),
    "duplicate": (
        "profiles:\n- schedulerName: a\n- schedulerName: a\n",
        "profiles[1].schedulerName: 'a' is the name of an earlier profile",
    ),
    "plugin": (
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: Nope\n",
        "profiles[0].plugins.score.enabled[0].name: unknown plugin 'Nope'",
    ),
}


@pytest.mark.parametrize(("body", "message"), BAD_FILES.values(), ids=BAD_FILES.keys())
def test_a_bad_file_is_one_error_naming_the_field(body: str, message: str) -> None:
    with pytest.raises(ProfileError) as e:
        parse_config(
            parsed(HEAD + "profiles:\n- schedulerName: a\n" * ("profiles" not in body) + body), BOUNDS
        )
    assert str(e.value) == message


def test_file_profiles_are_bounded_as_schedulingprofiles_are() -> None:
    """kube-scheduler's own file names ``default-scheduler`` (or nothing, which defaults to it): the
    operator serves it only when told to, as for a SchedulingProfile."""
    with pytest.raises(ProfileError) as e:
        parse_config(parsed(HEAD), BOUNDS)
    assert str(e.value).startswith(
        "profiles[0].schedulerName: 'default-scheduler' is a reserved scheduler name"
    )
    allowed = ProfileBounds(allowed_scheduler_names=frozenset({"default-scheduler"}))
    config = parse_config(parsed(HEAD), allowed)
    assert [m["spec"]["schedulerName"] for m in config.profiles] == ["default-scheduler"]
    assert config.warnings == []


def test_the_check_sees_each_profile_and_its_error_names_the_profile() -> None:
    seen: list[str] = []

    def check(spec: Any) -> None:
        seen.append(spec.scheduler_name)
        if spec.scheduler_name == "file-b":
            raise ProfileError("spec.pluginConfig[0].args.x", "bad")

    with pytest.raises(ProfileError) as e:
        parse_config(parsed(FULL), BOUNDS, check=check)
    assert seen == ["file-a", "file-b"]
    assert str(e.value) == "profiles[1].pluginConfig[0].args.x: bad"


def test_reading_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(FULL)
    specs = load_profiles(str(path), BOUNDS, {"PrioritySort"} | {"DefaultBinder"})
    assert [s.scheduler_name for s in specs] == ["file-a", "file-b"]
    path.write_text(FULL + "---\n" + FULL)
    with pytest.raises(UsageError, match="expected one KubeSchedulerConfiguration, found 2 documents"):
        read_document(str(path))
    path.write_text("a: [")
    with pytest.raises(UsageError, match=r"config.yaml: line 1 not valid YAML"):
        read_document(str(path))
    with pytest.raises(UsageError, match="No such file or directory"):
        read_document(str(tmp_path / "missing.yaml"))
