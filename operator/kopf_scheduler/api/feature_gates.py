"""Kubernetes feature gates as kube-scheduler v1.37.2 has them: every gate the scheduler reads, with
upstream's versioned defaults, and what kopf-scheduler's code does for each.

The table transcribes upstream's versioned feature specs (``pkg/features/kube_features.go`` at v1.37.2;
``ComponentFlagz``/``ComponentStatusz`` from ``k8s.io/component-base/zpages/features``,
``WatchListClient`` from ``k8s.io/client-go/features``): each gate is a list of
``(version, default, stage, locked)`` entries, and the entry in force at an emulated version is the last
one not newer than it whose minimum compatibility version (when it has one) is reached, the minimum
compatibility version being the emulated one less one minor (``featureSpecAtEmulationAndMinCompatVersion``
in ``k8s.io/component-base/featuregate``). A gate with no such entry is "pre-alpha": off, and not
settable. Dependencies (``defaultKubernetesFeatureGateDependencies``) are checked as upstream checks them:
an enabled gate whose dependency is disabled is refused.

``IMPLEMENTED`` says what kopf-scheduler's code does today: a gate in ``READ`` is read by the code
(``handle.feature_gates``) and either value is implemented; every other gate is behaved as on or behaved as
off whatever its value. So ``--feature-gates`` accepts a gate only at a value the code implements; any other
value is refused with a line naming it, never silently ignored. Defaults that the code does not follow at the
emulated version (``FeatureGates.not_followed``) are said in the log at start, so the difference from
kube-scheduler of that version is never silent either.

Emulated versions: kube-scheduler v1.37 emulates 1.34 to 1.37 (``--emulated-version``, read as
component-base's flag reads it: ``1.36``, ``kube=1.36``, ``v1.36.0``; floor: binary version less three
minors). Without it, the API server's minor version chooses, clamped to ``AUTO_VERSIONS`` (1.35 to 1.37).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

Version = tuple[int, int]


class Stage(enum.Enum):
    """``featuregate.prerelease`` (upstream prints GA as an empty string)."""

    PRE_ALPHA = "PRE-ALPHA"
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = ""
    DEPRECATED = "DEPRECATED"


#: the release whose gates the table transcribes (upstream v1.37.2)
BINARY_VERSION: Version = (1, 37)
#: the oldest version kube-scheduler v1.37 emulates (``kubeEffectiveVersionFloors``: binary less three)
EMULATION_FLOOR: Version = (1, 34)
#: the versions whose gates are taken from the API server's version, oldest and newest
AUTO_VERSIONS: tuple[Version, Version] = ((1, 35), (1, 37))


class FeatureGateError(ValueError):
    """A ``--feature-gates`` or ``--emulated-version`` value refused; the message is one line."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    """One entry of a gate's versioned spec (``featuregate.FeatureSpec``)."""

    version: Version
    default: bool
    stage: Stage
    locked: bool = False
    #: the entry applies only once the minimum compatibility version reaches this
    min_compatibility: Version | None = None


def _v(text: str) -> Version:
    major, minor = text.split(".")
    return int(major), int(minor)


def _specs(text: str) -> tuple[GateSpec, ...]:
    """``"1.34 Alpha off, 1.36 Beta on, 1.37 GA on locked"``: upstream's list of ``{Version, Default,
    PreRelease, LockToDefault, MinCompatibilityVersion}`` entries, one per comma."""
    specs = []
    for entry in text.split(", "):
        version, stage, default, *rest = entry.split()
        min_compatibility = _v(rest[-1]) if "min-compatibility" in rest else None
        specs.append(
            GateSpec(_v(version), default == "on", Stage[stage.upper()], "locked" in rest, min_compatibility)
        )
    return tuple(specs)


