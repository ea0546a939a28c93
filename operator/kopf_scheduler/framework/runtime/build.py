"""Builds a ``ProfileSpec`` into a ``Framework``, the way kube-scheduler's ``NewFramework`` does.

Steps: merge the profile's plugin sets over the defaults; instantiate only plugins some extension point
uses, each with its validated ``Args``; fill each extension point from its own ``enabled`` list; expand
``multiPoint`` into every point the plugin implements (specific settings win, see
``expandMultiPointPlugins`` upstream); derive score weights (0 means 1); check the invariants (one queue
sort plugin, at least one bind plugin); build the profile's scheduler extenders. Every error is a
``ProfileError`` naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kopf_scheduler.api.errors import ProfileError, join_path
from kopf_scheduler.api.feature_gates import DEFAULT_GATES, FeatureGates
from kopf_scheduler.api.profile import PluginRef, PluginSet, ProfileSpec, merge_plugins
from kopf_scheduler.api.schema import EXTENSION_POINTS
from kopf_scheduler.framework.args import ArgsError, decode_args
from kopf_scheduler.framework.client import ClusterClient
from kopf_scheduler.framework.clock import Clock, RealClock
from kopf_scheduler.framework.extenders import ExtenderTransport, TLSError, build_extenders
from kopf_scheduler.framework.handle import PodNominator
from kopf_scheduler.framework.interface import EXTENSION_POINTS as POINT_TYPES
from kopf_scheduler.framework.interface import MAX_NODE_SCORE, MAX_TOTAL_SCORE, Plugin
from kopf_scheduler.framework.objects import ClusterListers, NoObjects
from kopf_scheduler.framework.runtime.batch import batch_for
from kopf_scheduler.framework.runtime.framework import Framework
from kopf_scheduler.framework.runtime.pod_group_points import (
    GENERIC_WORKLOAD,
    placement_feasible_plugins,
    pod_group_post_filter_plugins,
)
from kopf_scheduler.framework.runtime.registry import Registry, RegistryError
from kopf_scheduler.framework.runtime.waiting_pods import WaitingPods


class _PendingHandle:
    """The handle plugins receive at construction; it forwards to the framework once it exists."""

    def __init__(
        self, profile_name: str, client: ClusterClient, objects: ClusterListers, feature_gates: FeatureGates
    ) -> None:
        self.profile_name = profile_name
        self.client = client
        self.objects = objects
        self.feature_gates = feature_gates
        self.framework: Framework | None = None

    def __getattr__(self, name: str) -> Any:
        if self.framework is None:
            raise AttributeError(f"the framework is not built yet (asked for {name!r})")
        return getattr(self.framework, name)


def _ref_path(ref: PluginRef, point: str, what: str = "name") -> str:
    return join_path(ref.path, what) if ref.path else join_path("spec.plugins", point)


def build_framework(
    spec: ProfileSpec,
    registry: Registry,
    defaults: Mapping[str, PluginSet],
    client: ClusterClient,
    clock: Clock | None = None,
    nominator: PodNominator | None = None,
    waiting_pods: WaitingPods | None = None,
    extender_transport: ExtenderTransport | None = None,
    objects: ClusterListers | None = None,
    feature_gates: FeatureGates = DEFAULT_GATES,
) -> Framework:
    """``extender_transport``: the HTTP client the profile's extenders share (a new one when None);
    ``objects``: the listers of the scheduler's cluster-object stores (none known when None);
    ``feature_gates``: the gates in force, on the handle from the plugins' construction on."""
    plugin_sets = merge_plugins(defaults, spec.plugins)
    objects = objects if objects is not None else NoObjects()
    handle = _PendingHandle(spec.scheduler_name, client, objects, feature_gates)

    # Which plugins are needed, and where each was first named (for error paths).
    needed: dict[str, tuple[PluginRef, str]] = {}
    for point, plugin_set in plugin_sets.items():
        for ref in plugin_set.enabled:
            needed.setdefault(ref.name, (ref, point))
    for name, (_, args_path) in spec.plugin_config.items():
        if name not in registry:
            raise ProfileError(args_path.rsplit(".", 1)[0] + ".name", f"unknown plugin {name!r}")

    instances: dict[str, Plugin] = {}
    for name, (ref, point) in needed.items():
        if name not in registry:
            raise ProfileError(
                _ref_path(ref, point), f"unknown plugin {name!r}; known: {', '.join(registry.names())}"
            )
        try:
            factory = registry.get(name)
        except RegistryError as e:
            raise ProfileError(_ref_path(ref, point), str(e)) from None
        raw_args, args_path = spec.plugin_config.get(name, ({}, ""))
        try:
            args: Any = decode_args(factory.args_type, raw_args, feature_gates)
            validate = getattr(args, "validate", None)
            if callable(validate):
                validate()
        except ArgsError as e:
            raise ProfileError(join_path(args_path, e.field) if e.field else args_path, e.message) from None
        try:
            instances[name] = factory.new(args, handle)
        except (ValueError, TypeError) as e:
            raise ProfileError(args_path or _ref_path(ref, point), f"plugin {name!r}: {e}") from None

    points: dict[str, list[Plugin]] = {}
    for point in EXTENSION_POINTS:
        kind = POINT_TYPES[point]
        plugin_set = plugin_sets[point]
        chosen: list[Plugin] = []
        seen: set[str] = set()
        for ref in plugin_set.enabled:
            plugin = instances[ref.name]
            if not isinstance(plugin, kind):
                raise ProfileError(_ref_path(ref, point), f"plugin {ref.name!r} does not extend {point}")
            if ref.name in seen:
                raise ProfileError(
                    _ref_path(ref, point), f"plugin {ref.name!r} already registered as {point}"
                )
            seen.add(ref.name)
            chosen.append(plugin)
        points[point] = _expand_multi_point(
            point, kind, chosen, plugin_set, plugin_sets["multiPoint"], instances
        )

    if len(points["queueSort"]) != 1:
        raise ProfileError(
            "spec.plugins.queueSort",
            f"exactly one queue sort plugin is required for profile {spec.scheduler_name!r}, "
            f"got {len(points['queueSort'])}",
        )
    if not points["bind"]:
        raise ProfileError(
            "spec.plugins.bind", f"at least one bind plugin is required for {spec.scheduler_name!r}"
        )

    weights = _score_weights(points["score"], plugin_sets)
    try:
        extenders = build_extenders(spec.extenders, extender_transport or ExtenderTransport())
    except TLSError as e:
        raise ProfileError(e.field, str(e)) from None
    framework = Framework(
        profile_name=spec.scheduler_name,
        percentage_of_nodes_to_score=spec.percentage_of_nodes_to_score,
        shadow=spec.shadow,
        plugins=instances,
        pre_enqueue=points["preEnqueue"],  # type: ignore[arg-type]
        queue_sort=points["queueSort"][0],  # type: ignore[arg-type]
        pre_filter=points["preFilter"],  # type: ignore[arg-type]
        filter=points["filter"],  # type: ignore[arg-type]
        post_filter=points["postFilter"],  # type: ignore[arg-type]
        pre_score=points["preScore"],  # type: ignore[arg-type]
        score=points["score"],  # type: ignore[arg-type]
        score_weights=weights,
        reserve=points["reserve"],  # type: ignore[arg-type]
        permit=points["permit"],  # type: ignore[arg-type]
        pre_bind=points["preBind"],  # type: ignore[arg-type]
        bind=points["bind"],  # type: ignore[arg-type]
        post_bind=points["postBind"],  # type: ignore[arg-type]
        client=client,
        clock=clock or RealClock(),
        waiting_pods=waiting_pods or WaitingPods(),
        generation=spec.generation,
        extenders=extenders,
        objects=objects,
        feature_gates=feature_gates,
    )
    if nominator is not None:
        framework.nominator = nominator
    framework.batch = batch_for(framework)
    if feature_gates.enabled(GENERIC_WORKLOAD):  # the pod group cycle's points
        framework.placement_feasible = placement_feasible_plugins(instances, generic_workload=True)
        framework.pod_group_post_filter = pod_group_post_filter_plugins(
            instances, plugin_sets["multiPoint"], plugin_sets.get("podGroupPostFilter")
        )
    handle.framework = framework
    return framework


