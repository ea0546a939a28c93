"""`profiles import` writes one file per profile with --output-dir; -o DIR, its old spelling, still works
but warns, since -o names the output format in simulate and explain."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kopf_scheduler.__main__ import main

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: first-scheduler
- schedulerName: second-scheduler
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(CONFIG)
    return path


def test_output_dir_writes_a_file_per_profile_silently(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "profiles"
    assert main(["profiles", "import", str(config), "--output-dir", str(out)]) == 0
    printed, err = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == ["first-scheduler.yaml", "second-scheduler.yaml"]
    assert printed.split() == [str(out / "first-scheduler.yaml"), str(out / "second-scheduler.yaml")]
    assert err == ""


def test_dash_o_still_writes_the_files_with_a_deprecation_warning(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "profiles"
    assert main(["profiles", "import", str(config), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["first-scheduler.yaml", "second-scheduler.yaml"]
    assert capsys.readouterr().err == (
        f"kopf-scheduler profiles import: warning: -o {out} is deprecated, use --output-dir {out} "
        "(-o names the output format, as in simulate and explain)\n"
    )


def test_dash_o_and_output_dir_together_are_refused(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["profiles", "import", str(config), "-o", str(tmp_path / "a"), "--output-dir", str(tmp_path / "b")]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "kopf-scheduler profiles: error: -o DIR: give the directory once, with --output-dir\n"
    )
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_help_shows_output_dir_and_not_dash_o(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["profiles", "import", "--help"])
    out = capsys.readouterr().out
    assert "--output-dir DIR" in out and re.search(r"(?<![\w-])-o\b", out) is None, out