#: every gate kube-scheduler v1.37.2 reads, by upstream name: its versioned spec, oldest entry first
GATES: Mapping[str, tuple[GateSpec, ...]] = {
    name: _specs(text)
    for name, text in {
        "CompositePodGroup": "1.37 Alpha off",
        "ComponentFlagz": "1.32 Alpha off, 1.36 Beta on",
        "ComponentStatusz": "1.32 Alpha off, 1.36 Beta on",
        "CoordinatedLeaderElection": "1.31 Alpha off, 1.33 Beta off",
        "DRAAdminAccess": "1.32 Alpha off, 1.34 Beta on, 1.36 GA on locked",
        "DRAConsumableCapacity": "1.34 Alpha off, 1.36 Beta on",
        "DRADerivedAttributes": "1.37 Alpha off",
        "DRADeviceBindingConditions": "1.34 Alpha off, 1.36 Beta on",
        "DRADeviceCompatibilityGroups": "1.37 Alpha off",
        "DRADeviceTaintRules": "1.35 Alpha off, 1.36 Beta off, 1.37 GA on",
        "DRADeviceTaints": "1.33 Alpha off, 1.36 Beta on, 1.37 GA on",
        "DRAExtendedResource": "1.34 Alpha off, 1.36 Beta on, 1.37 GA on locked",
        "DRAFractionalCapacityRange": "1.37 Beta off, 1.37 Beta on min-compatibility 1.37",
        "DRAListTypeAttributes": "1.36 Alpha off",
        "DRANodeAllocatableResources": "1.36 Alpha off",
        "DRAOptionalNodeOperations": "1.37 Alpha off",
        "DRAPartitionableDevices": "1.33 Alpha off, 1.36 Beta on",
        "DRAPrioritizedList": "1.33 Alpha off, 1.34 Beta on, 1.36 GA on, 1.37 GA on locked",
        "DRAResourceClaimDeviceStatus": "1.32 Alpha off, 1.33 Beta on, 1.37 GA on locked",
        "DRASchedulerFilterTimeout": "1.34 Beta on",
        "DRAWorkloadResourceClaims": "1.36 Alpha off, 1.37 Beta off",
        "DynamicResourceAllocation": "1.26 Alpha off, 1.32 Beta off, 1.34 GA on, 1.35 GA on locked",
        "GenericWorkload": "1.35 Alpha off, 1.37 Beta off",
        "InPlacePodLevelResourcesVerticalScaling": "1.35 Alpha off, 1.36 Beta on",
        "InPlacePodVerticalScaling": "1.27 Alpha off, 1.33 Beta on, 1.35 GA on locked",
        "InPlacePodVerticalScalingSchedulerPreemption": "1.37 Alpha off",
        "InterPodAffinityHostnameFastPath": "1.37 Alpha off",
        "MatchLabelKeysInPodTopologySpread": "1.25 Alpha off, 1.27 Beta on",
        "NodeDeclaredFeatures": "1.35 Alpha off, 1.36 Beta on, 1.37 GA on locked",
        "NodeInclusionPolicyInPodTopologySpread": "1.25 Alpha off, 1.26 Beta on, 1.33 GA on locked",
        "NominatedNodeNameForExpectation": "1.34 Alpha off, 1.35 Beta on",
        "OpportunisticBatching": "1.35 Beta on",
        "PodGroupPreemptionPolicy": "1.37 Alpha off",
        "PodLevelResources": "1.32 Alpha off, 1.34 Beta on",
        "SchedulerAsyncAPICalls": "1.34 Beta off",
        "SchedulerAsyncPreemption": "1.32 Alpha off, 1.33 Beta on",
        "SchedulerPopFromBackoffQ": "1.33 Beta on",
        "SchedulerPreQueueingHints": "1.37 Alpha off",
        "StorageCapacityScoring": "1.33 Alpha off, 1.37 Beta on",
        "TaintTolerationComparisonOperators": "1.35 Alpha off",
        "TopologyAwareWorkloadScheduling": "1.36 Alpha off",
        "VolumeAttributesClass": "1.29 Alpha off, 1.31 Beta off, 1.34 GA on, 1.36 GA on locked",
        "VolumeLimitScaling": "1.35 Alpha off, 1.37 Beta on",
        "WatchListClient": "1.30 Beta off, 1.35 Beta on",
    }.items()
}

