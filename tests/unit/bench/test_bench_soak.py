"""``python -m bench soak``: the growth it computes, the kubeconfig and token file the scheduler reads,
the TokenRequest it sends, what it counts in the log, the gang bookkeeping, and its table in RESULTS.md."""

from __future__ import annotations

import json
import logging
import os
import socket
from pathlib import Path
from typing import Any

import pytest
from bench import gang_churn, gangs, procstats, report, rotation, soak
from bench.__main__ import parser
from bench.runner import rss_growth

from kopf_scheduler.k8s.connection import load_kubeconfig

MIB = 2**20
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def series(values_mib: list[float], step: float = 5.0) -> list[tuple[float, int]]:
    return [(i * step, int(v * MIB)) for i, v in enumerate(values_mib)]


def test_growth_is_the_last_tenth_over_the_third_tenth() -> None:
    # 0..600 s every 5 s: a start-up climb for the first 100 s, flat at 100 MiB, 110 MiB in the last tenth
    values = [50.0 + 2.5 * i for i in range(20)] + [100.0] * 88 + [110.0] * 13
    fields = rss_growth(series(values))
    assert fields == {"rss_after_warmup_mib": 100.0, "rss_end_mib": 110.0, "rss_growth_after_warmup": 0.1}
    flat = rss_growth(series([80.0] * 10 + [100.0] * 111))
    assert flat == {"rss_after_warmup_mib": 100.0, "rss_end_mib": 100.0, "rss_growth_after_warmup": 0.0}
    # too short a run has no warm-up to measure from
    assert rss_growth(series([100.0] * 10)) == {}
    assert rss_growth([]) == {}


def test_memory_fields_judge_each_process_against_five_percent() -> None:
    fields = soak.memory_fields(
        {"scheduling": series([100.0] * 121), "intake": series([60.0] * 100 + [66.0] * 21), "none": []}
    )
    assert fields["scheduling"]["flat"] is True
    assert fields["scheduling"]["rss_start_mib"] == 100.0
    assert fields["intake"]["flat"] is False
    assert fields["intake"]["rss_peak_mib"] == 66.0
    assert fields["none"]["flat"] is None and fields["none"]["rss_start_mib"] is None


def test_connections_to_the_api_server_are_counted_per_process() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        before = procstats.tcp_connections(os.getpid(), remote_port=port)
        with socket.create_connection(("127.0.0.1", port)), socket.create_connection(("127.0.0.1", port)):
            accepted = [server.accept()[0] for _ in range(2)]
            # the two ends this process opened to the port, not the two it accepted (or the listener)
            assert procstats.tcp_connections(os.getpid(), remote_port=port) == before + 2
            assert procstats.tcp_connections(os.getpid()) >= before + 4
            for conn in accepted:
                conn.close()
    assert procstats.tcp_connections(2**22 + 1) == 0  # no such process


def test_connection_fields_read_like_the_growth() -> None:
    samples = [(i * 5.0, 10 if i < 30 else 40) for i in range(121)]
    fields = soak.connection_fields(samples)
    assert (fields["start"], fields["peak"], fields["after_warmup"], fields["end"]) == (10, 40, 40, 40)
    assert fields["progress"][0] == [0.0, 10]
    assert soak.connection_fields([]) == {}


def test_the_scheduler_reads_a_rotated_token_from_the_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    rotation.write_token(token_file, "first")
    config = rotation.token_file_kubeconfig("https://127.0.0.1:6443", CA, token_file, "soak")
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    info = load_kubeconfig(path)
    assert info.auth_headers() == {"Authorization": "Bearer first"}
    assert info.ca_data == CA
    rotation.write_token(token_file, "second")
    assert token_file.stat().st_mode & 0o777 == 0o600
    assert not list(tmp_path.glob(".token*")), "the temporary file is renamed over the token file"
    # read again after a 401 (reload), as the scheduler's client does
    assert info.reload().auth_headers() == {"Authorization": "Bearer second"}


def test_token_request_binds_the_token_to_its_secret_for_the_shortest_expiry_allowed() -> None:
    body = rotation.token_request("soak-token-3", "uid-3")
    assert body["spec"]["boundObjectRef"] == {
        "apiVersion": "v1",
        "kind": "Secret",
        "name": "soak-token-3",
        "uid": "uid-3",
    }
    assert body["spec"]["expirationSeconds"] == 600


def test_the_service_account_gets_the_deployed_least_privilege_role() -> None:
    docs = rotation.manifests()
    assert all(d["kind"] in rotation.COLLECTIONS for d in docs)
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == "kopf-scheduler"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": rotation.SERVICE_ACCOUNT, "namespace": rotation.NAMESPACE}
    ]


