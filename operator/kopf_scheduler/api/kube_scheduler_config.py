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
  build in (``KUBE_SCHEDULER_V1_37_PLUGINS``) gives a warning.

What v1.37 added (``config/v1/types.go`` and ``types_pluginargs.go`` of ``k8s.io/kube-scheduler`` v0.37.2,
``pkg/scheduler/apis/config/validation`` at v1.37.2) is read, never dropped unsaid:

- ``plugins.placementGenerate``, ``plugins.placementScore``, ``plugins.podGroupPostFilter`` (the PodGroup
  extension points): a set that enables a plugin is refused; one that only disables is left out with a
  warning (kopf-scheduler, like v1.37's default set with its default gates, has no plugin there);
- the plugins v1.37 added (``KUBE_SCHEDULER_V1_37_ONLY``: NodeDeclaredFeatures, DeferredPodScheduling and
  the workload plugins): enabling or configuring one is refused; disabling one is kept (it changes
  nothing here);
- ``DynamicResourcesArgs.bindingTimeout`` is refused: it bounds the wait for device binding conditions,
  which kopf-scheduler does not implement;
- ``NodeResourcesFitArgs.scoringStrategy``: v1.37's stricter rules and messages
  (``ValidateNodeResourcesFitArgs``): ``requestedToCapacityRatio`` required with the type
  RequestedToCapacityRatio, forbidden with another type, its shape checked at
  ``scoringStrategy.requestedToCapacityRatio.shape``.

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

#: kube-scheduler v1.34's in-tree plugins (``pkg/scheduler/framework/plugins/registry.go``)
KUBE_SCHEDULER_PLUGINS = frozenset(
    {
        "PrioritySort", "SchedulingGates", "NodeName", "NodeUnschedulable", "NodeResourcesFit",
        "NodeResourcesBalancedAllocation", "NodePorts", "NodeAffinity", "TaintToleration",
        "PodTopologySpread", "InterPodAffinity", "ImageLocality", "VolumeRestrictions", "NodeVolumeLimits",
        "VolumeBinding", "VolumeZone", "DynamicResources", "DefaultPreemption", "DefaultBinder",
    }
)  # fmt: skip

#: the in-tree plugins kube-scheduler v1.37.2 added to v1.34's (``framework/plugins/names/names.go``), none
#: of which kopf-scheduler has
KUBE_SCHEDULER_V1_37_ONLY = frozenset(
    {
        "NodeDeclaredFeatures",
        "DeferredPodScheduling",
        "GangScheduling",
        "TopologyPlacementGenerator",
        "PodGroupPodsCount",
    }
)
#: kube-scheduler v1.37.2's in-tree plugins
KUBE_SCHEDULER_V1_37_PLUGINS = KUBE_SCHEDULER_PLUGINS | KUBE_SCHEDULER_V1_37_ONLY
#: v1.37's extension points of the PodGroup scheduling cycle (``Plugins`` in ``config/v1/types.go``)
POD_GROUP_POINTS = ("placementGenerate", "placementScore", "podGroupPostFilter")
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
#: ``config.MaxCustomPriorityScore``: shape scores are 0..10
MAX_CUSTOM_PRIORITY_SCORE = 10

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
_PLUGINS_SCHEMA = _SPEC_FIELDS["plugins"]
_PROFILE_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **{k: v for k, v in _SPEC_FIELDS.items() if k not in ("extenders", "plugins")},
        "plugins": {
            **_PLUGINS_SCHEMA,
            "properties": {
                **_PLUGINS_SCHEMA["properties"],
                **{
                    point: _PLUGINS_SCHEMA["properties"]["multiPoint"]
                    for point in ("placementGenerate", "placementScore", "podGroupPostFilter")
                },
            },
        },
    },
}
_OBJECT = {"type": "object"}
_BOOLEAN = {"type": "boolean"}
_CONFIG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "parallelism": {"type": "integer", "exclusiveMinimum": 0},
        "leaderElection": _OBJECT,
        "clientConnection": _OBJECT,
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
    the plugin names a profile may use; ``check``: validates each manifest, raising ``ProfileError`` with
    a path in it (the command line also builds the profile, which checks plugin arguments). Raises
    ``ProfileError`` naming the first bad field of the configuration."""
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
        profile, dropped = _without_pod_group_points(profile, where)
        warnings += dropped
        _check_v1_37(profile, where)
        _check_plugin_names(profile, where, {*known_plugins, *KUBE_SCHEDULER_V1_37_ONLY})
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
        if name != "*" and name not in KUBE_SCHEDULER_V1_37_PLUGINS
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


def _without_pod_group_points(profile: Mapping[str, Any], where: str) -> tuple[Mapping[str, Any], list[str]]:
    """``profile`` without v1.37's PodGroup extension points, and a warning for each left out; one that
    enables a plugin is refused."""
    plugins = profile.get("plugins")
    if not isinstance(plugins, Mapping) or not any(point in plugins for point in POD_GROUP_POINTS):
        return profile, []
    warnings = []
    for point in POD_GROUP_POINTS:
        if point not in plugins:
            continue
        path = join_path(where, "plugins", point)
        plugin_set = plugins[point] or {}
        if not isinstance(plugin_set, Mapping):
            raise ProfileError(path, "must be an object")
        if plugin_set.get("enabled"):
            raise ProfileError(
                join_path(path, "enabled", 0),
                f"{point} is kube-scheduler v1.37's PodGroup extension point, which kopf-scheduler does not "
                "implement",
            )
        warnings.append(
            f"{path}: left out: kopf-scheduler has no plugin at this PodGroup extension point of "
            "kube-scheduler v1.37, so there is nothing to disable"
        )
    kept = {k: v for k, v in plugins.items() if k not in POD_GROUP_POINTS}
    return {**profile, "plugins": kept}, warnings


def _check_v1_37(profile: Mapping[str, Any], where: str) -> None:
    """What kube-scheduler v1.37 accepts and kopf-scheduler refuses or checks as v1.37 does."""
    for path, name in _plugin_names(profile, where):
        if name in KUBE_SCHEDULER_V1_37_ONLY and ".disabled[" not in path:
            raise ProfileError(
                path,
                f"plugin {name!r} is in kube-scheduler v1.37's registry, not in kopf-scheduler",
            )
    for j, entry in enumerate(profile.get("pluginConfig") or ()):
        args = entry.get("args") if isinstance(entry, Mapping) else None
        if not isinstance(args, Mapping):
            continue
        path = join_path(where, "pluginConfig", j, "args")
        if entry.get("name") == "DynamicResources" and "bindingTimeout" in args:
            raise ProfileError(
                join_path(path, "bindingTimeout"),
                "kopf-scheduler does not implement device binding conditions (DRADeviceBindingConditions), "
                "the only wait this timeout bounds",
            )
        if entry.get("name") == "NodeResourcesFit":
            _check_scoring_strategy(args.get("scoringStrategy"), join_path(path, "scoringStrategy"))


def _check_scoring_strategy(strategy: Any, path: str) -> None:
    """v1.37's ``ValidateNodeResourcesFitArgs`` on ``requestedToCapacityRatio``, with its messages
    (``field.Error``: ``<path>: Required value: ...``); the first error it lists is raised."""
    if not isinstance(strategy, Mapping):
        return
    ratio = strategy.get("requestedToCapacityRatio")
    ratio_path = join_path(path, "requestedToCapacityRatio")
    if strategy.get("type") != REQUESTED_TO_CAPACITY_RATIO:
        if ratio is not None:
            raise ProfileError(ratio_path, "Forbidden: must be nil when type is not RequestedToCapacityRatio")
        return
    if ratio is None:
        raise ProfileError(
            ratio_path, "Required value: must be specified when type is RequestedToCapacityRatio"
        )
    shape = ratio.get("shape") if isinstance(ratio, Mapping) else None
    shape_path = join_path(ratio_path, "shape")
    if not shape:
        raise ProfileError(shape_path, "Required value: at least one point must be specified")
    if not isinstance(shape, list) or not all(
        isinstance(p, Mapping) and all(type(p.get(k, 0)) is int for k in ("utilization", "score"))
        for p in shape
    ):
        return  # the plugin's arguments say what is wrong with their types
    for i in range(1, len(shape)):
        if shape[i - 1].get("utilization", 0) >= shape[i].get("utilization", 0):
            raise ProfileError(
                join_path(shape_path, i, "utilization"),
                f"Invalid value: {shape[i].get('utilization', 0)}: values must be sorted in increasing order",
            )
    for i, point in enumerate(shape):
        utilization, score = point.get("utilization", 0), point.get("score", 0)
        if not 0 <= utilization <= 100:
            raise ProfileError(
                join_path(shape_path, i, "utilization"),
                f"Invalid value: {utilization}: not in valid range [0, 100]",
            )
        if not 0 <= score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ProfileError(
                join_path(shape_path, i, "score"),
                f"Invalid value: {score}: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
            )


def _check_plugin_names(profile: Mapping[str, Any], where: str, known: Collection[str]) -> None:
    for path, name in _plugin_names(profile, where):
        if name == "*":
            if ".disabled[" not in path:
                raise ProfileError(path, "'*' may only disable plugins")
        elif name not in known:
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