#: upstream's dependencies among these gates: a gate enabled needs every gate listed enabled
DEPENDENCIES: Mapping[str, tuple[str, ...]] = {
    "CompositePodGroup": ("GenericWorkload", "TopologyAwareWorkloadScheduling"),
    "DRAAdminAccess": ("DynamicResourceAllocation",),
    "DRAConsumableCapacity": ("DynamicResourceAllocation",),
    "DRADerivedAttributes": ("DynamicResourceAllocation",),
    "DRADeviceBindingConditions": ("DynamicResourceAllocation", "DRAResourceClaimDeviceStatus"),
    "DRADeviceCompatibilityGroups": ("DynamicResourceAllocation", "DRAPartitionableDevices"),
    "DRADeviceTaintRules": ("DRADeviceTaints",),
    "DRADeviceTaints": ("DynamicResourceAllocation",),
    "DRAExtendedResource": ("DynamicResourceAllocation",),
    "DRAFractionalCapacityRange": ("DRAConsumableCapacity",),
    "DRAListTypeAttributes": ("DynamicResourceAllocation",),
    "DRANodeAllocatableResources": ("DynamicResourceAllocation",),
    "DRAOptionalNodeOperations": ("DynamicResourceAllocation", "NodeDeclaredFeatures"),
    "DRAPartitionableDevices": ("DynamicResourceAllocation",),
    "DRAPrioritizedList": ("DynamicResourceAllocation",),
    "DRASchedulerFilterTimeout": ("DynamicResourceAllocation",),
    "DRAWorkloadResourceClaims": ("DynamicResourceAllocation", "GenericWorkload"),
    "InPlacePodLevelResourcesVerticalScaling": (
        "InPlacePodVerticalScaling", "PodLevelResources", "NodeDeclaredFeatures",
    ),
    "InPlacePodVerticalScalingSchedulerPreemption": ("InPlacePodVerticalScaling",),
    "PodGroupPreemptionPolicy": ("GenericWorkload",),
    "TopologyAwareWorkloadScheduling": ("GenericWorkload",),
}  # fmt: skip

#: gates whose value kopf-scheduler's code reads (``handle.feature_gates``): either value is implemented
READ = frozenset({
    "ComponentFlagz",  # service/zpages.py: /flagz on the secure port
    "ComponentStatusz",  # service/zpages.py: /statusz on the secure port
    "DRADeviceBindingConditions",  # plugins/dynamic_resources: binding conditions (binding_conditions.py)
    "DRAPrioritizedList",  # plugins/dynamic_resources: firstAvailable requests, Score (score.py)
    "DRAResourceClaimDeviceStatus",  # with DRADeviceBindingConditions: the claim's status.devices read
    "DRASchedulerFilterTimeout",  # plugins/dynamic_resources: DynamicResourcesArgs.filterTimeout
    "DRADeviceTaintRules",  # framework/objects (watched), plugins/dynamic_resources/taints.py
    "DRADeviceTaints",  # plugins/dynamic_resources: the allocator skips untolerated devices
    "DRAConsumableCapacity",  # plugins/dynamic_resources: shared devices, capacity (capacity.py, sharing.py)
    "DRAFractionalCapacityRange",  # plugins/dynamic_resources/capacity.py: steps in thousandths
    "DRAPartitionableDevices",  # plugins/dynamic_resources: counter sets, per-device node selection
    "DRAExtendedResource",  # plugins/node_resources_fit, plugins/dynamic_resources/extended.py
    "GenericWorkload",  # PodGroups watched, queued as groups (backend/queue/pod_groups.py), GangScheduling,
    # a lone pod's preemption victims by PodGroup (plugins/default_preemption/domain.py)
    "InPlacePodLevelResourcesVerticalScaling",  # framework/pod_requests.py (use_feature_gates): pod status
    "NominatedNodeNameForExpectation",  # scheduling/schedule_one.py: pre-flights, nominatedNodeName
    "NodeDeclaredFeatures",  # plugins/defaults.py, plugins/node_declared_features
    "OpportunisticBatching",  # framework/runtime/batch.py, scheduling/schedule_one.py
    "StorageCapacityScoring",  # plugins/volume_binding: volume-capacity scoring, the default shape
    "VolumeLimitScaling",  # plugins/node_volume_limits: CSIDriver preventPodSchedulingIfMissing
})  # fmt: skip