def test_log_counts_find_the_lines_the_scheduler_and_kopf_write(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("soak-test")
    with caplog.at_level(logging.INFO, logger="soak-test"):
        # the messages of k8s/rest.py and of Kopf's authenticator, formatted as they log them
        logger.info("API credentials reloaded from %s after a 401", "kubeconfig ['/x'] (context soak)")
        logger.info("API credentials reloaded from %s after a 401", "kubeconfig ['/x'] (context soak)")
        logger.info("Re-authentication has finished.")
        logger.error("API server answered 401 and the credentials cannot be reloaded: %s", "gone")
    counts = soak.log_counts(caplog.text + "Traceback (most recent call last):\n")
    assert counts == {
        "credential_reloads": 2,
        "kopf_reauthentications": 1,
        "credential_reload_failures": 1,
        "tracebacks": 1,
    }


def test_a_run_without_reloads_or_with_a_token_still_accepted_is_no_proof() -> None:
    good = {"rotations": 3, "old_token_refused": 3, "credential_reloads": 3, "gang_problems": []}
    assert soak.problems(good) == []
    assert soak.problems({**good, "credential_reloads": 0}) == [
        "the scheduler never reloaded its credentials after a 401"
    ]
    assert soak.problems({**good, "old_token_refused": 2}) == [
        "an old token was not refused after its Secret was deleted"
    ]
    assert soak.problems({**good, "rotations": 0, "old_token_refused": 0}) == [
        "no credential rotation happened"
    ]
    assert soak.problems({**good, "tracebacks": 2}) == ["2 tracebacks in the scheduler's log"]


class NoApi:
    def request(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no request expected")


def test_gangs_that_cannot_fit_are_every_nth_and_ask_too_much_for_half_their_members() -> None:
    assert [i for i in range(10) if gang_churn.is_held(i, 5)] == [4, 9]
    assert not any(gang_churn.is_held(i, 0) for i in range(10))
    members = [gang_churn.member("gang-4", k, fits=False) for k in range(gangs.GANG_SIZE)]
    cpus = [m["spec"]["containers"][0]["resources"]["requests"]["cpu"] for m in members]
    assert cpus == [gangs.MEMBER_CPU] * 4 + [gang_churn.UNFIT_CPU] * 4
    pod = gang_churn.member("gang-0", 7, fits=True)
    assert pod["metadata"]["labels"] == {gangs.GROUP_LABEL: "gang-0"}
    assert pod["spec"]["schedulerName"] == gangs.GANG_SCHEDULER


def test_gang_bookkeeping_whole_stuck_and_held_gangs_with_a_member_bound() -> None:
    churner = gang_churn.GangChurn(NoApi(), interval=3.0, lifetime=20.0, held_every=5)  # type: ignore[arg-type]
    churner.gangs = {
        "gang-0": gang_churn.Gang("gang-0", True, 0.0),
        "gang-1": gang_churn.Gang("gang-1", True, 0.0),
        "gang-4": gang_churn.Gang("gang-4", False, 0.0),
    }
    churner._observe({"gang-0": 8, "gang-1": 3}, 1.0)
    churner._observe({"gang-0": 8, "gang-1": 3, "gang-4": 1}, 7.0)
    assert churner.gangs["gang-0"].whole == 1.0
    assert churner.stuck == {"gang-1"}  # partly bound from 1 s to 7 s
    assert churner.held_bound == {"gang-4"}
    problems = churner.problems()
    assert any("never bound whole: ['gang-1']" in p for p in problems), problems
    assert any("gangs that cannot fit had a member bound" in p for p in problems), problems
    summary = churner.summary()
    assert (summary["gangs_created"], summary["gangs_bound_whole"], summary["gangs_held"]) == (3, 1, 1)
    assert summary["gang_bound_after_max_s"] == 1.0


def test_the_subcommand_defaults_to_ten_minutes_at_500_nodes() -> None:
    args = parser().parse_args(["soak"])
    assert (args.minutes, args.nodes, args.rotate_every, args.func) == (10.0, 500, 30.0, soak.cmd_soak)


def test_results_md_has_a_soak_table(tmp_path: Path) -> None:
    memory = soak.memory_fields({"scheduling": series([100.0] * 121), "intake": series([60.0] * 121)})
    record = {
        "workload": soak.WORKLOAD, "size": "500-nodes-10-min", "mode": "soak", "scheduler": "kopf-scheduler",
        "nodes": 500, "pods": 18000, "bound": 18000, "complete": True, "loadavg_before": [1.0],
        "memory": memory, "gangs_bound_whole": 160, "gangs_held": 40, "rotations": 20,
        "credential_reloads": 20,
    }  # fmt: skip
    (tmp_path / "results").mkdir()
    doc = {"commit": "abc", "machine": {}, "versions": {}, "runs": [record]}
    (tmp_path / "results" / "20261129T150000Z.json").write_text(json.dumps(doc))
    report.write(tmp_path / "results", tmp_path / "RESULTS.md")
    text = (tmp_path / "RESULTS.md").read_text()
    assert "## Soak: memory under churn, gangs and credential rotation" in text
    assert (
        "| 500-nodes-10-min | scheduling | 100 | 100 | 100 | +0.0% | 18,000 | 160 (40) | 20 | 20 | ok |"
        in text
    )
    assert "| 500-nodes-10-min | intake | 60 |" in text
