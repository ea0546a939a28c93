"""The SchedulingProfile model: parsing, schema validation and kube-scheduler's plugin-set merge rules.

A profile's ``spec`` mirrors one profile of a ``KubeSchedulerConfiguration`` (plus the extenders, which
kube-scheduler configures once for all its profiles). ``parse_profile`` validates
it against ``schema.SPEC_SCHEMA`` and returns a ``ProfileSpec``; ``merge_plugins`` lays it over the
default plugin set exactly as upstream's ``mergePluginSet`` does. The plugin sets of v1.37's pod group
extension points (``schema.POD_GROUP_POINTS``) are carried, but may only disable: kopf-scheduler has no
plugin that extends them. Plugin existence, plugin arguments and
framework invariants are checked when the runtime builds the profile, with the same field paths. The
operator's bounds (reserved scheduler names, the extender TLS directory, metadata addresses) are checked
here too (``api/bounds.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from kopf_scheduler.api.bounds import OFFLINE, ProfileBounds
from kopf_scheduler.api.errors import ProfileError, join_path, json_type
from kopf_scheduler.api.extenders import ExtenderSpec, parse_extenders
from kopf_scheduler.api.schema import GROUP, KIND, PLUGIN_SET_FIELDS, POD_GROUP_POINTS, SPEC_SCHEMA

_VALIDATOR = jsonschema.Draft202012Validator(SPEC_SCHEMA)
#: the most one plugin's ``args`` may take as JSON: bounds every list and string in them at once
#: (upstream's largest real arguments, a few default constraints or shape points, take under 2 KiB)
MAX_PLUGIN_ARGS_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class PluginRef:
    name: str
    #: 0 means "not set" (score plugins then weigh 1, as upstream).
    weight: int = 0
    #: where the entry came from, for error messages ("" for built-in defaults).
    path: str = ""


@dataclass(slots=True)
class PluginSet:
    enabled: list[PluginRef] = field(default_factory=list)
    disabled: list[PluginRef] = field(default_factory=list)

    @property
    def disabled_names(self) -> set[str]:
        return {p.name for p in self.disabled}


@dataclass(slots=True)
class ProfileSpec:
    scheduler_name: str
    percentage_of_nodes_to_score: int | None = None
    #: by field name: "multiPoint", "preEnqueue", ..., "postBind".
    plugins: dict[str, PluginSet] = field(default_factory=dict)
    #: plugin name -> (args, field path of the args)
    plugin_config: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    #: the profile object's name and generation, when it came from a SchedulingProfile resource.
    name: str = ""
    generation: int | None = None
    #: scheduler extenders, in configuration order (``api/extenders.py``)
    extenders: list[ExtenderSpec] = field(default_factory=list)
    #: never binds; judges the bindings other schedulers make for its schedulerName (``shadow.py``)
    shadow: bool = False

    def plugin_set(self, point: str) -> PluginSet:
        return self.plugins.get(point) or PluginSet()


def _describe(error: jsonschema.ValidationError) -> str:
    v, value = error.validator, error.validator_value
    if v == "exclusiveMinimum":
        return f"must be > {value}, not {error.instance!r}"
    if v == "minimum":
        return f"must be >= {value}, not {error.instance!r}"
    if v == "maximum":
        return f"must be <= {value}, not {error.instance!r}"
    if v == "type":
        return f"must be of type {value}, not {error.instance!r}"
    if v == "required":
        return error.message.replace("is a required property", "is required")
    if v == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown field(s)")
    if v == "minLength" and value == 1:
        return "must not be empty"
    if v == "maxLength":
        return f"must be at most {value} characters long, not {len(error.instance)}"
    if v == "maxItems":
        return f"must have at most {value} items, not {len(error.instance)}"
    return error.message


def schema_errors(
    spec: Any, base: str = "spec", validator: jsonschema.protocols.Validator = _VALIDATOR
) -> list[ProfileError]:
    """``spec``'s violations of ``validator``'s schema (the spec schema unless told), by field path."""
    errors = sorted(validator.iter_errors(spec), key=lambda e: list(map(str, e.absolute_path)))
    return [ProfileError(join_path(base, *e.absolute_path), _describe(e)) for e in errors]


def parse_profile(obj: Mapping[str, Any], bounds: ProfileBounds = OFFLINE) -> ProfileSpec:
    """A SchedulingProfile object (or a bare spec) as a validated ``ProfileSpec``, within ``bounds`` (the
    operator passes its own; the default suits tools working on the user's own files).

    Raises ``ProfileError`` naming the first bad field.
    """
    if not isinstance(obj, Mapping):
        raise ProfileError("", "a SchedulingProfile must be an object")
    name, generation = "", None
    if "spec" in obj or "kind" in obj:
        kind, api_version = obj.get("kind"), str(obj.get("apiVersion") or "")
        if kind != KIND or not api_version.startswith(GROUP + "/"):
            raise ProfileError("kind", f"expected {KIND} in {GROUP}, got {kind!r} in {api_version!r}")
        meta = obj.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise ProfileError("metadata", f"must be an object, not {json_type(meta)}")
        name, generation = str(meta.get("name") or ""), meta.get("generation")
        spec = obj.get("spec")
        if spec is None:
            raise ProfileError("spec", "is required")
    else:
        spec = obj
    errors = schema_errors(spec)
    if errors:
        raise errors[0]
    # a shadow profile never binds: it may watch any scheduler's pods, default-scheduler's included
    reserved = None if spec.get("shadow") else bounds.scheduler_name_error(spec["schedulerName"])
    if reserved is not None:
        raise ProfileError("spec.schedulerName", reserved)
    plugins: dict[str, PluginSet] = {}
    for point in PLUGIN_SET_FIELDS:
        raw = (spec.get("plugins") or {}).get(point)
        if raw is None:
            continue
        path = join_path("spec.plugins", point)
        plugins[point] = PluginSet(
            enabled=[
                PluginRef(p["name"], int(p.get("weight") or 0), join_path(path, "enabled", i))
                for i, p in enumerate(raw.get("enabled") or ())
            ],
            disabled=[
                PluginRef(p["name"], 0, join_path(path, "disabled", i))
                for i, p in enumerate(raw.get("disabled") or ())
            ],
        )
    for point in POD_GROUP_POINTS:
        enabled = plugins[point].enabled if point in plugins else []
        if enabled:
            raise ProfileError(
                join_path(enabled[0].path, "name"),
                f"plugin {enabled[0].name!r} does not extend {point}: kopf-scheduler has no plugin at "
                "kube-scheduler v1.37's pod group extension points (GenericWorkload)",
            )
    config: dict[str, tuple[dict[str, Any], str]] = {}
    for i, entry in enumerate(spec.get("pluginConfig") or ()):
        path = join_path("spec.pluginConfig", i)
        if entry["name"] in config:
            raise ProfileError(join_path(path, "name"), f"duplicate entry for plugin {entry['name']!r}")
        size = len(json.dumps(entry.get("args") or {}, separators=(",", ":"), default=str))
        if size > MAX_PLUGIN_ARGS_BYTES:
            raise ProfileError(
                join_path(path, "args"),
                f"must take at most {MAX_PLUGIN_ARGS_BYTES} bytes as JSON, not {size}",
            )
        config[entry["name"]] = (dict(entry.get("args") or {}), join_path(path, "args"))
    extenders = parse_extenders(spec.get("extenders"), bounds=bounds)
    return ProfileSpec(
        scheduler_name=spec["schedulerName"],
        percentage_of_nodes_to_score=spec.get("percentageOfNodesToScore"),
        plugins=plugins,
        plugin_config=config,
        name=name,
        generation=generation,
        extenders=extenders,
        shadow=bool(spec.get("shadow")),
    )


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Upstream's ``mergePluginSet``: ``disabled`` (or ``"*"``) drops defaults; an ``enabled`` entry naming
    a default replaces it in place; other enabled entries are appended in their order."""
    disabled = [PluginRef(p.name, 0, p.path) for p in custom.disabled] + list(default.disabled)
    disabled_names = {p.name for p in disabled}
    custom_by_name = {p.name: (i, p) for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            if plugin.name in custom_by_name:
                index, plugin = custom_by_name[plugin.name]
                replaced.add(index)
            enabled.append(plugin)
    enabled.extend(p for i, p in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(defaults: Mapping[str, PluginSet], custom: Mapping[str, PluginSet]) -> dict[str, PluginSet]:
    """Every plugin set of ``custom`` laid over ``defaults`` (``mergePlugins`` upstream)."""
    return {
        point: merge_plugin_set(defaults.get(point) or PluginSet(), custom.get(point) or PluginSet())
        for point in PLUGIN_SET_FIELDS
    }
