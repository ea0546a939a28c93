"""``kopf-scheduler run``: the operator, watching all namespaces, with leader election and metrics.

The flags land in ``KOPF_SCHEDULER_*`` variables, which is also how ``kopf run -m kopf_scheduler.handlers``
is configured. Kopf is imported only when the command runs (through ``handlers.runner``).
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import Any


def add_parser(sub: Any, name: str) -> None:
    parser = sub.add_parser(name, help="run the scheduler against a cluster (KUBECONFIG or in-cluster)")
    parser.add_argument("--metrics-port", type=int, default=10259, help="Prometheus /metrics port (0: off)")
    parser.add_argument("--liveness-port", type=int, default=8080, help="liveness endpoint /healthz (0: off)")
    parser.add_argument(
        "--default-scheduler-name",
        default="kopf-scheduler",
        help="schedulerName the built-in default profile serves when no profile claims it ('' for none)",
    )
    parser.add_argument("--leader-elect", default="true", choices=("true", "false"))
    parser.add_argument("--lease-namespace", default="kube-system")
    parser.add_argument("--lease-name", default="kopf-scheduler")
    parser.add_argument("--bind-concurrency", type=int, default=64)
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    os.environ.update(
        {
            "KOPF_SCHEDULER_METRICS_PORT": str(args.metrics_port),
            "KOPF_SCHEDULER_DEFAULT_SCHEDULER_NAME": args.default_scheduler_name,
            "KOPF_SCHEDULER_LEADER_ELECT": args.leader_elect,
            "KOPF_SCHEDULER_LEASE_NAMESPACE": args.lease_namespace,
            "KOPF_SCHEDULER_LEASE_NAME": args.lease_name,
            "KOPF_SCHEDULER_BIND_CONCURRENCY": str(args.bind_concurrency),
        }
    )
    runner = importlib.import_module("kopf_scheduler.handlers.runner")
    return int(runner.main(verbose=args.verbose, liveness_port=args.liveness_port))
