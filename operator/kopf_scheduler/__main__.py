"""The `kopf-scheduler` command line.

Each sub-command lives in its own module and registers itself through ``add_parser``; the modules are
imported only for the command that runs, so `simulate` never pays for Kopf and `dev-cluster` never pays
for numpy.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from kopf_scheduler.errors import UsageError

# command name -> module exposing ``add_parser(subparsers)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "simulate": "kopf_scheduler.simulate.cli",
    "dev-cluster": "kopf_scheduler.devcluster.cli",
    "run": "kopf_scheduler.run_cli",
    "profiles": "kopf_scheduler.profiles_cli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kopf-scheduler", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"kopf-scheduler {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
