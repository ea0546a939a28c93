"""The `kopf-scheduler` command line.

Each sub-command lives in its own module and registers itself through ``add_parser``; the modules are
imported only for the command that runs, so `simulate` never pays for Kopf and `dev-cluster` never pays
for numpy.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from kopf_scheduler import __version__
from kopf_scheduler.api.errors import UsageError

DESCRIPTION = (
    "A Kubernetes scheduler faithful to kube-scheduler v1.37, run as a Kopf operator (run) and configured "
    "by SchedulingProfile resources. It also places pods offline (simulate), explains a placement on a live "
    "cluster (explain), brings kube-scheduler configurations over (profiles) and runs a local control "
    "plane for tests (dev-cluster)."
)
EPILOG = "`kopf-scheduler COMMAND --help` shows a command's options."

# command name -> module exposing ``add_parser(subparsers)`` and ``run(args) -> int``
COMMANDS: dict[str, str] = {
    "simulate": "kopf_scheduler.cli.simulate",
    "dev-cluster": "kopf_scheduler.cli.dev_cluster",
    "run": "kopf_scheduler.cli.run",
    "profiles": "kopf_scheduler.cli.profiles",
    "explain": "kopf_scheduler.cli.explain",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kopf-scheduler", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"kopf-scheduler v{__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        importlib.import_module(module).add_parser(sub, name)
    return parser


#: commands that hold everything they read until they end: as a program, they exit without freeing it
#: (tearing down the objects of a 5,000-node simulation takes longer than reading its file)
EXIT_WITHOUT_TEARDOWN = frozenset({"simulate", "profiles", "explain"})


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # which flags were given (run's fallbacks)
    try:
        return int(args.func(args) or 0)
    except UsageError as e:
        print(f"kopf-scheduler {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def cli() -> None:
    """The ``kopf-scheduler`` program: ``main``, then for the offline commands an exit that skips
    freeing their objects one by one (output flushed first; they start no threads or child processes)."""
    argv = sys.argv[1:]
    code = main(argv)
    if argv and argv[0] in EXIT_WITHOUT_TEARDOWN:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    cli()
