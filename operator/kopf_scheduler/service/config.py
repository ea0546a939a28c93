"""The operator's configuration, read once: every environment variable it reads is named here, with its
default. ``kopf-scheduler run`` turns its flags into these variables (``flag_environment``), so that the
scheduling process Kopf runs reads the same settings whichever way it was started; nothing else in the
package reads the environment for the service's settings.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from kopf_scheduler.api.bounds import DEFAULT_EXTENDER_TLS_DIR, RESERVED_SCHEDULER_NAMES, ProfileBounds

PREFIX = "KOPF_SCHEDULER_"

# every variable, by its name after the prefix
DEFAULT_SCHEDULER_NAME = "DEFAULT_SCHEDULER_NAME"
LEADER_ELECT = "LEADER_ELECT"
LEASE_NAMESPACE = "LEASE_NAMESPACE"
LEASE_NAME = "LEASE_NAME"
LEASE_DURATION = "LEASE_DURATION"
RENEW_DEADLINE = "RENEW_DEADLINE"
RETRY_PERIOD = "RETRY_PERIOD"
IDENTITY = "IDENTITY"
METRICS_PORT = "METRICS_PORT"
BIND_ADDRESS = "BIND_ADDRESS"
TLS_CERT_FILE = "TLS_CERT_FILE"
TLS_PRIVATE_KEY_FILE = "TLS_PRIVATE_KEY_FILE"
INSECURE_METRICS = "INSECURE_METRICS"
ALWAYS_ALLOW_PATHS_VAR = "ALWAYS_ALLOW_PATHS"
BIND_CONCURRENCY = "BIND_CONCURRENCY"
STOP_TIMEOUT = "STOP_TIMEOUT"
CONFIRM_TIMEOUT = "CONFIRM_TIMEOUT"
PERCENTAGE_OF_NODES_TO_SCORE = "PERCENTAGE_OF_NODES_TO_SCORE"
SHADOW = "SHADOW"
ALLOW_SCHEDULER_NAMES = "ALLOW_SCHEDULER_NAMES"
DENY_SCHEDULER_NAMES = "DENY_SCHEDULER_NAMES"
EXTENDER_TLS_DIR = "EXTENDER_TLS_DIR"
ALLOW_EXTENDER_LINK_LOCAL = "ALLOW_EXTENDER_LINK_LOCAL"
FEATURE_GATES = "FEATURE_GATES"
EMULATED_VERSION = "EMULATED_VERSION"
#: ``run --config``: the KubeSchedulerConfiguration whose profiles the scheduling process serves (its other
#: fields reach it through the variables above, set by ``run``: ``service/config_file.py``)
CONFIG = "CONFIG"
POD_INITIAL_BACKOFF = "POD_INITIAL_BACKOFF_SECONDS"
POD_MAX_BACKOFF = "POD_MAX_BACKOFF_SECONDS"

LOGGING_FORMAT = "LOGGING_FORMAT"
#: ``--logging-format``: kube components' two formats
LOGGING_FORMATS = ("text", "json")

_TRUE = ("1", "true", "yes")

#: paths of the secure port served without authorization unless ``--authorization-always-allow-paths`` says
#: otherwise (the probes)
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")


@dataclass(frozen=True)
class ServingConfig:
    port: int
    bind_address: str = "0.0.0.0"
    cert_file: str = ""
    key_file: str = ""
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    #: plain HTTP on loopback, no authentication (development)
    insecure: bool = False


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(PREFIX + name, default)


def _flag(env: Mapping[str, str], name: str, default: str) -> bool:
    return _get(env, name, default).lower() in _TRUE


def _names(env: Mapping[str, str], name: str) -> frozenset[str]:
    """A comma-separated list of names in a variable."""
    return frozenset(n.strip() for n in _get(env, name, "").split(",") if n.strip())


def bounds_from_env(env: Mapping[str, str] | None = None) -> ProfileBounds:
    """The bounds on SchedulingProfiles (``api/bounds.py``)."""
    env = os.environ if env is None else env
    return ProfileBounds(
        reserved_scheduler_names=RESERVED_SCHEDULER_NAMES | _names(env, DENY_SCHEDULER_NAMES),
        allowed_scheduler_names=_names(env, ALLOW_SCHEDULER_NAMES),
        extender_tls_dir=_get(env, EXTENDER_TLS_DIR, "") or DEFAULT_EXTENDER_TLS_DIR,
        allow_link_local_extenders=_flag(env, ALLOW_EXTENDER_LINK_LOCAL, "false"),
    )


def logging_format_from_env(env: Mapping[str, str] | None = None) -> str:
    """``text`` or ``json``; anything else is ``text``."""
    chosen = _get(os.environ if env is None else env, LOGGING_FORMAT, "text").lower()
    return chosen if chosen in LOGGING_FORMATS else "text"


def metrics_port_from_env(env: Mapping[str, str] | None = None) -> int:
    """The secure port of /metrics and /readyz (0: not served)."""
    return int(_get(os.environ if env is None else env, METRICS_PORT, "0") or 0)


def serving_from_env(port: int, env: Mapping[str, str] | None = None) -> ServingConfig:
    """How the secure port serves: address, certificate, paths open without authorization."""
    env = os.environ if env is None else env
    paths = env.get(PREFIX + ALWAYS_ALLOW_PATHS_VAR)
    return ServingConfig(
        port=port,
        bind_address=_get(env, BIND_ADDRESS, "") or "0.0.0.0",
        cert_file=_get(env, TLS_CERT_FILE, ""),
        key_file=_get(env, TLS_PRIVATE_KEY_FILE, ""),
        always_allow_paths=ALWAYS_ALLOW_PATHS
        if paths is None
        else tuple(p.strip() for p in paths.split(",") if p.strip()),
        insecure=_flag(env, INSECURE_METRICS, "false"),
    )


@dataclass
class ServiceConfig:
    kubeconfig: str | None = None
    #: the name the built-in default profile serves when no SchedulingProfile claims it ("" = none)
    default_scheduler_name: str = "kopf-scheduler"
    leader_elect: bool = True
    lease_namespace: str = "kube-system"
    lease_name: str = "kopf-scheduler"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{os.getpid()}")
    #: the secure port of /metrics and /readyz (port 0: not served)
    metrics: ServingConfig = field(default_factory=lambda: ServingConfig(port=0))
    bind_concurrency: int = 64
    #: on a graceful stop, how long bindings in flight may take before they are cancelled
    stop_timeout: float = 5.0
    #: seconds a binding answered as done may go unseen by the watch before the pod is re-read (0: never)
    confirm_timeout: float = 30.0
    percentage_of_nodes_to_score: int = 0
    #: what SchedulingProfiles may claim and reach
    profile_bounds: ProfileBounds = field(default_factory=ProfileBounds)
    #: every profile a shadow: nothing is written to the API, not even a Lease (``shadow``)
    shadow: bool = False
    #: ``--feature-gates``: ``A=true,B=false`` over upstream's defaults (``api/feature_gates.py``)
    feature_gates: str = ""
    #: ``--emulated-version``: whose gate defaults apply ("": the API server's minor version, clamped)
    emulated_version: str = ""
    #: ``--config``: the KubeSchedulerConfiguration whose profiles serve where no SchedulingProfile does
    config_file: str = ""
    #: the queue's backoff of a pod after a failed attempt, first and at most (seconds)
    initial_backoff: float = 1.0
    max_backoff: float = 10.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServiceConfig:
        """Settings from ``KOPF_SCHEDULER_*`` variables (``kopf-scheduler run`` sets them from its flags)."""
        env = os.environ if env is None else env
        return cls(
            kubeconfig=env.get("KUBECONFIG") or None,
            default_scheduler_name=_get(env, DEFAULT_SCHEDULER_NAME, "kopf-scheduler"),
            leader_elect=_flag(env, LEADER_ELECT, "true"),
            lease_namespace=_get(env, LEASE_NAMESPACE, "kube-system"),
            lease_name=_get(env, LEASE_NAME, "kopf-scheduler"),
            lease_duration=float(_get(env, LEASE_DURATION, "15")),
            renew_deadline=float(_get(env, RENEW_DEADLINE, "10")),
            retry_period=float(_get(env, RETRY_PERIOD, "2")),
            identity=_get(env, IDENTITY, f"{socket.gethostname()}_{os.getpid()}"),
            metrics=serving_from_env(metrics_port_from_env(env), env),
            bind_concurrency=int(_get(env, BIND_CONCURRENCY, "64")),
            stop_timeout=float(_get(env, STOP_TIMEOUT, "5")),
            confirm_timeout=float(_get(env, CONFIRM_TIMEOUT, "30")),
            percentage_of_nodes_to_score=int(_get(env, PERCENTAGE_OF_NODES_TO_SCORE, "0")),
            profile_bounds=bounds_from_env(env),
            shadow=_flag(env, SHADOW, "false"),
            feature_gates=_get(env, FEATURE_GATES, ""),
            emulated_version=_get(env, EMULATED_VERSION, ""),
            config_file=_get(env, CONFIG, ""),
            initial_backoff=float(_get(env, POD_INITIAL_BACKOFF, "1")),
            max_backoff=float(_get(env, POD_MAX_BACKOFF, "10")),
        )


def flag_environment(settings: Mapping[str, str | int | float | bool | None]) -> dict[str, str]:
    """``{name: value}`` (names as above, without the prefix) as the variables ``from_env`` reads; a
    value of None is left out (the default applies)."""
    out: dict[str, str] = {}
    for name, value in settings.items():
        if value is None:
            continue
        out[PREFIX + name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out
