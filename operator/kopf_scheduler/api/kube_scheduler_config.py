"""kube-scheduler's ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``, as v1.37 reads it)
to SchedulingProfiles and back.

A SchedulingProfile's spec has the fields of one profile of that configuration, so each profile becomes
one SchedulingProfile and the translation is a copy once both sides are checked:

- ``import_config``: the configuration is validated (apiVersion, kind, field types, plugin names) and
  defaulted as kube-scheduler defaults it (no profiles: one ``default-scheduler`` profile; a single
  profile without a name: ``default-scheduler``); the top-level ``percentageOfNodesToScore`` goes to every
  profile without its own, the top-level ``extenders`` to every profile, plugin arguments lose their
  optional ``apiVersion``/``kind``. Every field with no SchedulingProfile equivalent (leader election,
  client connection, backoff, parallelism, ...) gives one warning naming its path.
- ``export_config``: SchedulingProfiles to one configuration, the inverse; extenders must then be the
  same in every profile (kube-scheduler has one list for all), and a plugin kube-scheduler v1.37 does not
  build in (``KUBE_SCHEDULER_PLUGINS``) gives a warning.

What v1.37 added (``config/v1/types.go`` and ``types_pluginargs.go`` of ``k8s.io/kube-scheduler`` v0.37.2)
is carried, or refused with a line naming the field, never dropped:

- ``plugins.placementGenerate``, ``plugins.placementScore``, ``plugins.podGroupPostFilter`` (the pod group
  extension points) are SchedulingProfile fields too; enabling a plugin there is refused (``profile.py``:
  kopf-scheduler has no plugin that extends them);
- a plugin of v1.37's registry that kopf-scheduler does not have (``KUBE_SCHEDULER_PLUGINS`` less the
  ``known_plugins`` given) is refused when enabled or configured, kept when disabled (a no-op);
- plugin arguments (``DynamicResourcesArgs.bindingTimeout``, v1.37's ``NodeResourcesFitArgs`` rules) are
  checked by ``check``: the command line builds each profile, as the operator would, with v1.37's gates.

Errors are ``ProfileError`` with the field path in the configuration (``profiles[1].plugins.score``...).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from kopf_scheduler.api.bounds import RESERVED_SCHEDULER_NAMES
from kopf_scheduler.api.errors import ProfileError, join_path
from kopf_scheduler.api.profile import parse_profile, schema_errors
from kopf_scheduler.api.schema import GROUP, KIND, SPEC_SCHEMA, VERSION

CONFIG_API_VERSION = "kubescheduler.config.k8s.io/v1"
CONFIG_KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

#: kube-scheduler v1.37.2's in-tree plugins (``pkg/scheduler/framework/plugins/registry.go``)
KUBE_SCHEDULER_PLUGINS = frozenset(
    {
        "PrioritySort", "SchedulingGates", "NodeName", "NodeUnschedulable", "NodeResourcesFit",
        "NodeResourcesBalancedAllocation", "NodePorts", "NodeAffinity", "NodeDeclaredFeatures",
        "TaintToleration", "PodTopologySpread", "InterPodAffinity", "ImageLocality", "VolumeRestrictions",
        "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "DynamicResources", "DefaultPreemption",
        "DefaultBinder", "DeferredPodScheduling", "GangScheduling", "TopologyPlacementGenerator",
        "PodGroupPodsCount",
    }
)  # fmt: skip

#: top-level fields no SchedulingProfile field stands for -> what the operator does instead
UNMAPPED_FIELDS = {
    "parallelism": "the operator scores nodes in one process",
    "leaderElection": "see `kopf-scheduler run --leader-elect/--lease-namespace/--lease-name`",
    "clientConnection": "the operator connects with its own KUBECONFIG or in-cluster account",
    "enableProfiling": "the operator serves no pprof endpoints",
    "enableContentionProfiling": "the operator serves no pprof endpoints",
    "podInitialBackoffSeconds": "the operator backs off 1s initially, as kube-scheduler's default",
    "podMaxBackoffSeconds": "the operator backs off 10s at most, as kube-scheduler's default",
    "delayCacheUntilActive": "the operator fills its cache before it leads",
}

_SPEC_FIELDS = SPEC_SCHEMA["properties"]
_PROFILE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {k: v for k, v in _SPEC_FIELDS.items() if k != "extenders"},
}
_BOOLEAN = {"type": "boolean"}
_STRING = {"type": "string"}
#: component-base's ``LeaderElectionConfiguration`` and ``ClientConnectionConfiguration`` (v1alpha1), decoded
#: strictly as kube-scheduler decodes them: an unknown field is refused (durations are checked by their user)
_LEADER_ELECTION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "leaderElect": _BOOLEAN,
        "leaseDuration": _STRING,
        "renewDeadline": _STRING,
        "retryPeriod": _STRING,
        "resourceLock": _STRING,
        "resourceName": _STRING,
        "resourceNamespace": _STRING,
    },
}
_CLIENT_CONNECTION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "kubeconfig": _STRING,
        "acceptContentTypes": _STRING,
        "contentType": _STRING,
        "qps": {"type": "number"},
        "burst": {"type": "integer", "minimum": 0},
    },
}
_CONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "parallelism": {"type": "integer", "exclusiveMinimum": 0},
        "leaderElection": _LEADER_ELECTION,
        "clientConnection": _CLIENT_CONNECTION,
        "enableProfiling": _BOOLEAN,
        "enableContentionProfiling": _BOOLEAN,
        "percentageOfNodesToScore": _SPEC_FIELDS["percentageOfNodesToScore"],
        "podInitialBackoffSeconds": {"type": "integer", "exclusiveMinimum": 0},
        "podMaxBackoffSeconds": {"type": "integer", "exclusiveMinimum": 0},
        "profiles": {"type": "array", "items": _PROFILE_SCHEMA},
        "extenders": _SPEC_FIELDS["extenders"],
        "delayCacheUntilActive": _BOOLEAN,
    },
}
_CONFIG_VALIDATOR = jsonschema.Draft202012Validator(_CONFIG_SCHEMA)


@dataclass(frozen=True, slots=True)
class Imported:
    #: one SchedulingProfile manifest per profile, in configuration order
    profiles: list[dict[str, Any]]
    #: one line per field with no equivalent, each starting with the field's path
    warnings: list[str]


def import_config(
    config: Any,
    known_plugins: Collection[str] = KUBE_SCHEDULER_PLUGINS,
    check: Callable[[Mapping[str, Any]], object] = parse_profile,
) -> Imported:
    """``config`` (a parsed KubeSchedulerConfiguration) as SchedulingProfile manifests. ``known_plugins``:
    the plugin names a profile may use (the command line passes kopf-scheduler's registry; a plugin of
    v1.37's registry outside it may only be disabled); ``check``: validates each manifest, raising
    ``ProfileError`` with a path in it (the command line also builds the profile, which checks plugin
    arguments). Raises ``ProfileError`` naming the first bad field of the configuration."""
    if not isinstance(config, Mapping):
        raise ProfileError("", f"a {CONFIG_KIND} must be an object")
    if config.get("apiVersion") != CONFIG_API_VERSION:
        raise ProfileError("apiVersion", f"must be {CONFIG_API_VERSION}, not {config.get('apiVersion')!r}")
    if config.get("kind") != CONFIG_KIND:
        raise ProfileError("kind", f"must be {CONFIG_KIND}, not {config.get('kind')!r}")
    errors = schema_errors(config, "", _CONFIG_VALIDATOR)
    if errors:
        raise errors[0]
    profiles = config.get("profiles") or [{}]
    names: set[str] = set()
    manifests: list[dict[str, Any]] = []
    warnings = [
        f"{path}: no SchedulingProfile equivalent ({UNMAPPED_FIELDS[top]})"
        for top in UNMAPPED_FIELDS
        if top in config
        for path in _leaves(config[top], top)
    ]
    for i, profile in enumerate(profiles):
        where = join_path("profiles", i)
        name = profile.get("schedulerName")
        if name is None:
            if len(profiles) > 1:
                raise ProfileError(f"{where}.schedulerName", "is required when there are several profiles")
            name = DEFAULT_SCHEDULER_NAME
        if name in names:
            raise ProfileError(f"{where}.schedulerName", f"{name!r} is the name of an earlier profile")
        names.add(name)
        _check_plugin_names(profile, where, known_plugins)
        spec: dict[str, Any] = {"schedulerName": name}
        percentage = profile.get("percentageOfNodesToScore", config.get("percentageOfNodesToScore"))
        if percentage is not None:
            spec["percentageOfNodesToScore"] = percentage
        if profile.get("plugins"):
            spec["plugins"] = copy.deepcopy(profile["plugins"])
        if profile.get("pluginConfig"):
            spec["pluginConfig"] = [
                _plugin_config(entry, join_path(where, "pluginConfig", j))
                for j, entry in enumerate(profile["pluginConfig"])
            ]
        if config.get("extenders"):
            spec["extenders"] = copy.deepcopy(config["extenders"])
        manifest = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": _object_name(name, {m["metadata"]["name"] for m in manifests})},
            "spec": spec,
        }
        try:
            check(manifest)
        except ProfileError as e:
            path = e.path.removeprefix("spec.")
            raise ProfileError(
                path if path.startswith("extenders") else f"{where}.{path}", e.message
            ) from None
        if name in RESERVED_SCHEDULER_NAMES:
            warnings.append(
                f"{where}.schedulerName: {name!r} is reserved: the operator serves it only when run with "
                f"--allow-scheduler-name {name}"
            )
        manifests.append(manifest)
    return Imported(manifests, warnings)


def export_profile(spec: Mapping[str, Any], base: str = "spec") -> tuple[dict[str, Any], list[str]]:
    """A SchedulingProfile ``spec`` (valid, without extenders) as one profile of a KubeSchedulerConfiguration,
    and a warning for each plugin kube-scheduler v1.37 does not build in (``base``: the spec's path)."""
    profile: dict[str, Any] = {"schedulerName": spec["schedulerName"]}
    for key in ("percentageOfNodesToScore", "plugins", "pluginConfig"):
        if spec.get(key) is not None:
            profile[key] = copy.deepcopy(spec[key])
    warnings = [
        f"{path}: plugin {name!r} is not in kube-scheduler v1.37's registry: only a kube-scheduler built "
        "with it accepts this configuration"
        for path, name in _plugin_names(profile, base)
        if name != "*" and name not in KUBE_SCHEDULER_PLUGINS
    ]
    return profile, warnings


def export_config(manifests: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """SchedulingProfile manifests as one KubeSchedulerConfiguration, and its warnings. Field paths start
    with the manifest's position (``[1].spec.extenders``)."""
    config: dict[str, Any] = {"apiVersion": CONFIG_API_VERSION, "kind": CONFIG_KIND, "profiles": []}
    warnings: list[str] = []
    names: set[str] = set()
    extenders: list[Any] | None = None
    for i, manifest in enumerate(manifests):
        where = join_path("", i)
        try:
            parse_profile(manifest)
        except ProfileError as e:
            raise ProfileError(join_path(where, e.path) if e.path else where, e.message) from None
        spec = manifest["spec"]
        if spec["schedulerName"] in names:
            raise ProfileError(
                f"{where}.spec.schedulerName", f"{spec['schedulerName']!r} is served by an earlier profile"
            )
        names.add(spec["schedulerName"])
        mine = list(spec.get("extenders") or ())
        if extenders is None:
            extenders = mine
        elif mine != extenders:
            raise ProfileError(
                f"{where}.spec.extenders",
                "differs from the first profile's: kube-scheduler has one list of extenders for all profiles",
            )
        profile, notes = export_profile(spec, f"{where}.spec")
        config["profiles"].append(profile)
        warnings += notes
    if extenders:
        config["extenders"] = copy.deepcopy(extenders)
    return config, warnings


def _leaves(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _leaves(item, join_path(path, str(key)))
    else:
        yield path


def _plugin_names(profile: Mapping[str, Any], base: str) -> Iterator[tuple[str, str]]:
    """(path of the name, name) of every plugin named in the profile's plugins and pluginConfig."""
    for point, plugin_set in (profile.get("plugins") or {}).items():
        for which in ("enabled", "disabled"):
            for j, entry in enumerate((plugin_set or {}).get(which) or ()):
                yield join_path(base, "plugins", point, which, j, "name"), entry["name"]
    for j, entry in enumerate(profile.get("pluginConfig") or ()):
        yield join_path(base, "pluginConfig", j, "name"), entry["name"]


def _check_plugin_names(profile: Mapping[str, Any], where: str, known: Collection[str]) -> None:
    """Every plugin named is ``known``; one only kube-scheduler v1.37 has may be disabled, a no-op here."""
    for path, name in _plugin_names(profile, where):
        disabled = ".disabled[" in path
        if name == "*":
            if not disabled:
                raise ProfileError(path, "'*' may only disable plugins")
        elif name not in known and not (disabled and name in KUBE_SCHEDULER_PLUGINS):
            if name in KUBE_SCHEDULER_PLUGINS:
                raise ProfileError(
                    path, f"plugin {name!r} is in kube-scheduler v1.37's registry, not in kopf-scheduler"
                )
            raise ProfileError(path, f"unknown plugin {name!r}")


def _plugin_config(entry: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A pluginConfig entry without the optional type of its args (``apiVersion``, ``kind``), checked as
    kube-scheduler's decoder checks it."""
    args = dict(entry.get("args") or {})
    api_version = args.pop("apiVersion", CONFIG_API_VERSION)
    if api_version != CONFIG_API_VERSION:
        raise ProfileError(f"{where}.args.apiVersion", f"must be {CONFIG_API_VERSION}, not {api_version!r}")
    kind = args.pop("kind", f"{entry['name']}Args")
    if kind != f"{entry['name']}Args":
        raise ProfileError(f"{where}.args.kind", f"must be {entry['name']}Args, not {kind!r}")
    return (
        {"name": entry["name"], "args": copy.deepcopy(args)} if "args" in entry else {"name": entry["name"]}
    )


def _object_name(scheduler_name: str, taken: Collection[str]) -> str:
    """A DNS subdomain (a SchedulingProfile's name) made of the scheduler name, unique among ``taken``."""
    base = re.sub(r"[^a-z0-9.-]+", "-", scheduler_name.lower()).strip("-.")[:240] or "profile"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name
