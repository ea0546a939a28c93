"""Runs the ``kopf-scheduler`` command line as users do: a fresh process, output captured."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str, command: str = "simulate", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kopf-scheduler <command> <args>`` (``simulate`` unless told otherwise)."""
    return subprocess.run(
        [sys.executable, "-m", "kopf_scheduler", command, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
