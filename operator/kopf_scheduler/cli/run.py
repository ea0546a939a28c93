"""``kopf-scheduler run``: the operator, watching all namespaces, with leader election and metrics.

The flags land in ``KOPF_SCHEDULER_*`` variables, which is also how ``kopf run -m kopf_scheduler.handlers``
(the same service with Kopf's watches in the one process) is configured. Kopf is imported only when the
command runs (through ``handlers.runner``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from kopf_scheduler import __version__
from kopf_scheduler.api.bounds import DEFAULT_EXTENDER_TLS_DIR
from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.feature_gates import (
    FeatureGateError,
    FeatureGates,
    check_implemented,
    parse_feature_gates,
    parse_version,
)
from kopf_scheduler.service import config

if TYPE_CHECKING:
    from kopf_scheduler.service.config_file import FileConfig


def add_parser(sub: Any, name: str) -> None:
    parser = sub.add_parser(
        name,
        help="run the scheduler against a cluster",
        description="Run the scheduler against a cluster: it watches pods, nodes, SchedulingProfiles and the "
        "objects its plugins read, and binds the pods whose schedulerName a profile serves. Takes "
        "kube-scheduler's flags (--config, --kubeconfig, --leader-elect..., --secure-port, --feature-gates) "
        "beside its own.",
    )
    serving = parser.add_argument_group(
        "the secure port: /metrics, /healthz, /livez, /readyz, /flagz and /statusz, as kube-scheduler's 10259"
    )
    serving.add_argument(
        "--metrics-port",
        "--secure-port",
        type=int,
        default=10259,
        help="HTTPS port of the secure port's paths (0: off)",
    )
    serving.add_argument("--bind-address", default="0.0.0.0", help="address the secure port listens on")
    serving.add_argument(
        "--tls-cert-file",
        default="",
        metavar="FILE",
        help="serving certificate (PEM), re-read when it changes; default: a self-signed one made at start",
    )
    serving.add_argument("--tls-private-key-file", default="", metavar="FILE", help="its private key (PEM)")
    serving.add_argument(
        "--authorization-always-allow-paths",
        default=None,
        metavar="PATHS",
        help="comma-separated paths served without credentials (default /healthz,/readyz,/livez); any other "
        "path needs a user the API server authenticates (TokenReview) and authorises (SubjectAccessReview)",
    )
    serving.add_argument(
        "--insecure-metrics",
        action="store_true",
        help="development only: plain HTTP on 127.0.0.1, no authentication",
    )
    parser.add_argument("--liveness-port", type=int, default=8080, help="liveness endpoint /healthz (0: off)")
    parser.add_argument(
        "--default-scheduler-name",
        default=None,
        help="schedulerName the built-in default profile serves when no profile claims it ('' for none); "
        "default: kopf-scheduler, none with --config",
    )
    parser.add_argument(
        "--config",
        default="",
        metavar="FILE",
        help="a kube-scheduler KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1): its profiles "
        "serve where no SchedulingProfile does; --leader-elect* flags override its leaderElection, "
        "--kubeconfig is ignored (its clientConnection.kubeconfig applies), as kube-scheduler combines them",
    )
    parser.add_argument(
        "--kubeconfig",
        default="",
        metavar="FILE",
        help="the API server and credentials of both processes; default: $KUBECONFIG, else in-cluster, "
        "else ~/.kube/config (ignored with --config, as kube-scheduler ignores it)",
    )
    election = parser.add_argument_group("leader election, as kube-scheduler's flags")
    election.add_argument(
        "--leader-elect",
        nargs="?",
        const="true",
        default=None,
        choices=("true", "false"),
        help="campaign for the Lease before scheduling (a bare --leader-elect is true)",
    )
    election.add_argument(
        "--leader-elect-resource-namespace",
        "--lease-namespace",
        dest="lease_namespace",
        default=None,
        metavar="NAMESPACE",
        help="where the Lease lives (default kube-system)",
    )
    election.add_argument(
        "--leader-elect-resource-name",
        "--lease-name",
        dest="lease_name",
        default=None,
        metavar="NAME",
        help="the Lease's name (default kopf-scheduler)",
    )
    for flag, default, meaning in (
        ("lease-duration", None, "how long a Lease holds without renewal (default 15s)"),
        ("renew-deadline", None, "how long the leader retries renewing before it gives up (default 10s)"),
        ("retry-period", None, "the wait between tries to acquire or renew (default 2s)"),
    ):
        election.add_argument(
            f"--leader-elect-{flag}", type=_duration, default=default, metavar="DURATION", help=meaning
        )
    parser.add_argument(
        "--bind-concurrency", type=int, default=64, help="bindings in flight at once (default 64)"
    )
    bounds = parser.add_argument_group("bounds on SchedulingProfiles")
    bounds.add_argument(
        "--allow-scheduler-name",
        action="append",
        default=[],
        metavar="NAME",
        help="let profiles claim this reserved schedulerName (default-scheduler, or one given with "
        "--deny-scheduler-name); repeatable",
    )
    bounds.add_argument(
        "--deny-scheduler-name",
        action="append",
        default=[],
        metavar="NAME",
        help="reserve this schedulerName besides default-scheduler (another scheduler's); repeatable",
    )
    bounds.add_argument(
        "--extender-tls-dir",
        default=DEFAULT_EXTENDER_TLS_DIR,
        metavar="DIR",
        help=f"the one directory extender caFile, certFile and keyFile are read from "
        f"({DEFAULT_EXTENDER_TLS_DIR})",
    )
    bounds.add_argument(
        "--allow-extender-link-local",
        action="store_true",
        help="let extender URLs point at link-local and cloud metadata addresses (169.254.0.0/16, "
        "fe80::/10, metadata.google.internal, ...)",
    )
    parser.add_argument(
        "--shadow",
        action="store_true",
        help="bind nothing and write nothing: every profile judges the placements another scheduler makes "
        "for its schedulerName (kopf_scheduler_shadow_decisions_total); no leader election",
    )
    gates = parser.add_argument_group("feature gates, as kube-scheduler v1.37's")
    gates.add_argument(
        "--feature-gates",
        default="",
        metavar="A=true,B=false",
        help="Kubernetes feature gates over the emulated version's defaults; a gate kopf-scheduler does not "
        "implement at the value asked is refused",
    )
    gates.add_argument(
        "--emulated-version",
        default="",
        metavar="1.3X",
        help="whose gate defaults apply, 1.34 to 1.37, as kube-scheduler's flag reads it (1.36, kube=1.36); "
        "default: the API server's minor version, within 1.35 to 1.37",
    )
    parser.add_argument(
        "-v",
        "--v",
        "--verbose",
        dest="verbosity",
        type=int,
        nargs="?",
        const=4,
        default=0,
        metavar="LEVEL",
        help="log verbosity as kube components count it: 0 (default) informational, 4 and above debug "
        "(Kopf's verbose mode in both processes); a bare -v is 4",
    )
    parser.add_argument(
        "--logging-format",
        default="text",
        choices=config.LOGGING_FORMATS,
        help="text: one line per message with the logger's full name; json: one JSON object per line",
    )
    parser.add_argument("--version", action="version", version=f"kopf-scheduler v{__version__}")
    parser.set_defaults(func=run)


def _duration(text: str) -> float:
    """A Go duration flag (``15s``, ``1m``), in seconds; argparse reports the error with the flag."""
    try:
        seconds = parse_duration(text)
    except DurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than zero, got {text!r}")
    return seconds


def _read_config(args: argparse.Namespace) -> FileConfig:
    """``--config``'s file, every profile built as the operator will build it (plugin arguments and
    invariants checked with v1.37's gates, as ``profiles import`` does); ``ProfileError`` names the field."""
    from kopf_scheduler.api.profile import ProfileSpec
    from kopf_scheduler.framework.runtime.build import build_framework
    from kopf_scheduler.plugins.defaults import default_plugins
    from kopf_scheduler.plugins.registry import new_registry
    from kopf_scheduler.service.config_file import parse_config, read_document
    from kopf_scheduler.simulate.client import SimulatedCluster

    registry = new_registry()

    def builds(spec: ProfileSpec) -> None:
        build_framework(spec, registry, default_plugins(), SimulatedCluster())

    bounds = config.bounds_from_env(
        config.flag_environment(
            {
                config.ALLOW_SCHEDULER_NAMES: ",".join(args.allow_scheduler_name),
                config.DENY_SCHEDULER_NAMES: ",".join(args.deny_scheduler_name),
                config.EXTENDER_TLS_DIR: args.extender_tls_dir,
                config.ALLOW_EXTENDER_LINK_LOCAL: bool(args.allow_extender_link_local),
            }
        )
    )
    return parse_config(read_document(args.config), bounds, set(registry.names()), builds)


