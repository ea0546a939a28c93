"""`kopf-scheduler dev-cluster up|down|status|nodes`: the local control plane from the shell."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from kopf_scheduler.devcluster.cluster import (
    CONTROLLER_MANAGER,
    SCHEDULER,
    ClusterError,
    DevCluster,
    default_crds_dir,
    default_state_dir,
)
from kopf_scheduler.devcluster.nodes import NodeCreationError, create_nodes, load_template


def add_parser(subparsers: Any, name: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help="run a local etcd + kube-apiserver (+ kube-scheduler, kube-controller-manager) for tests "
        "and benchmarks",
        description=(
            "A real etcd and kube-apiserver on loopback (binaries from `make controlplane`). "
            f"State, logs and kubeconfig live in --state-dir (default: {default_state_dir()}, "
            "i.e. ${XDG_RUNTIME_DIR:-/tmp}/kopf-scheduler/dev-cluster)."
        ),
    )

    def usage(args: argparse.Namespace) -> int:
        parser.print_help()
        return 2

    parser.set_defaults(func=usage)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="cluster state, logs and kubeconfig "
        "(default: ${XDG_RUNTIME_DIR:-/tmp}/kopf-scheduler/dev-cluster)",
    )
    sub = parser.add_subparsers(dest="action", metavar="ACTION")

    up = sub.add_parser("up", parents=[common], help="start the control plane and wait until ready")
    up.add_argument(
        "--with-kube-scheduler",
        action="store_true",
        help="also start the upstream kube-scheduler (profile default-scheduler)",
    )
    up.add_argument(
        "--with-controller-manager",
        action="store_true",
        help="also start kube-controller-manager (every default controller but nodelifecycle and "
        "serviceaccount-token: Deployments, ReplicaSets, garbage collection, PDB status, PV binding, ...)",
    )
    up.add_argument(
        "--crds",
        type=Path,
        default=None,
        help="folder of manifests to apply, subfolders included (default: the repo's crds/)",
    )
    up.add_argument("--timeout", type=float, default=120.0, help="start-up budget in seconds (120)")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", parents=[common], help="stop everything and delete the state dir")
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", parents=[common], help="show components; exit 1 if not running")
    status.set_defaults(func=cmd_status)

    nodes = sub.add_parser("nodes", parents=[common], help="create fake Ready nodes")
    nodes.add_argument("--count", type=int, required=True, help="how many nodes")
    nodes.add_argument(
        "--template", type=Path, default=None, metavar="FILE", help="Node YAML overriding the defaults"
    )
    nodes.add_argument(
        "--zones",
        type=int,
        default=3,
        metavar="K",
        help="spread the nodes over K zones: node i gets topology.kubernetes.io/zone=zone-<i mod K> "
        "(default 3)",
    )
    nodes.add_argument("--prefix", default="node-", help="name prefix (default node-)")
    nodes.add_argument("--start", type=int, default=0, help="first node index (default 0)")
    nodes.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    nodes.set_defaults(func=cmd_nodes)
    return parser


def cmd_up(args: argparse.Namespace) -> int:
    crds = args.crds if args.crds is not None else default_crds_dir()
    cluster = DevCluster(
        args.state_dir,
        crds_dir=crds,
        startup_timeout=args.timeout,
        with_controller_manager=args.with_controller_manager,
    )
    try:
        cluster.up()
        if args.with_kube_scheduler:
            cluster.start_kube_scheduler()
    except ClusterError as e:
        cluster.down(remove_state=False)
        print(f"kopf-scheduler dev-cluster: {e}", file=sys.stderr)
        print(f"logs kept in {cluster.state_dir}; `dev-cluster down` removes them", file=sys.stderr)
        return 1
    except BaseException:  # Ctrl-C or a bug half-way: leave nothing running
        cluster.down(remove_state=False)
        raise
    t = cluster.timings
    print(
        f"etcd ready in {t.get('etcd', 0):.1f} s, kube-apiserver ready in {t.get('kube-apiserver', 0):.1f} s"
    )
    for name in (SCHEDULER, CONTROLLER_MANAGER):
        if name in t:
            print(f"{name} ready in {t[name]:.1f} s")
    print(f"server:     {cluster.server}")
    print(f"state dir:  {cluster.state_dir}")
    print(f"export KUBECONFIG={cluster.kubeconfig}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    cluster = DevCluster(args.state_dir)
    had = bool(cluster.components)
    cluster.down()
    print("stopped" if had else f"nothing recorded in {cluster.state_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cluster = DevCluster(args.state_dir)
    if not cluster.components:
        print(f"not running (nothing recorded in {cluster.state_dir})")
        return 1
    for c in cluster.status():
        state = "alive" if c.alive else "DEAD"
        print(f"{c.name:<23} pid {c.pid:<8} {state:<6} {c.url}  log {c.log_file}")
    print(f"server:     {cluster.server}")
    print(f"kubeconfig: {cluster.kubeconfig}")
    return 0 if cluster.running() else 1


def cmd_nodes(args: argparse.Namespace) -> int:
    cluster = DevCluster(args.state_dir)
    client = cluster.client()
    template = load_template(args.template) if args.template else None
    try:
        result = asyncio.run(
            create_nodes(
                client,
                args.count,
                prefix=args.prefix,
                zones=args.zones,
                template=template,
                start=args.start,
                concurrency=args.concurrency,
            )
        )
    except NodeCreationError as e:
        print(f"kopf-scheduler dev-cluster nodes: {e}", file=sys.stderr)
        return 1
    rate = args.count / result.seconds if result.seconds > 0 else 0.0
    print(f"created {args.count} nodes in {result.seconds:.2f} s ({rate:.0f}/s)")
    return 0
