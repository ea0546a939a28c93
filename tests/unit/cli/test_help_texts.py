"""`kopf-scheduler --help` and every command's help read as a user sees them: a description of the program,
whole sentences (none cut at its first line), no reStructuredText double backticks, and every option of
simulate, explain and profiles says what it is for."""

from __future__ import annotations

import argparse

import pytest

from kopf_scheduler.__main__ import build_parser, main


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command and action parser by its command line (``kopf-scheduler profiles import``)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser) -> None:
        found[parser.prog] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    walk(child)

    walk(build_parser())
    return found


PARSERS = _parsers()


def test_the_program_describes_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "A Kubernetes scheduler faithful to kube-scheduler v1.37, run as a Kopf operator (run)" in out
    for command in ("simulate", "explain", "profiles", "dev-cluster"):
        assert f"({command})" in out, command
    assert "`kopf-scheduler COMMAND --help` shows a command's options." in out
    assert "The `kopf-scheduler` command line." not in out


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_help_has_no_double_backticks_and_whole_descriptions(
    prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = PARSERS[prog]
    text = parser.format_help()
    assert "``" not in text, text
    description = parser.description
    if description is not None:
        assert description.rstrip().endswith((".", ")")), f"{prog}: description cut: {description!r}"
        assert description[0].isupper(), f"{prog}: {description!r}"


@pytest.mark.parametrize(
    "prog",
    ["kopf-scheduler simulate", "kopf-scheduler explain", "kopf-scheduler profiles import"],
)
def test_every_option_says_what_it_is_for(prog: str) -> None:
    for action in PARSERS[prog]._actions:
        if action.help != argparse.SUPPRESS:
            assert action.help, f"{prog} {'/'.join(action.option_strings) or action.dest}: no help"


@pytest.mark.parametrize(
    ("prog", "choices"),
    [("kopf-scheduler simulate", ["table", "json", "yaml"]), ("kopf-scheduler explain", ["table", "json"])],
)
def test_dash_o_is_the_output_format(prog: str, choices: list[str]) -> None:
    [output] = [a for a in PARSERS[prog]._actions if "-o" in a.option_strings]
    assert output.option_strings == ["--output", "-o"] and list(output.choices or ()) == choices
    assert output.help == "output format (default: table)"