#: the variables a flag writes straight from its value (flag dest by variable name): when the flag is not
#: on the command line, a variable set in the environment keeps its value
FLAG_OF_VARIABLE = {
    config.BIND_ADDRESS: "bind_address",
    config.TLS_CERT_FILE: "tls_cert_file",
    config.TLS_PRIVATE_KEY_FILE: "tls_private_key_file",
    config.INSECURE_METRICS: "insecure_metrics",
    config.SHADOW: "shadow",
    config.BIND_CONCURRENCY: "bind_concurrency",
    config.ALLOW_SCHEDULER_NAMES: "allow_scheduler_name",
    config.DENY_SCHEDULER_NAMES: "deny_scheduler_name",
    config.EXTENDER_TLS_DIR: "extender_tls_dir",
    config.ALLOW_EXTENDER_LINK_LOCAL: "allow_extender_link_local",
    config.ALWAYS_ALLOW_PATHS_VAR: "authorization_always_allow_paths",
    config.FEATURE_GATES: "feature_gates",
    config.EMULATED_VERSION: "emulated_version",
    config.LOGGING_FORMAT: "logging_format",
}


def given_flags(args: argparse.Namespace) -> set[str] | None:
    """The dests of the flags on ``run``'s command line (``args.argv``, the program's arguments, as
    ``main`` keeps them), or None when the command line is not known (every flag counts as given)."""
    argv = getattr(args, "argv", None)
    if argv is None or "run" not in argv:
        return None
    parser = argparse.ArgumentParser(prog="kopf-scheduler", add_help=False)
    add_parser(parser.add_subparsers(), "run")
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run_parser = subparsers.choices["run"]
    for action in run_parser._actions:
        action.default = argparse.SUPPRESS
    given, _ = run_parser.parse_known_args(argv[argv.index("run") + 1 :])
    return set(vars(given))


