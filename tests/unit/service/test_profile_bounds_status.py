"""The operator's bounds on SchedulingProfiles as users meet them: a profile beyond them is refused in its
status (``Accepted=False``, ``InvalidSpec``, one line naming the field) while the last good generation
keeps serving; the flags of ``kopf-scheduler run`` reach the bounds through ``KOPF_SCHEDULER_*``."""

from __future__ import annotations

import argparse
import os
from typing import Any

import pytest
from fake_api import FakeAPI

from kopf_scheduler.api.bounds import DEFAULT_EXTENDER_TLS_DIR, ProfileBounds
from kopf_scheduler.cli import run as run_cli
from kopf_scheduler.cli.run import add_parser
from kopf_scheduler.scheduling.scheduler import Scheduler
from kopf_scheduler.service.config import ServiceConfig, bounds_from_env
from kopf_scheduler.service.profiles import ProfileManager


def _profile(name: str, spec: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "kopf-scheduler.io/v1alpha1",
        "kind": "SchedulingProfile",
        "metadata": {"name": name, "generation": generation, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }


def _accepted(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Accepted")


def _manager(bounds: ProfileBounds | None = None) -> tuple[ProfileManager, Scheduler, dict[str, Any]]:
    written: dict[str, Any] = {}

    async def write(name: str, status: dict[str, Any]) -> None:
        written[name] = status

    scheduler = Scheduler(FakeAPI())
    return ProfileManager(scheduler, write, "kopf-scheduler", bounds), scheduler, written


async def test_a_reserved_name_is_refused_in_status_and_the_last_good_generation_serves() -> None:
    manager, scheduler, written = _manager()
    await manager.on_event("ADDED", _profile("p", {"schedulerName": "mine"}, generation=1))
    good = scheduler.profiles["mine"]
    await manager.on_event("MODIFIED", _profile("p", {"schedulerName": "default-scheduler"}, generation=2))
    accepted = _accepted(written["p"])
    assert (accepted["status"], accepted["reason"]) == ("False", "InvalidSpec")
    assert accepted["message"] == (
        "spec.schedulerName: 'default-scheduler' is a reserved scheduler name: a SchedulingProfile may claim "
        "it only when the operator runs with --allow-scheduler-name default-scheduler "
        "(generation 1 keeps serving 'mine')"
    )
    assert "\n" not in accepted["message"]
    assert scheduler.profiles["mine"] is good and "default-scheduler" not in scheduler.profiles


async def test_an_allowed_reserved_name_is_served() -> None:
    manager, scheduler, written = _manager(
        ProfileBounds(allowed_scheduler_names=frozenset({"default-scheduler"}))
    )
    await manager.on_event("ADDED", _profile("p", {"schedulerName": "default-scheduler"}))
    assert _accepted(written["p"])["status"] == "True"
    assert "default-scheduler" in scheduler.profiles


@pytest.mark.parametrize(
    ("extender", "message"),
    [
        (
            {"urlPrefix": "http://127.0.0.1:1/x", "httpTimeout": "-5s"},
            "spec.extenders[0].httpTimeout: must not be negative (every extender call has a time limit), "
            "not '-5s'",
        ),
        (
            {"urlPrefix": "http://127.0.0.1:1/x", "tlsConfig": {"caFile": "/etc/passwd"}},
            f"spec.extenders[0].tlsConfig.caFile: must name a file in {DEFAULT_EXTENDER_TLS_DIR} "
            "(the operator's --extender-tls-dir), not '/etc/passwd'",
        ),
        (
            {"urlPrefix": "http://169.254.169.254/latest"},
            "spec.extenders[0].urlPrefix: 169.254.169.254 is a link-local or cloud metadata address: "
            "extenders there need the operator flag --allow-extender-link-local",
        ),
    ],
    ids=["negative-timeout", "tls-file-outside", "metadata-address"],
)
async def test_extenders_beyond_the_bounds_are_refused_in_status(
    extender: dict[str, Any], message: str
) -> None:
    manager, scheduler, written = _manager()
    await manager.on_event("ADDED", _profile("p", {"schedulerName": "ext", "extenders": [extender]}))
    accepted = _accepted(written["p"])
    assert (accepted["status"], accepted["reason"], accepted["message"]) == ("False", "InvalidSpec", message)
    assert "ext" not in scheduler.profiles


async def test_a_tls_file_that_cannot_be_read_is_refused_without_os_details(tmp_path: Any) -> None:
    manager, _scheduler, written = _manager(ProfileBounds(extender_tls_dir=str(tmp_path)))
    (tmp_path / "garbage.pem").write_text("not a certificate")
    for name, path, why in [
        ("missing", "ca.pem", "no such file"),
        ("garbage", "garbage.pem", "not valid PEM data (or the key does not match the certificate)"),
    ]:
        tls = {"caFile": path}
        spec = {
            "schedulerName": name,
            "extenders": [{"urlPrefix": "https://127.0.0.1:1/x", "tlsConfig": tls}],
        }
        await manager.on_event("ADDED", _profile(name, spec))
        message = _accepted(written[name])["message"]
        assert message == (
            f"spec.extenders[0].tlsConfig.caFile: unable to load root certificates from {path!r}: {why}"
        )
        assert str(tmp_path) not in message and "Errno" not in message


def test_flags_reach_the_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("KOPF_SCHEDULER_"):
            monkeypatch.delenv(key)
    assert bounds_from_env() == ProfileBounds() == ServiceConfig().profile_bounds
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), "run")
    args = parser.parse_args(
        [
            "run",
            "--allow-scheduler-name",
            "default-scheduler",
            "--deny-scheduler-name",
            "volcano",
            "--deny-scheduler-name",
            "yunikorn",
            "--extender-tls-dir",
            "/tls",
            "--allow-extender-link-local",
        ]
    )
    for key in (
        "ALLOW_SCHEDULER_NAMES",
        "DENY_SCHEDULER_NAMES",
        "EXTENDER_TLS_DIR",
        "ALLOW_EXTENDER_LINK_LOCAL",
    ):
        monkeypatch.setenv("KOPF_SCHEDULER_" + key, "")  # so that what run() sets is undone afterwards
    for key in ("METRICS_PORT", "DEFAULT_SCHEDULER_NAME", "LEADER_ELECT", "LEASE_NAMESPACE", "LEASE_NAME"):
        monkeypatch.setenv("KOPF_SCHEDULER_" + key, "")
    monkeypatch.setenv("KOPF_SCHEDULER_BIND_CONCURRENCY", "")
    monkeypatch.setattr(
        run_cli.importlib, "import_module", lambda name: argparse.Namespace(main=lambda **_: 0)
    )
    assert args.func(args) == 0
    assert bounds_from_env() == ProfileBounds(
        reserved_scheduler_names=frozenset({"default-scheduler", "volcano", "yunikorn"}),
        allowed_scheduler_names=frozenset({"default-scheduler"}),
        extender_tls_dir="/tls",
        allow_link_local_extenders=True,
    )
