"""``kopf-scheduler run`` takes kube-scheduler's own flags beside its own: what a user copies from a
kube-scheduler manifest (a bare ``--leader-elect``, ``--leader-elect-*`` with Go durations, ``--kubeconfig``,
``--v``, ``--version``) configures the operator as it configures kube-scheduler."""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest

from kopf_scheduler import __version__
from kopf_scheduler.cli import run as run_cli
from kopf_scheduler.service import config
from kopf_scheduler.service.config import ServiceConfig


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kopf-scheduler")
    run_cli.add_parser(parser.add_subparsers(), "run")
    return parser.parse_args(["run", *argv])


def _run(
    monkeypatch: pytest.MonkeyPatch, *argv: str, environment: dict[str, str] | None = None
) -> tuple[ServiceConfig, dict[str, Any]]:
    """Runs ``run`` with the runner replaced: the settings both processes would read, and the runner's
    arguments. With ``environment``, those variables are set first and the command line is known, as
    ``main`` passes it (``args.argv``)."""
    for name in vars(config).values():
        if isinstance(name, str) and name.isupper() and name.replace("_", "").isalpha():
            monkeypatch.delenv(config.PREFIX + name, raising=False)
    for name, value in (environment or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KUBECONFIG", "/from/the/environment")
    called: dict[str, Any] = {}
    runner = argparse.Namespace(main=lambda **kwargs: called.update(kwargs) or 0)
    # run.py's own importlib only: the lazy imports of --config (jsonschema's resources) use the real one
    monkeypatch.setattr(run_cli, "importlib", argparse.Namespace(import_module=lambda name: runner))
    args = _parse(*argv)
    if environment is not None:
        args.argv = ["run", *argv]
    assert args.func(args) == 0
    return ServiceConfig.from_env(os.environ), called


def test_kube_scheduler_leader_election_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    settings, _ = _run(
        monkeypatch,
        "--leader-elect",
        "--leader-elect-resource-namespace=sched",
        "--leader-elect-resource-name=x",
        "--leader-elect-lease-duration=30s",
        "--leader-elect-renew-deadline=20s",
        "--leader-elect-retry-period=1500ms",
    )
    assert (settings.leader_elect, settings.lease_namespace, settings.lease_name) == (True, "sched", "x")
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (30.0, 20.0, 1.5)


def test_leader_election_defaults_and_the_older_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    settings, _ = _run(monkeypatch, "--leader-elect=false", "--lease-namespace", "ns", "--lease-name", "n")
    assert (settings.leader_elect, settings.lease_namespace, settings.lease_name) == (False, "ns", "n")
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (15.0, 10.0, 2.0)


def test_kubeconfig_flag_wins_over_the_environment_for_both_processes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, _ = _run(monkeypatch, "--kubeconfig", "/etc/kubernetes/scheduler.conf")
    assert settings.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert os.environ["KUBECONFIG"] == "/etc/kubernetes/scheduler.conf"  # the intake process's too
    settings, _ = _run(monkeypatch)
    assert settings.kubeconfig == "/from/the/environment"


@pytest.mark.parametrize(
    ("argv", "debug"),
    [((), False), (("--v=2",), False), (("--v", "4"), True), (("-v",), True), (("--verbose",), True)],
    ids=["default", "v2", "v4", "bare-v", "verbose"],
)
def test_verbosity_as_kube_components_count_it(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], debug: bool
) -> None:
    _, called = _run(monkeypatch, *argv)
    assert called["verbose"] is debug


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--leader-elect-lease-duration=15", 'time: missing unit in duration "15"'),
        ("--leader-elect-retry-period=0s", "must be greater than zero, got '0s'"),
        ("--leader-elect=maybe", "invalid choice: 'maybe'"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag(
    flag: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse(flag)
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"kopf-scheduler run: error: argument {flag.split('=')[0]}")
    assert message in last


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse("--version")
    assert capsys.readouterr().out.strip() == f"kopf-scheduler v{__version__}"
    assert __version__ != "0+unknown"  # the installed package's own version


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 4
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
leaderElection:
  leaderElect: false
  leaseDuration: 40s
  resourceName: from-file
  resourceNamespace: file-ns
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
profiles:
- schedulerName: file-a
"""


def test_config_file_with_flags_as_kube_scheduler_combines_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """--leader-elect* given win over the file's leaderElection field by field; --kubeconfig is ignored
    (the file's clientConnection.kubeconfig applies); the file's profiles replace the built-in default."""
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    monkeypatch.chdir(tmp_path)
    settings, _ = _run(
        monkeypatch,
        "--config=config.yaml",
        "--kubeconfig=/ignored.conf",
        "--leader-elect=true",
        "--leader-elect-resource-name=x",
    )
    assert (settings.leader_elect, settings.lease_name, settings.lease_namespace) == (True, "x", "file-ns")
    assert (settings.lease_duration, settings.renew_deadline, settings.retry_period) == (40.0, 10.0, 2.0)
    assert settings.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert os.environ["KUBECONFIG"] == "/etc/kubernetes/scheduler.conf"
    assert settings.config_file == str(path)  # absolute: Kopf's process may not share the directory
    assert (settings.initial_backoff, settings.max_backoff) == (2.0, 30.0)
    assert settings.default_scheduler_name == ""
    assert capsys.readouterr().err.splitlines() == [
        "kopf-scheduler run: warning: config.yaml: parallelism: ignored (the operator judges nodes in one "
        "process)",
        "kopf-scheduler run: warning: --kubeconfig is ignored with --config, as kube-scheduler ignores it: "
        "the file's clientConnection.kubeconfig applies",
    ]


def test_config_file_without_leader_election_or_kubeconfig_keeps_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.split("parallelism")[0] + "profiles:\n- schedulerName: file-a\n")
    settings, _ = _run(monkeypatch, "--config", str(path), "--default-scheduler-name=kopf-scheduler")
    assert (settings.leader_elect, settings.lease_name, settings.lease_namespace) == (
        True,
        "kopf-scheduler",
        "kube-system",
    )
    assert settings.kubeconfig == "/from/the/environment"
    assert (settings.initial_backoff, settings.max_backoff) == (1.0, 10.0)
    assert settings.default_scheduler_name == "kopf-scheduler"  # asked for beside the file's profiles


@pytest.mark.parametrize(
    ("text", "argv", "message"),
    [
        (
            CONFIG.replace("leaseDuration: 40s", "leaseDuration: 4s"),
            ("--leader-elect",),
            "config.yaml: leaderElection.leaseDuration: must be greater than renewDeadline (4s <= 10s)",
        ),
        (
            CONFIG.replace("file-a", "default-scheduler"),
            (),
            "config.yaml: profiles[0].schedulerName: 'default-scheduler' is a reserved scheduler name",
        ),
        (
            CONFIG
            + "  pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: Nope}}\n",
            (),
            "config.yaml: profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value",
        ),
        ("kind: KubeSchedulerConfiguration\n", (), "config.yaml: apiVersion: must be"),
        ("a: [", (), "config.yaml: line 1 not valid YAML"),
    ],
    ids=["merged-timings", "reserved-name", "plugin-args", "api-version", "yaml"],
)
def test_a_bad_config_file_is_one_line_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    text: str,
    argv: tuple[str, ...],
    message: str,
) -> None:
    (tmp_path / "config.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    started = argparse.Namespace(import_module=lambda name: pytest.fail("the operator started"))
    monkeypatch.setattr(run_cli, "importlib", started)
    args = _parse("--config=config.yaml", *argv)
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"kopf-scheduler run: {message}"), err


def test_a_variable_stands_in_for_a_flag_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {
        "KOPF_SCHEDULER_FEATURE_GATES": "NominatedNodeNameForExpectation=false",
        "KOPF_SCHEDULER_BIND_CONCURRENCY": "8",
        "KOPF_SCHEDULER_SHADOW": "true",
    }
    settings, _ = _run(monkeypatch, environment=environment)
    assert (settings.feature_gates, settings.bind_concurrency, settings.shadow) == (
        "NominatedNodeNameForExpectation=false",
        8,
        True,
    )


def test_a_flag_given_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    environment = {"KOPF_SCHEDULER_BIND_CONCURRENCY": "8", "KOPF_SCHEDULER_LOGGING_FORMAT": "json"}
    settings, _ = _run(
        monkeypatch, "--bind-concurrency=16", "--logging-format", "text", environment=environment
    )
    assert settings.bind_concurrency == 16
    assert config.logging_format_from_env(os.environ) == "text"
