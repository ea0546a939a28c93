"""Storage objects the volume plugins read: PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes, CSIDrivers and CSIStorageCapacities.

Each value keeps the API object (``raw``, for the volume binder, which writes modified copies back) and
the fields the plugins match on, parsed once. ``resource_version`` lets the binder's assume cache tell an
informer update newer than what it assumed. A field of the wrong type is refused with its path; missing
optional fields take the API server's defaults (``volumeMode: Filesystem``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.api.quantity import QuantityError, value_of, wrong_type
from kopf_scheduler.framework.events import Resource
from kopf_scheduler.framework.objects.kind import ObjectKind, ObjectParseError, object_key, string_map
from kopf_scheduler.framework.selectors import (
    LabelSelector,
    NodeSelector,
    SelectorError,
    node_selector_type_error,
)
from kopf_scheduler.framework.volumes import InTreeDisk, VolumeParseError, in_tree_disk

_EMPTY: Mapping[str, Any] = {}

#: annotations the volume binder and the PV controller exchange (``pv_controller.go`` / ``util.go``)
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by"


def _section(raw: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    value: Any = raw
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            return _EMPTY
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{path}: must be an object")
    return value


def _str(value: Any, path: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise ObjectParseError(f"{path}: must be a string, not {value!r}")
    return value


def _strings(value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ObjectParseError(f"{path}: must be a list of strings")
    return tuple(value)


def _quantity(value: Any, path: str) -> int | None:
    if value is None:
        return None
    try:
        return value_of(value)
    except QuantityError as e:
        raise ObjectParseError(f"{path}: {e}") from None
    except TypeError:  # unhashable: a list or an object
        raise ObjectParseError(f"{path}: {wrong_type(value)}") from None


def _meta(raw: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str], str, str]:
    meta = _section(raw, "metadata")
    labels = string_map(meta.get("labels"), "metadata.labels") or {}
    annotations = string_map(meta.get("annotations"), "metadata.annotations") or {}
    return labels, annotations, str(meta.get("uid") or ""), str(meta.get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True, eq=False)
class PersistentVolume:
    name: str
    raw: Mapping[str, Any]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    resource_version: str
    #: ``spec.capacity.storage`` in bytes (0 when absent)
    capacity: int
    storage_class: str
    access_modes: tuple[str, ...]
    volume_mode: str
    claim_ref: ClaimRef | None
    phase: str
    #: ``spec.nodeAffinity.required``; None when the volume is reachable from every node
    node_affinity: NodeSelector | None
    #: the affinity's text could not be parsed (upstream reports it as an error)
    node_affinity_error: str = ""
    csi_driver: str = ""
    csi_handle: str = ""
    #: ``spec.csi`` is set (a CSI volume, whatever its driver field says)
    is_csi: bool = False
    #: the in-tree disk the volume is (``spec.awsElasticBlockStore``, ...), if any
    in_tree: InTreeDisk | None = None
    #: ``spec.volumeAttributesClassName`` ("" when unset)
    attributes_class: str = ""
    #: ``metadata.deletionTimestamp`` is set
    deleting: bool = False


def parse_persistent_volume(raw: Mapping[str, Any]) -> PersistentVolume:
    _, name = object_key(raw, namespaced=False)
    labels, annotations, _, version = _meta(raw)
    spec = _section(raw, "spec")
    ref = spec.get("claimRef")
    claim_ref = None
    if isinstance(ref, Mapping):
        claim_ref = ClaimRef(
            _str(ref.get("namespace"), "spec.claimRef.namespace"),
            _str(ref.get("name"), "spec.claimRef.name"),
            _str(ref.get("uid"), "spec.claimRef.uid"),
        )
    elif ref is not None:
        raise ObjectParseError("spec.claimRef: must be an object")
    required = _section(raw, "spec.nodeAffinity").get("required")
    node_affinity, affinity_error = None, ""
    if required is not None:
        if not isinstance(required, Mapping):
            raise ObjectParseError("spec.nodeAffinity.required: must be an object")
        wrong = node_selector_type_error(required)
        if wrong is not None:
            raise ObjectParseError(f"spec.nodeAffinity.required.{wrong}")
        node_affinity = NodeSelector.parse(required)
        if any(term.invalid for term in node_affinity.terms):
            affinity_error = "spec.nodeAffinity.required: invalid node selector term"
    csi = _section(raw, "spec.csi")
    try:
        in_tree = in_tree_disk(spec, "spec")
    except VolumeParseError as e:
        raise ObjectParseError(str(e)) from None
    return PersistentVolume(
        name=name,
        raw=raw,
        labels=labels,
        annotations=annotations,
        resource_version=version,
        capacity=_quantity(_section(raw, "spec.capacity").get("storage"), "spec.capacity.storage") or 0,
        storage_class=_str(spec.get("storageClassName"), "spec.storageClassName"),
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=_str(spec.get("volumeMode"), "spec.volumeMode", "Filesystem"),
        claim_ref=claim_ref,
        phase=_str(_section(raw, "status").get("phase"), "status.phase"),
        node_affinity=node_affinity,
        node_affinity_error=affinity_error,
        csi_driver=_str(csi.get("driver"), "spec.csi.driver"),
        csi_handle=_str(csi.get("volumeHandle"), "spec.csi.volumeHandle"),
        is_csi=spec.get("csi") is not None,
        in_tree=in_tree,
        attributes_class=_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        deleting=_section(raw, "metadata").get("deletionTimestamp") is not None,
    )


@dataclass(frozen=True, slots=True, eq=False)
class PersistentVolumeClaim:
    namespace: str
    name: str
    uid: str
    raw: Mapping[str, Any]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    resource_version: str
    #: ``spec.storageClassName``; None when unset (the default class applies), "" for "no class"
    storage_class: str | None
    volume_name: str
    access_modes: tuple[str, ...]
    volume_mode: str
    #: ``spec.resources.requests.storage`` in bytes
    request: int
    selector: LabelSelector | None
    phase: str
    owner_uids: tuple[str, ...] = field(default=())
    #: ``spec.volumeAttributesClassName`` ("" when unset)
    attributes_class: str = ""
    #: ``metadata.deletionTimestamp`` is set
    deleting: bool = False
    #: ``spec.resources.requests`` has ``storage`` (``request`` is 0 without it)
    has_request: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_persistent_volume_claim(raw: Mapping[str, Any]) -> PersistentVolumeClaim:
    namespace, name = object_key(raw, namespaced=True)
    labels, annotations, uid, version = _meta(raw)
    spec = _section(raw, "spec")
    raw_class = spec.get("storageClassName")
    selector_raw = spec.get("selector")
    try:
        selector = LabelSelector.parse(selector_raw) if isinstance(selector_raw, Mapping) else None
    except SelectorError as e:
        raise ObjectParseError(f"spec.selector: {e}") from None
    owners = tuple(
        str(ref.get("uid") or "")
        for ref in _section(raw, "metadata").get("ownerReferences") or ()
        if isinstance(ref, Mapping) and ref.get("controller") is True
    )
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=uid,
        raw=raw,
        labels=labels,
        annotations=annotations,
        resource_version=version,
        storage_class=None if raw_class is None else _str(raw_class, "spec.storageClassName"),
        volume_name=_str(spec.get("volumeName"), "spec.volumeName"),
        access_modes=_strings(spec.get("accessModes"), "spec.accessModes"),
        volume_mode=_str(spec.get("volumeMode"), "spec.volumeMode", "Filesystem"),
        request=_quantity(
            _section(raw, "spec.resources.requests").get("storage"), "spec.resources.requests.storage"
        )
        or 0,
        selector=selector,
        phase=_str(_section(raw, "status").get("phase"), "status.phase"),
        owner_uids=owners,
        attributes_class=_str(spec.get("volumeAttributesClassName"), "spec.volumeAttributesClassName"),
        deleting=_section(raw, "metadata").get("deletionTimestamp") is not None,
        has_request="storage" in _section(raw, "spec.resources.requests"),
    )


@dataclass(frozen=True, slots=True, eq=False)
class StorageClass:
    name: str
    raw: Mapping[str, Any]
    provisioner: str
    #: ``Immediate`` (the default) or ``WaitForFirstConsumer``
    volume_binding_mode: str
    #: ``allowedTopologies`` as node selector terms (ORed); empty: every node
    allowed_topologies: NodeSelector | None
    is_default: bool


def parse_storage_class(raw: Mapping[str, Any]) -> StorageClass:
    _, name = object_key(raw, namespaced=False)
    _, annotations, _, _ = _meta(raw)
    topologies = raw.get("allowedTopologies")
    allowed = None
    if topologies:
        if not isinstance(topologies, list):
            raise ObjectParseError("allowedTopologies: must be a list")
        # a topology selector term's labelExpressions are node selector requirements with operator In
        terms = [
            {
                "matchExpressions": [
                    {"key": e.get("key"), "operator": "In", "values": e.get("values") or []}
                    for e in (t.get("matchLabelExpressions") or ())
                    if isinstance(e, Mapping)
                ]
            }
            for t in topologies
            if isinstance(t, Mapping)
        ]
        allowed = NodeSelector.parse({"nodeSelectorTerms": terms})
    default = annotations.get("storageclass.kubernetes.io/is-default-class") == "true" or (
        annotations.get("storageclass.beta.kubernetes.io/is-default-class") == "true"
    )
    return StorageClass(
        name=name,
        raw=raw,
        provisioner=_str(raw.get("provisioner"), "provisioner"),
        volume_binding_mode=_str(raw.get("volumeBindingMode"), "volumeBindingMode", "Immediate"),
        allowed_topologies=allowed,
        is_default=default,
    )


@dataclass(frozen=True, slots=True)
class CSINodeDriver:
    name: str
    node_id: str
    #: ``allocatable.count``: how many of the driver's volumes the node can attach; None: no limit
    allocatable: int | None
    topology_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True, eq=False)
class CSINode:
    name: str
    raw: Mapping[str, Any]
    drivers: Mapping[str, CSINodeDriver]
    #: ``storage.alpha.kubernetes.io/migrated-plugins``: in-tree plugins migrated to CSI on this node
    migrated_plugins: tuple[str, ...]


def parse_csi_node(raw: Mapping[str, Any]) -> CSINode:
    _, name = object_key(raw, namespaced=False)
    _, annotations, _, _ = _meta(raw)
    drivers: dict[str, CSINodeDriver] = {}
    listed = _section(raw, "spec").get("drivers")
    if listed is None:  # a kubelet's CSINode lists no drivers until one registers
        listed = []
    if not isinstance(listed, list):
        raise ObjectParseError("spec.drivers: must be a list")
    for i, d in enumerate(listed):
        if not isinstance(d, Mapping):
            raise ObjectParseError(f"spec.drivers[{i}]: must be an object")
        count = _section(d, "allocatable").get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
            raise ObjectParseError(f"spec.drivers[{i}].allocatable.count: must be an integer, not {count!r}")
        driver = _str(d.get("name"), f"spec.drivers[{i}].name")
        drivers[driver] = CSINodeDriver(
            driver,
            _str(d.get("nodeID"), f"spec.drivers[{i}].nodeID"),
            count,
            _strings(d.get("topologyKeys"), f"spec.drivers[{i}].topologyKeys"),
        )
    migrated = annotations.get("storage.alpha.kubernetes.io/migrated-plugins", "")
    return CSINode(name, raw, drivers, tuple(p for p in migrated.split(",") if p))


@dataclass(frozen=True, slots=True, eq=False)
class CSIDriver:
    name: str
    raw: Mapping[str, Any]
    attach_required: bool
    #: ``spec.storageCapacity``: the scheduler checks CSIStorageCapacity objects for this driver
    storage_capacity: bool
    #: ``spec.preventPodSchedulingIfMissing``: pods with the driver's volumes go only to nodes whose
    #: CSINode lists the driver (NodeVolumeLimits, with the VolumeLimitScaling gate on)
    prevent_pod_scheduling_if_missing: bool = False


def parse_csi_driver(raw: Mapping[str, Any]) -> CSIDriver:
    _, name = object_key(raw, namespaced=False)
    spec = _section(raw, "spec")
    attach = spec.get("attachRequired")
    capacity = spec.get("storageCapacity")
    prevent = spec.get("preventPodSchedulingIfMissing")
    return CSIDriver(name, raw, attach is not False, capacity is True, prevent is True)


@dataclass(frozen=True, slots=True, eq=False)
class CSIStorageCapacity:
    namespace: str
    name: str
    raw: Mapping[str, Any]
    storage_class: str
    #: which nodes the capacity is for; None: no node (as upstream, a nil selector matches none)
    node_topology: LabelSelector | None
    capacity: int | None
    maximum_volume_size: int | None


def parse_csi_storage_capacity(raw: Mapping[str, Any]) -> CSIStorageCapacity:
    namespace, name = object_key(raw, namespaced=True)
    topology = raw.get("nodeTopology")
    try:
        selector = LabelSelector.parse(topology) if isinstance(topology, Mapping) else None
    except SelectorError as e:
        raise ObjectParseError(f"nodeTopology: {e}") from None
    return CSIStorageCapacity(
        namespace=namespace,
        name=name,
        raw=raw,
        storage_class=_str(raw.get("storageClassName"), "storageClassName"),
        node_topology=selector,
        capacity=_quantity(raw.get("capacity"), "capacity"),
        maximum_volume_size=_quantity(raw.get("maximumVolumeSize"), "maximumVolumeSize"),
    )


PERSISTENT_VOLUMES: ObjectKind[PersistentVolume] = ObjectKind(
    "PersistentVolume",
    "",
    "v1",
    "persistentvolumes",
    False,
    parse_persistent_volume,
    Resource.PERSISTENT_VOLUME,
)
PERSISTENT_VOLUME_CLAIMS: ObjectKind[PersistentVolumeClaim] = ObjectKind(
    "PersistentVolumeClaim",
    "",
    "v1",
    "persistentvolumeclaims",
    True,
    parse_persistent_volume_claim,
    Resource.PERSISTENT_VOLUME_CLAIM,
)
STORAGE_CLASSES: ObjectKind[StorageClass] = ObjectKind(
    "StorageClass",
    "storage.k8s.io",
    "v1",
    "storageclasses",
    False,
    parse_storage_class,
    Resource.STORAGE_CLASS,
)
CSI_NODES: ObjectKind[CSINode] = ObjectKind(
    "CSINode", "storage.k8s.io", "v1", "csinodes", False, parse_csi_node, Resource.CSI_NODE
)
CSI_DRIVERS: ObjectKind[CSIDriver] = ObjectKind(
    "CSIDriver", "storage.k8s.io", "v1", "csidrivers", False, parse_csi_driver, Resource.CSI_DRIVER
)
CSI_STORAGE_CAPACITIES: ObjectKind[CSIStorageCapacity] = ObjectKind(
    "CSIStorageCapacity",
    "storage.k8s.io",
    "v1",
    "csistoragecapacities",
    True,
    parse_csi_storage_capacity,
    Resource.CSI_STORAGE_CAPACITY,
)