#: gates kopf-scheduler's code behaves as on whatever their value (kube-scheduler's defaults it
#: implements); every other gate of ``GATES`` not in ``READ`` it behaves as off
_BEHAVES_ON = frozenset({
    "DRAAdminAccess",  # plugins/dynamic_resources: adminAccess requests
    "DynamicResourceAllocation",  # the DynamicResources plugin in the default set
    "InPlacePodVerticalScaling",  # framework/pod_requests.py: status resources of resized pods
    "MatchLabelKeysInPodTopologySpread",  # plugins/pod_topology_spread/constraints.py
    "NodeInclusionPolicyInPodTopologySpread",  # nodeAffinityPolicy / nodeTaintsPolicy
    "PodLevelResources",  # framework/pod_requests.py: spec.resources
    "SchedulerAsyncPreemption",  # plugins/default_preemption: victims deleted off the cycle
    "SchedulerPopFromBackoffQ",  # backend/queue: pop from backoffQ when activeQ is empty
    "VolumeAttributesClass",  # PV/PVC volumeAttributesClassName matching
})  # fmt: skip

#: the values of each gate kopf-scheduler's code implements today
IMPLEMENTED: Mapping[str, frozenset[bool]] = {
    name: frozenset({True, False}) if name in READ else frozenset({name in _BEHAVES_ON}) for name in GATES
}


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


