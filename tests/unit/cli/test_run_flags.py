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


def _run(monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[ServiceConfig, dict[str, Any]]:
    """Runs ``run`` with the runner replaced: the settings both processes would read, and the runner's
    arguments."""
    for name in vars(config).values():
        if isinstance(name, str) and name.isupper() and name.replace("_", "").isalpha():
            monkeypatch.delenv(config.PREFIX + name, raising=False)
    monkeypatch.setenv("KUBECONFIG", "/from/the/environment")
    called: dict[str, Any] = {}
    monkeypatch.setattr(
        run_cli.importlib,
        "import_module",
        lambda name: argparse.Namespace(main=lambda **kwargs: called.update(kwargs) or 0),
    )
    args = _parse(*argv)
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