def run(args: argparse.Namespace) -> int:
    # refused now: what holds at every version, or all of it with --emulated-version (upstream's checks
    # first); without it the rest waits for the API server's version, at start
    try:
        gates = parse_feature_gates(args.feature_gates)
        if args.emulated_version:
            FeatureGates.resolve(parse_version(args.emulated_version), gates)
        else:
            check_implemented(gates)
    except FeatureGateError as e:
        print(f"kopf-scheduler run: {e}", file=sys.stderr)
        return 2
    # kube-scheduler's configuration file pulls in its schema and YAML: only when the command runs
    from kopf_scheduler.service.config_file import LeaderElection, merge_leader_election

    flags = LeaderElection(
        leader_elect=None if args.leader_elect is None else args.leader_elect == "true",
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        lease_name=args.lease_name,
        lease_namespace=args.lease_namespace,
    )
    kubeconfig, election, file = args.kubeconfig, flags, None
    default_name = "kopf-scheduler" if args.default_scheduler_name is None else args.default_scheduler_name
    if args.config:
        try:
            file = _read_config(args)
            election = merge_leader_election(file.leader_election, flags)
        except ProfileError as e:
            print(f"kopf-scheduler run: {args.config}: {e}", file=sys.stderr)
            return 2
        except UsageError as e:
            print(f"kopf-scheduler run: {e}", file=sys.stderr)
            return 2
        for warning in file.warnings:
            print(f"kopf-scheduler run: warning: {args.config}: {warning}", file=sys.stderr)
        if args.kubeconfig:
            print(
                "kopf-scheduler run: warning: --kubeconfig is ignored with --config, as kube-scheduler "
                "ignores it: the file's clientConnection.kubeconfig applies",
                file=sys.stderr,
            )
        kubeconfig = file.kubeconfig or ""
        if args.default_scheduler_name is None:
            default_name = ""  # the file's profiles stand in for the built-in default, as in kube-scheduler
    if kubeconfig:  # both processes, the scheduler's own client and Kopf's, read it from there
        os.environ["KUBECONFIG"] = kubeconfig
    settings: dict[str, str | int | float | bool | None] = {
        config.METRICS_PORT: args.metrics_port,
        config.BIND_ADDRESS: args.bind_address,
        config.TLS_CERT_FILE: args.tls_cert_file,
        config.TLS_PRIVATE_KEY_FILE: args.tls_private_key_file,
        config.INSECURE_METRICS: bool(args.insecure_metrics),
        config.SHADOW: bool(args.shadow),
        config.DEFAULT_SCHEDULER_NAME: default_name,
        config.LEADER_ELECT: election.leader_elect,
        config.LEASE_NAMESPACE: election.lease_namespace,
        config.LEASE_NAME: election.lease_name,
        config.LEASE_DURATION: election.lease_duration,
        config.RENEW_DEADLINE: election.renew_deadline,
        config.RETRY_PERIOD: election.retry_period,
        config.BIND_CONCURRENCY: args.bind_concurrency,
        config.ALLOW_SCHEDULER_NAMES: ",".join(args.allow_scheduler_name),
        config.DENY_SCHEDULER_NAMES: ",".join(args.deny_scheduler_name),
        config.EXTENDER_TLS_DIR: args.extender_tls_dir,
        config.ALLOW_EXTENDER_LINK_LOCAL: bool(args.allow_extender_link_local),
        config.ALWAYS_ALLOW_PATHS_VAR: args.authorization_always_allow_paths,
        config.FEATURE_GATES: args.feature_gates,
        config.EMULATED_VERSION: args.emulated_version,
        config.LOGGING_FORMAT: args.logging_format,
        config.CONFIG: os.path.abspath(args.config) if args.config else None,
        config.POD_INITIAL_BACKOFF: file.initial_backoff if file is not None else None,
        config.POD_MAX_BACKOFF: file.max_backoff if file is not None else None,
    }
    given = given_flags(args)
    for name, dest in FLAG_OF_VARIABLE.items():
        # a variable already set stands in for its flag's default: the flag wins only when given
        if given is not None and dest not in given and config.PREFIX + name in os.environ:
            settings.pop(name, None)
    os.environ.update(config.flag_environment(settings))
    from kopf_scheduler.cli.flag_values import record_run_flags

    record_run_flags(args, add_parser)  # /flagz lists them
    runner = importlib.import_module("kopf_scheduler.handlers.runner")
    return int(
        runner.main(
            verbose=args.verbosity >= 4, liveness_port=args.liveness_port, metrics_port=args.metrics_port
        )
    )
