"""``kopf-scheduler simulate``: schedule the pods of plain Kubernetes YAML onto its nodes, offline."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from kopf_scheduler.api.errors import UsageError
from kopf_scheduler.service.gc_freeze import collector_paused


def add_parser(sub: Any, name: str) -> None:
    parser = sub.add_parser(
        name,
        help="schedule pods from YAML onto nodes from YAML, offline, with the real scheduling loop",
        description="Schedule the pending pods of plain Kubernetes YAML (or of a live cluster, read only) "
        "onto its nodes, offline, with the real scheduling loop: where each pod goes, or why it fits "
        "nowhere.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cluster",
        action="append",
        type=Path,
        metavar="PATH",
        help="YAML file or folder with Node and Pod objects, and optionally PriorityClass and "
        "PodDisruptionBudget objects (repeatable); pods with spec.nodeName are existing load",
    )
    source.add_argument(
        "--from-cluster",
        action="store_true",
        help="read a live cluster instead (--kubeconfig, else $KUBECONFIG, else in-cluster, else "
        "~/.kube/config; lists only): its pending pods are placed, under its SchedulingProfiles unless "
        "--profile is given",
    )
    parser.add_argument("--kubeconfig", type=Path, default=None, help="with --from-cluster")
    parser.add_argument(
        "--context", default=None, help="with --from-cluster: this kubeconfig context, not the current one"
    )
    parser.add_argument(
        "--dump",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --from-cluster: also write what was read to DIR/cluster.yaml and DIR/profiles.yaml, "
        "for `simulate --cluster DIR/cluster.yaml --profile DIR/profiles.yaml` later",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="SchedulingProfile YAML (repeatable); "
        "default: the built-in profile for default-scheduler and kopf-scheduler",
    )
    parser.add_argument(
        "--fresh",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also place the bound pods the profiles serve afresh and show which would move "
        "(default: on with --from-cluster)",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed for breaking score ties")
    parser.add_argument(
        "--output",
        "-o",
        choices=("table", "json", "yaml"),
        default="table",
        help="output format (default: table)",
    )
    parser.add_argument(
        "--explain", action="store_true", help="show each node's filter verdict and scores per pod"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kopf_scheduler.simulate.loader import load_cluster, load_profiles
    from kopf_scheduler.simulate.output import render
    from kopf_scheduler.simulate.run import simulate

    if args.dump is not None and not args.from_cluster:
        raise UsageError("--dump: only with --from-cluster")
    if args.context is not None and not args.from_cluster:
        raise UsageError("--context: only with --from-cluster")
    if args.from_cluster:
        from kopf_scheduler.simulate.live import load_live

        cluster, profiles, source = load_live(args.kubeconfig, args.profile, args.dump, args.context)
    else:
        with collector_paused():
            cluster, profiles = load_cluster(args.cluster), load_profiles(args.profile)
        source = ", ".join(map(str, args.cluster))
    for line in cluster.warnings():
        print(line, file=sys.stderr)
    if not cluster.nodes and not cluster.pending_pods:
        raise UsageError(f"no Node or Pod objects found in {source}")
    result = asyncio.run(simulate(cluster, profiles, seed=args.seed, explain=args.explain))
    fresh = None
    if args.fresh if args.fresh is not None else args.from_cluster:
        from kopf_scheduler.simulate import fresh as placement

        again, today = placement.fresh_input(cluster, placement.served_names(profiles))
        fresh = placement.compare(asyncio.run(simulate(again, profiles, seed=args.seed)), today)
    print(render(result, args.output, args.explain, fresh))
    return 0
