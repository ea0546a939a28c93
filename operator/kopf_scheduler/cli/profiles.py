"""``kopf-scheduler profiles``: translate between kube-scheduler's KubeSchedulerConfiguration and
SchedulingProfiles (``api/kube_scheduler_config.py``), offline.

``import FILE`` prints one SchedulingProfile per profile of the configuration as a YAML stream (or writes
``DIR/<name>.yaml`` each with ``--output-dir DIR``, never over an existing file; ``-o DIR``, its old
spelling, still works with a warning: ``-o`` names the output format in ``simulate`` and ``explain``);
``export FILE|DIR...`` prints the one configuration serving the SchedulingProfiles there (every document
of the files, and of a folder's ``*.yaml``/``*.yml`` files, must be one). Fields without an equivalent are
warned about on stderr, one line each, naming the field.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.errors import ProfileError, UsageError


def add_parser(sub: Any, name: str) -> None:
    parser = sub.add_parser(
        name,
        help="import a kube-scheduler configuration as SchedulingProfiles, or export them as one",
        description="Translate between kube-scheduler's KubeSchedulerConfiguration and SchedulingProfiles, "
        "offline. Fields without an equivalent are warned about on stderr, one line each, naming the field.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    imp = actions.add_parser(
        "import", help="KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) -> SchedulingProfiles"
    )
    imp.add_argument("file", type=Path, metavar="FILE", help="the configuration ('-': stdin)")
    imp.add_argument(
        "--output-dir",
        type=Path,
        metavar="DIR",
        help="write DIR/<name>.yaml per profile instead of printing them (never over an existing file)",
    )
    # the old spelling: -o names the output format in simulate and explain
    imp.add_argument("-o", dest="deprecated_output_dir", type=Path, metavar="DIR", help=argparse.SUPPRESS)
    imp.set_defaults(func=run_import)
    exp = actions.add_parser("export", help="SchedulingProfiles -> one KubeSchedulerConfiguration")
    exp.add_argument(
        "paths", type=Path, nargs="+", metavar="FILE|DIR", help="YAML with SchedulingProfiles ('-': stdin)"
    )
    exp.set_defaults(func=run_export)


def run_import(args: argparse.Namespace) -> int:
    from kopf_scheduler.api.kube_scheduler_config import import_config
    from kopf_scheduler.api.profile import parse_profile
    from kopf_scheduler.framework.runtime.build import build_framework
    from kopf_scheduler.plugins.defaults import default_plugins
    from kopf_scheduler.plugins.registry import new_registry
    from kopf_scheduler.simulate.client import SimulatedCluster

    output_dir = _output_dir(args)
    docs = _load(args.file)
    if len(docs) != 1:
        raise UsageError(f"{args.file}: expected one KubeSchedulerConfiguration, found {len(docs)} documents")
    registry = new_registry()

    def builds(manifest: Any) -> None:
        """The profile as the operator would build it: plugin arguments and invariants checked."""
        build_framework(parse_profile(manifest), registry, default_plugins(), SimulatedCluster())

    try:
        imported = import_config(docs[0], set(registry.names()), builds)
    except ProfileError as e:
        raise UsageError(f"{args.file}: {e}") from None
    for warning in imported.warnings:
        print(f"kopf-scheduler profiles import: warning: {warning}", file=sys.stderr)
    if output_dir is None:
        sys.stdout.write(yaml.safe_dump_all(imported.profiles, sort_keys=False))
        return 0
    files = {output_dir / f"{m['metadata']['name']}.yaml": m for m in imported.profiles}
    existing = [str(path) for path in files if path.exists()]
    if existing:
        raise UsageError(f"{', '.join(existing)}: already exists; nothing written")
    output_dir.mkdir(parents=True, exist_ok=True)
    for path, manifest in files.items():
        path.write_text(yaml.safe_dump(manifest, sort_keys=False))
        print(path)
    return 0


def _output_dir(args: argparse.Namespace) -> Path | None:
    """``--output-dir``, or ``-o`` (its old spelling, with a warning on stderr)."""
    old: Path | None = getattr(args, "deprecated_output_dir", None)
    if old is None:
        return args.output_dir  # type: ignore[no-any-return]
    if args.output_dir is not None:
        raise UsageError("-o DIR: give the directory once, with --output-dir")
    print(
        f"kopf-scheduler profiles import: warning: -o {old} is deprecated, use --output-dir {old} "
        "(-o names the output format, as in simulate and explain)",
        file=sys.stderr,
    )
    return old


def run_export(args: argparse.Namespace) -> int:
    from kopf_scheduler.api.kube_scheduler_config import export_config
    from kopf_scheduler.api.schema import KIND

    where: list[str] = []
    manifests: list[Any] = []
    for path in args.paths:
        files = sorted(path.glob("*.y*ml")) if path.is_dir() else [path]
        for file in files:
            for i, doc in enumerate(_load(file)):
                where.append(f"{file} (document {i + 1})")
                manifests.append(doc)
    if not manifests:
        raise UsageError(f"no {KIND} in {', '.join(map(str, args.paths))}")
    try:
        config, warnings = export_config(manifests)
    except ProfileError as e:
        index, _, rest = e.path.removeprefix("[").partition("]")
        field = rest.removeprefix(".")
        raise UsageError(f"{where[int(index)]}: {f'{field}: ' if field else ''}{e.message}") from None
    for warning in warnings:
        index, _, rest = warning.removeprefix("[").partition("]")
        print(f"kopf-scheduler profiles export: warning: {where[int(index)]}: {rest[1:]}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump(config, sort_keys=False))
    return 0


def _load(path: Path) -> list[Any]:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text()
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}:{line} not valid YAML: {getattr(e, 'problem', None) or e}") from None
