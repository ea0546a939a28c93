"""``kopf-scheduler run --config FILE``: a kube-scheduler ``KubeSchedulerConfiguration``
(``kubescheduler.config.k8s.io/v1``) as the operator's starting settings, combined with the command line
the way kube-scheduler v1.37 combines them (``cmd/kube-scheduler/app/options/options.go``, ``ApplyTo``):

- the ``--leader-elect*`` flags given on the command line override the file's ``leaderElection`` field by
  field (``ApplyLeaderElectionTo``); the merged result is validated as upstream validates it
  (``leaseDuration`` greater than ``renewDeadline``, ``resourceLock: leases``, ...);
- ``--kubeconfig`` is ignored (upstream's deprecated flags apply only without ``--config``): the file's
  ``clientConnection.kubeconfig`` applies; without it the operator's default (``$KUBECONFIG``, else
  in-cluster);
- ``profiles``, ``extenders`` and ``percentageOfNodesToScore`` become the starting profiles, through the
  one conversion ``kopf-scheduler profiles import`` uses (``api/kube_scheduler_config.py``), within the
  operator's bounds on profiles;
- ``podInitialBackoffSeconds`` and ``podMaxBackoffSeconds`` set the queue's backoff;
- what cannot change a decision and the operator does not do (``parallelism``, ``clientConnection.qps``,
  ``burst``, ``contentType``, ``acceptContentTypes``, ``enableProfiling``, ``enableContentionProfiling``,
  ``delayCacheUntilActive: true``) gives one warning line naming the field and is otherwise ignored.

A field the operator leaves unset keeps the operator's default, not kube-scheduler's: the Lease is
``kopf-scheduler``'s own unless the file or a flag names one (upstream's ``kube-scheduler`` Lease would make
the operator wait on a running kube-scheduler). Errors are ``ProfileError`` with the field's path.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.bounds import ProfileBounds
from kopf_scheduler.api.duration import DurationError, parse_duration
from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.kube_scheduler_config import KUBE_SCHEDULER_PLUGINS, import_config
from kopf_scheduler.api.profile import ProfileSpec, parse_profile

#: the fields warned about (and ignored) whatever their value -> why they change nothing here
IGNORED_FIELDS = {
    "parallelism": "the operator judges nodes in one process",
    "clientConnection.qps": "the operator's client has no client-side rate limit",
    "clientConnection.burst": "the operator's client has no client-side rate limit",
    "clientConnection.contentType": "the operator speaks JSON",
    "clientConnection.acceptContentTypes": "the operator speaks JSON",
    "enableProfiling": "the operator serves no pprof endpoints",
    "enableContentionProfiling": "the operator serves no pprof endpoints",
}

#: leaderElection's duration fields -> the ``ServiceConfig`` setting
_DURATIONS = {
    "leaseDuration": "lease_duration",
    "renewDeadline": "renew_deadline",
    "retryPeriod": "retry_period",
}


@dataclass(frozen=True)
class LeaderElection:
    """Leader election settings; None: not given (the operator's default applies)."""

    leader_elect: bool | None = None
    lease_duration: float | None = None
    renew_deadline: float | None = None
    retry_period: float | None = None
    lease_name: str | None = None
    lease_namespace: str | None = None
    #: the file's only (kube-scheduler's ``--leader-elect-resource-lock`` is not a flag here)
    resource_lock: str | None = None


@dataclass(frozen=True)
class FileConfig:
    #: the starting SchedulingProfiles, one manifest per profile of the file, in its order
    profiles: list[dict[str, Any]]
    leader_election: LeaderElection
    #: ``clientConnection.kubeconfig`` ("" or None: not given)
    kubeconfig: str | None = None
    initial_backoff: float | None = None
    max_backoff: float | None = None
    #: one line per field ignored, each starting with the field's path
    warnings: list[str] = field(default_factory=list)


def read_document(path: str) -> Any:
    """The one YAML document of ``path``; ``UsageError`` naming the file otherwise."""
    try:
        docs = [doc for doc in yaml.safe_load_all(Path(path).read_text()) if doc is not None]
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}:{line} not valid YAML: {getattr(e, 'problem', None) or e}") from None
    if len(docs) != 1:
        raise UsageError(f"{path}: expected one KubeSchedulerConfiguration, found {len(docs)} documents")
    return docs[0]