def _expand_multi_point(
    point: str,
    kind: type,
    specific: list[Plugin],
    plugin_set: PluginSet,
    multi_point: PluginSet,
    instances: Mapping[str, Plugin],
) -> list[Plugin]:
    """Upstream's ``expandMultiPointPlugins`` for one extension point.

    Order: plugins configured both here and in multiPoint (in this point's order), then multiPoint-only
    plugins (multiPoint order), then the rest of this point's plugins.
    """
    if "*" in plugin_set.disabled_names or not multi_point.enabled:
        return specific
    specific_names = [p.name for p in specific]
    overrides: set[str] = set()
    from_multi: list[str] = []
    for ref in multi_point.enabled:
        plugin = instances[ref.name]
        if not isinstance(plugin, kind) or ref.name in plugin_set.disabled_names:
            continue
        if ref.name in specific_names:
            overrides.add(ref.name)
            continue
        if ref.name in from_multi:
            raise ProfileError(
                _ref_path(ref, "multiPoint"), f"plugin {ref.name!r} already registered as {point}"
            )
        from_multi.append(ref.name)
    ordered = [n for n in specific_names if n in overrides]
    ordered += from_multi
    ordered += [n for n in specific_names if n not in overrides]
    return [instances[n] for n in ordered]


def _score_weights(score_plugins: list[Plugin], plugin_sets: Mapping[str, PluginSet]) -> dict[str, int]:
    """Weights from the score set first, then multiPoint; an unset weight (0) counts as 1."""
    active = {p.name for p in score_plugins}
    weights: dict[str, int] = {}
    total = 0
    for ref in [*plugin_sets["score"].enabled, *plugin_sets["multiPoint"].enabled]:
        if ref.name not in active or ref.name in weights:
            continue
        weight = ref.weight or 1
        if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
            raise ProfileError(
                _ref_path(ref, "score", "weight"), "total score of Score plugins could overflow"
            )
        weights[ref.name] = weight
        total += weight * MAX_NODE_SCORE
    for name in active - weights.keys():
        weights[name] = 1
    return weights
