"""``/flagz`` lists ``kopf-scheduler run``'s flags as kube-scheduler lists its own: every long flag by name
with the value given or defaulted, written as pflag writes values, a secret's value redacted."""

from __future__ import annotations

import argparse

from kopf_scheduler.cli import run as run_cli
from kopf_scheduler.cli.flag_values import flag_values, run_flags
from kopf_scheduler.service import zpages


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="kopf-scheduler")
    run_cli.add_parser(parser.add_subparsers(), "run")
    return parser.parse_args(["run", *argv])


def test_every_long_flag_with_its_value_as_pflag_writes_it() -> None:
    flags = run_flags(
        _parse("--secure-port", "10300", "--leader-elect-lease-duration", "90s",
               "--allow-scheduler-name", "a", "--allow-scheduler-name", "b", "--shadow",
               "--feature-gates", "ComponentFlagz=true"),
        run_cli.add_parser,
    )  # fmt: skip
    assert flags["secure-port"] == flags["metrics-port"] == "10300"  # an alias under each of its names
    assert flags["leader-elect-lease-duration"] == "1m30s"
    assert flags["allow-scheduler-name"] == "[a,b]"
    assert flags["deny-scheduler-name"] == "[]"
    assert (flags["shadow"], flags["insecure-metrics"]) == ("true", "false")
    assert flags["feature-gates"] == "ComponentFlagz=true"
    assert flags["bind-address"] == "0.0.0.0"
    assert "help" not in flags and "version" not in flags
    assert all(not name.startswith("-") for name in flags)


def test_a_classified_flag_shows_no_value() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--token", default="")
    parser.add_argument("--user", default="")
    args = parser.parse_args(["--token", "s3cret", "--user", "me"])
    assert flag_values(parser, args, classified={"token"}) == {"token": "CLASSIFIED", "user": "me"}


def test_run_records_its_flags_for_the_secure_port(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(zpages, "_recorded", None)
    from kopf_scheduler.cli.flag_values import record_run_flags

    record_run_flags(_parse("--bind-address", "127.0.0.1"), run_cli.add_parser)
    recorded = zpages.recorded_flags()
    assert recorded is not None and recorded["bind-address"] == "127.0.0.1"