#: ``version.Parse`` (``k8s.io/apimachinery/pkg/util/version``): a semantic version if it is one, else a
#: generic one (two or more numbers, whatever follows them ignored)
_VERSION = re.compile(r"\s*v?([0-9]+(?:\.[0-9]+)*)(.*)")
_EXTRA = re.compile(r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?\s*")


def _parse_version(text: str) -> tuple[tuple[int, ...], str]:
    """The numbers of ``text`` and the version as upstream prints it; raises ``ValueError`` with
    upstream's words."""
    m = _VERSION.fullmatch(text)
    if m is None:
        raise ValueError(f'could not parse "{text}" as version')
    numbers, extra = m.group(1).split("."), m.group(2)
    semver = _EXTRA.fullmatch(extra) if len(numbers) == 3 else None
    if semver is not None and not any(n.startswith("0") and n != "0" for n in numbers):
        pre, build = semver.groups()
        if not any(p.isdigit() and p.startswith("0") and p != "0" for p in (pre or "").split(".")):
            return tuple(map(int, numbers)), ".".join(numbers) + (f"-{pre}" if pre else "") + (
                f"+{build}" if build else ""
            )
    if len(numbers) < 2:
        raise ValueError(f'illegal version string "{text}"')
    if numbers[0].startswith("0") and numbers[0] != "0":
        raise ValueError(f'illegal zero-prefixed version component "{numbers[0]}" in "{text}"')
    parsed = tuple(map(int, numbers))
    return parsed, ".".join(map(str, parsed))


def parse_version(text: str) -> Version:
    """``--emulated-version`` as upstream's flag reads it: comma-separated ``[component=]version`` items
    (``1.36``, ``kube=1.36``, ``v1.36.0``) whose only component is ``kube``; a patch version other than 0
    is refused."""
    versions: dict[str, tuple[tuple[int, ...], str]] = {}
    for item in text.split(","):
        component, value = "kube", item
        if "=" in item:
            component, value = (part.strip() for part in item.split("=", 1))
        try:
            numbers, shown = _parse_version(value)
        except ValueError as e:
            raise FeatureGateError(f"--emulated-version: {e}") from None
        if len(numbers) > 2 and numbers[2] != 0:
            raise FeatureGateError(f"--emulated-version: patch version not allowed, got: {component}={shown}")
        if component in versions:
            raise FeatureGateError(
                f"--emulated-version: duplicate version flag, {component}={versions[component][1]} and "
                f"{component}={shown}"
            )
        versions[component] = numbers, shown
    for component in sorted(versions):
        if component != "kube":
            raise FeatureGateError(f"--emulated-version: component not registered: {component}")
    numbers = versions["kube"][0]
    return numbers[0], numbers[1]


def spec_at(name: str, version: Version) -> GateSpec:
    """The entry of ``name`` in force at emulated ``version`` (pre-alpha, off, when none is)."""
    min_compatibility = (version[0], version[1] - 1)
    for spec in reversed(GATES[name]):
        if spec.version > version:
            continue
        if spec.min_compatibility is not None and min_compatibility < spec.min_compatibility:
            continue
        return spec
    return GateSpec((0, 0), False, Stage.PRE_ALPHA)


def defaults_at(version: Version) -> dict[str, bool]:
    """Every gate's default at emulated ``version``."""
    return {name: spec_at(name, version).default for name in GATES}


_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def parse_feature_gates(text: str) -> dict[str, bool]:
    """``A=true,B=false`` as upstream's ``featureGate.Set`` reads it (``strconv.ParseBool`` values);
    names are not checked here."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise FeatureGateError(f"--feature-gates: missing bool value for {key}")
        value = raw.strip()
        if value not in _TRUE and value not in _FALSE:
            raise FeatureGateError(
                f"--feature-gates: invalid value of {key}={value}, err: strconv.ParseBool: parsing "
                f'"{value}": invalid syntax'
            )
        gates[key] = value in _TRUE
    return gates


def check_implemented(gates: Mapping[str, bool]) -> None:
    """Refuses a gate upstream does not know, and a value kopf-scheduler's code does not implement: the
    checks that hold at every emulated version (the command line makes them before it starts)."""
    for name, value in gates.items():
        if name not in GATES:
            raise FeatureGateError(f"--feature-gates: unrecognized feature gate: {name}")
        if value not in IMPLEMENTED[name]:
            raise FeatureGateError(
                f"--feature-gates: {name}={str(value).lower()} is not implemented by kopf-scheduler, "
                f"which always runs with {name}={str(not value).lower()}"
            )


@dataclass(frozen=True)
class FeatureGates:
    """The gates in force: upstream's defaults at ``version`` with ``explicit`` settings over them."""

    version: Version
    explicit: Mapping[str, bool] = field(default_factory=dict)

    @classmethod
    def resolve(cls, version: Version, explicit: Mapping[str, bool] | None = None) -> FeatureGates:
        """Checks ``explicit`` at emulated ``version`` in upstream's order (unknown gate, locked gate,
        pre-alpha gate, then dependencies), then against what kopf-scheduler implements; raises
        ``FeatureGateError`` naming the first refused gate."""
        if not EMULATION_FLOOR <= version <= BINARY_VERSION:
            raise FeatureGateError(
                f"--emulated-version: emulation version {version_text(version)} is not between "
                f"[{version_text(EMULATION_FLOOR)}.0, {version_text(BINARY_VERSION)}.0]"
            )
        explicit = dict(explicit or {})
        text = version_text(version)
        for name, value in explicit.items():
            if name not in GATES:
                raise FeatureGateError(f"--feature-gates: unrecognized feature gate: {name}")
            spec = spec_at(name, version)
            if spec.locked and spec.default != value:
                raise FeatureGateError(
                    f"--feature-gates: cannot set feature gate {name} to {str(value).lower()}, feature is "
                    f"locked to {str(spec.default).lower()}"
                )
            if spec.stage is Stage.PRE_ALPHA:
                raise FeatureGateError(
                    f"--feature-gates: cannot set feature gate {name} to {str(value).lower()}, feature is "
                    f"PreAlpha at emulated version {text}, min compatibility version "
                    f"{version_text((version[0], version[1] - 1))}"
                )
        gates = cls(version, explicit)
        for name in sorted(DEPENDENCIES):
            if gates.enabled(name):
                off = [dep for dep in DEPENDENCIES[name] if not gates.enabled(dep)]
                if off:
                    raise FeatureGateError(
                        f"--feature-gates: {name} is enabled, but depends on features that are disabled: "
                        f"[{' '.join(off)}]"
                    )
        check_implemented(explicit)
        return gates

    def enabled(self, name: str) -> bool:
        """Whether gate ``name`` is on (``KeyError`` for a gate not in ``GATES``, as upstream panics)."""
        if name not in GATES:
            raise KeyError(f"feature {name!r} is not registered in FeatureGate")
        if name in self.explicit:
            return self.explicit[name]
        return spec_at(name, self.version).default

    def as_dict(self) -> dict[str, bool]:
        return {name: self.enabled(name) for name in GATES}

    def not_followed(self) -> dict[str, bool]:
        """The gates whose value in force kopf-scheduler's code does not implement (name -> the value in
        force; the code behaves as the opposite)."""
        return {name: on for name, on in self.as_dict().items() if on not in IMPLEMENTED[name]}

    def set_text(self) -> str:
        return ",".join(f"{name}={str(value).lower()}" for name, value in self.explicit.items())


#: kube-scheduler v1.37.2's gates without flags (the default where no service chose: tests, simulate)
DEFAULT_GATES = FeatureGates(BINARY_VERSION)


@dataclass(frozen=True, slots=True)
class EmulatedVersion:
    version: Version
    #: why: one clause for the log line
    reason: str


def _server_minor(server: Mapping[str, object]) -> Version | None:
    major = re.match(r"\d+", str(server.get("major", "")))
    minor = re.match(r"\d+", str(server.get("minor", "")))
    if major and minor:
        return int(major.group()), int(minor.group())
    m = re.match(r"v?(\d+)\.(\d+)", str(server.get("gitVersion", "")))
    return (int(m.group(1)), int(m.group(2))) if m else None


def choose_version(explicit: str, server: Mapping[str, object] | None, error: str = "") -> EmulatedVersion:
    """The emulated version: ``explicit`` (``--emulated-version``) when given, else the API server's
    minor version (``server``: its ``/version`` document) clamped to ``AUTO_VERSIONS``; when it could not
    be read (``error``), the newest."""
    oldest, newest = AUTO_VERSIONS
    if explicit:
        return EmulatedVersion(parse_version(explicit), "--emulated-version")
    served = _server_minor(server) if server is not None else None
    if served is None:
        why = error or "it gave no version"
        return EmulatedVersion(
            newest, f"the API server's version could not be read ({why}): the newest known"
        )
    git = str(server.get("gitVersion") or version_text(served)) if server is not None else ""
    if served < oldest:
        return EmulatedVersion(
            oldest,
            f"the API server is {git}, older than {version_text(oldest)}, the oldest whose gates are taken "
            f"from the API server; --emulated-version {version_text(EMULATION_FLOOR)} selects "
            f"{version_text(EMULATION_FLOOR)}'s",
        )
    if served > newest:
        return EmulatedVersion(
            newest,
            f"the API server is {git}, newer than {version_text(newest)}, the newest kopf-scheduler knows",
        )
    return EmulatedVersion(served, f"the API server is {git}")


def describe(gates: FeatureGates, reason: str) -> list[str]:
    """The log lines: which version's gates are in force and why, then (when any) the defaults the code
    does not follow."""
    lines = [f"feature gates of Kubernetes {version_text(gates.version)} in force ({reason})"]
    if gates.explicit:
        lines[0] += f", with --feature-gates {gates.set_text()}"
    unfollowed = gates.not_followed()
    if unfollowed:
        lines.append(
            f"kopf-scheduler does not yet implement these gates of Kubernetes {version_text(gates.version)}"
            " and runs as if they were set the other way: "
            + ", ".join(f"{name}={str(on).lower()}" for name, on in unfollowed.items())
        )
    return lines