def parse_config(
    config: Any,
    bounds: ProfileBounds,
    known_plugins: Collection[str] = KUBE_SCHEDULER_PLUGINS,
    check: Callable[[ProfileSpec], object] = lambda spec: None,
) -> FileConfig:
    """``config`` (a parsed KubeSchedulerConfiguration) as the operator's settings. ``check`` is called
    with each profile (the command line builds it, as the operator will); raises ``ProfileError``."""
    imported = import_config(config, known_plugins, lambda manifest: check(parse_profile(manifest, bounds)))
    election = config.get("leaderElection") or {}
    durations: dict[str, float] = {}
    for key, setting in _DURATIONS.items():
        if key in election:
            try:
                durations[setting] = parse_duration(election[key])
            except DurationError as e:
                raise ProfileError(f"leaderElection.{key}", str(e)) from None
    initial = config.get("podInitialBackoffSeconds")
    maximum = config.get("podMaxBackoffSeconds")
    if (10 if maximum is None else maximum) < (1 if initial is None else initial):  # upstream's defaults
        raise ProfileError(
            "podMaxBackoffSeconds", "must be greater than or equal to podInitialBackoffSeconds"
        )
    client = config.get("clientConnection") or {}
    warnings = [f"{path}: ignored ({why})" for path, why in IGNORED_FIELDS.items() if _has(config, path)]
    if config.get("delayCacheUntilActive"):
        warnings.append("delayCacheUntilActive: ignored (the operator fills its cache before it leads)")
    return FileConfig(
        profiles=imported.profiles,
        leader_election=LeaderElection(
            leader_elect=election.get("leaderElect"),
            # empty is unset, as upstream's defaulting reads it
            resource_lock=election.get("resourceLock") or None,
            lease_name=election.get("resourceName") or None,
            lease_namespace=election.get("resourceNamespace") or None,
            **durations,
        ),
        kubeconfig=client.get("kubeconfig") or None,
        initial_backoff=None if initial is None else float(initial),
        max_backoff=None if maximum is None else float(maximum),
        warnings=warnings,
    )


def merge_leader_election(file: LeaderElection, flags: LeaderElection) -> LeaderElection:
    """The file's settings with every flag given on the command line over them (upstream's
    ``ApplyLeaderElectionTo``), checked as upstream checks the merged configuration; unset fields stay
    None (the operator's defaults: 15s, 10s, 2s). Raises ``ProfileError`` naming the file's field."""
    merged = LeaderElection(
        **{
            name: getattr(flags, name) if getattr(flags, name) is not None else getattr(file, name)
            for name in LeaderElection.__dataclass_fields__
        }
    )
    if merged.leader_elect is not False:
        if merged.resource_lock not in (None, "leases"):
            raise ProfileError(
                "leaderElection.resourceLock", f'must be "leases", not {merged.resource_lock!r}'
            )
        lease = merged.lease_duration if merged.lease_duration is not None else 15.0
        renew = merged.renew_deadline if merged.renew_deadline is not None else 10.0
        retry = merged.retry_period if merged.retry_period is not None else 2.0
        for key, value in (("leaseDuration", lease), ("renewDeadline", renew), ("retryPeriod", retry)):
            if value <= 0:
                raise ProfileError(f"leaderElection.{key}", "must be greater than zero")
        if lease <= renew:
            raise ProfileError(
                "leaderElection.leaseDuration",
                f"must be greater than renewDeadline ({lease:g}s <= {renew:g}s)",
            )
    return merged


def load_profiles(path: str, bounds: ProfileBounds, known_plugins: Collection[str]) -> list[ProfileSpec]:
    """The starting profiles of the file at ``path``: the scheduling process reads them again (checked by
    ``kopf-scheduler run`` before it started); ``ProfileError``/``UsageError`` when it changed since."""
    config = parse_config(read_document(path), bounds, known_plugins)
    return [parse_profile(m, bounds) for m in config.profiles]


def _has(config: Mapping[str, Any], path: str) -> bool:
    top, _, rest = path.partition(".")
    value = config.get(top)
    return value is not None if not rest else isinstance(value, Mapping) and rest in value
