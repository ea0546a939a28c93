"""``python -m bench soak`` runs as users run it, for one minute at a small size: pods and gangs made and
deleted, gangs that cannot fit held, and kopf-scheduler's ServiceAccount token rotated every 15 s with the
old one refused. Asserts that the rotations happened, that the scheduler reloaded its credentials after
the 401s and went on binding every pod and every gang that fits, whole, and that the results file has
the memory samples of both of its processes; whether memory stays flat is for the 10-minute run
(``bench/README.md``), not for this test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def test_one_minute_soak_survives_token_rotation_and_binds_everything(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "bench", "soak", "--minutes", "1", "--nodes", "40",
        "--pod-rate", "10", "--pod-lifetime", "5", "--gang-interval", "3", "--gang-lifetime", "5",
        "--held-every", "4", "--rotate-every", "15", "--timeout", "120",
        "--results-dir", str(tmp_path), "--no-report", "--quiet-wait", "0",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    output = done.stdout + done.stderr
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1, output
    document = json.loads(files[0].read_text())
    assert {"commit", "machine", "versions", "runs"} <= set(document), document.keys()
    [run] = document["runs"]
    assert run["complete"], f"{run['error']}\n{output}"
    assert (run["mode"], run["scheduler"], run["nodes"]) == ("soak", "kopf-scheduler", 40)
    # every pod bound, and most deleted again at the end of their lifetime
    assert run["bound"] == run["pods"] == 600, run
    assert run["expired"] >= 500, run
    # gangs: every one that fits bound whole (and deleted after its lifetime), the held ones never
    assert run["gangs_fitting"] >= 10 and run["gangs_bound_whole"] == run["gangs_fitting"], run
    assert run["gangs_deleted_after_lifetime"] >= run["gangs_fitting"] - 3, run
    assert run["gangs_held"] >= 3 and run["gangs_held_with_a_member_bound"] == 0, run
    assert run["gangs_stuck_partial"] == 0, run
    # rotations, each old token refused, and the scheduler reloading after the 401s
    assert run["rotations"] >= 3 and run["old_token_refused"] == run["rotations"], run
    assert run["credential_reloads"] >= 1, run
    assert run["credential_reload_failures"] == 0 and run["tracebacks"] == 0, run
    assert run["churn_created"] >= 3 and run["churn_deleted"] >= 3, run
    for process in ("scheduling", "intake"):
        assert len(run["memory"][process]["rss_progress"]) >= 10, run["memory"]
        assert run["memory"][process]["rss_start_mib"] > 10, run["memory"]
    assert done.returncode == 0, output
