"""The flags of a parsed command line as ``/flagz`` lists them: every long flag of the command by name
(an alias under each of its names), with the value in force written as pflag's ``Value.String()`` writes
kube-scheduler's (``true``/``false``, ``15s``, ``[a,b]`` for a repeatable flag; empty for a flag not given
whose default is decided at start), and the value of a flag that holds a secret replaced by ``CLASSIFIED``
(upstream's ``classified`` annotation).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection
from typing import Any

from kopf_scheduler.framework.go_duration import go_duration
from kopf_scheduler.service import zpages

#: flags whose values are credentials, shown as ``CLASSIFIED``: none of ``run``'s flags holds one (its
#: credentials come from the kubeconfig file, which it names by path)
CLASSIFIED: frozenset[str] = frozenset()
REDACTED = "CLASSIFIED"


def _text(action: argparse.Action, value: object) -> str:
    if value is None:  # a default decided at start (from --config, the API server): not known here
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    if isinstance(value, float) and action.metavar == "DURATION":
        return go_duration(value)
    return str(value)


def flag_values(
    parser: argparse.ArgumentParser, args: argparse.Namespace, classified: Collection[str] = CLASSIFIED
) -> dict[str, str]:
    """``{flag name without dashes: value}`` for every long flag of ``parser`` (help and version left out)."""
    flags: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        for option in action.option_strings:
            if not option.startswith("--"):
                continue
            name = option[2:]
            flags[name] = REDACTED if name in classified else _text(action, getattr(args, action.dest, None))
    return flags


#: a subcommand's ``add_parser(subparsers, name)``
AddParser = Callable[[Any, str], None]


def run_flags(args: argparse.Namespace, add_parser: AddParser) -> dict[str, str]:
    """The flags of the subcommand ``add_parser`` builds (``run``'s), as ``args`` holds them."""
    parser = argparse.ArgumentParser(prog="kopf-scheduler")
    add_parser(parser.add_subparsers(), "run")
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return flag_values(subparsers.choices["run"], args)


def record_run_flags(args: argparse.Namespace, add_parser: AddParser) -> None:
    """Hands ``run``'s flags to ``/flagz`` (the service runs in this process); ``run`` passes its own
    ``add_parser``, so that this module does not import it back."""
    zpages.record_flags(run_flags(args, add_parser))
