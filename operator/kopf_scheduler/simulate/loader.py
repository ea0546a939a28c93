"""Reads plain Kubernetes YAML (files or folders, multi-document, ``kind: List``) into nodes, pods,
PodDisruptionBudgets, the other kinds the scheduler reads (Namespaces, Services, ReplicaSets,
StatefulSets, ReplicationControllers: ``framework.objects.WATCHED_KINDS``) and SchedulingProfiles,
checking every object up front so that bad input ends with one line that names the file, the object and
the field. PriorityClasses resolve the pods' priorities and budgets without a status get one, as the API
server would have done (``simulate.admission``); every namespace gets the ``kubernetes.io/metadata.name``
label the API server puts on it, and a namespace that objects use but no file defines exists as it would
in a cluster. Objects of other kinds are counted in ``ClusterInput.ignored``, never dropped silently."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.api.errors import ProfileError, UsageError
from kopf_scheduler.api.profile import ProfileSpec, parse_profile
from kopf_scheduler.framework.disruption_budgets import BudgetParseError, DisruptionBudget
from kopf_scheduler.framework.node_info import NodeInfo, NodeParseError
from kopf_scheduler.framework.objects import NAMESPACES, WATCHED_KINDS, ObjectKind, ObjectParseError
from kopf_scheduler.framework.pod_info import PodInfo, PodParseError
from kopf_scheduler.simulate.admission import (
    SYSTEM_PRIORITY_CLASSES,
    AdmissionError,
    builtin_priority_classes,
    default_disruptions_allowed,
    default_replication_controller,
    parse_priority_class,
    resolve_priority,
    validate_pod_resources,
)

_YAML_SUFFIXES = (".yaml", ".yml", ".json")

#: values a document may hold once its YAML aliases are expanded (a few alias levels can describe
#: billions: the "billion laughs"); Kubernetes' YAML decoder refuses excessive aliasing too
MAX_EXPANDED_VALUES = 1_000_000


@dataclass
class ClusterInput:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    #: pods with spec.nodeName: load already on the nodes
    bound_pods: list[dict[str, Any]] = field(default_factory=list)
    #: pods to schedule, in file order
    pending_pods: list[dict[str, Any]] = field(default_factory=list)
    #: PodDisruptionBudgets (policy/v1), each with a status
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    #: objects of the other kinds the scheduler reads, in file order (namespaces first)
    objects: list[tuple[ObjectKind[Any], dict[str, Any]]] = field(default_factory=list)
    #: kinds simulate does not read -> how many objects of that kind the input had
    ignored: dict[str, int] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        """One line per kind of object that was not read."""
        return [
            f"warning: ignored {count} {kind} object{'s' if count != 1 else ''}"
            " (not a kind the scheduler reads)"
            for kind, count in sorted(self.ignored.items())
        ]


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _YAML_SUFFIXES)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    return [path]


#: libyaml's loader where PyYAML was built with it (several times faster), PyYAML's own otherwise
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _parse(path: Path, text: str) -> list[Any]:
    """The documents of one file. JSON (a ``.json`` file, or a file that starts like one) goes through a
    JSON parser; everything else, and JSON that only looked like it, through YAML."""
    if path.suffix == ".json" or text.lstrip()[:1] in ("{", "["):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError as e:
            if path.suffix == ".json":
                raise UsageError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    try:
        docs = list(yaml.load_all(text, Loader=_YAML_LOADER))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise UsageError(f"{path}{where}: invalid YAML: {problem}") from None
    if "&" in text:  # YAML anchors may share one mapping between objects: give each its own
        for i, doc in enumerate(docs):
            if _expanded_size(doc, MAX_EXPANDED_VALUES) > MAX_EXPANDED_VALUES:
                raise UsageError(
                    f"{path}: document {i + 1}: invalid YAML: excessive aliasing (more than "
                    f"{MAX_EXPANDED_VALUES:,} values once its aliases are expanded)"
                )
        docs = copy.deepcopy(docs)
    return docs


def _expanded_size(doc: Any, limit: int) -> int:
    """How many values ``doc`` holds with every alias expanded (a value shared N times counts N times),
    counting no further than just past ``limit`` (a recursive alias never ends)."""
    count = 0
    stack = [doc]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count


def _documents(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, object) for every object in ``path``; each object is the loader's own, free to change."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not a text file (expected UTF-8 YAML or JSON)") from None
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    docs = _parse(path, text)
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise UsageError(
                f"{path}: document {i + 1}: expected a Kubernetes object, got {type(doc).__name__}"
            )
        if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
            for j, item in enumerate(doc.get("items") or ()):
                if not isinstance(item, dict):
                    raise UsageError(f"{path}: document {i + 1}: items[{j}]: expected an object")
                yield f"{path}: items[{j}]", item
        else:
            yield str(path), doc


def _describe(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "<unnamed>"
    if obj.get("kind") in _NAMESPACED:
        return f"{obj.get('kind')} {meta.get('namespace') or 'default'}/{name}"
    return f"{obj.get('kind')} {name}"


#: the watched kinds by (apiVersion, kind): two share the kind PodGroup (scheduler-plugins' and the
#: Workload API's)
_KINDS = {(kind.api_version, kind.kind): kind for kind in WATCHED_KINDS}
#: the API versions the API server serves each kind simulate reads at; the first when a document has none
_API_VERSIONS: dict[str, tuple[str, ...]] = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "PodDisruptionBudget": ("policy/v1",),
    "PriorityClass": ("scheduling.k8s.io/v1",),
}
for _kind in WATCHED_KINDS:
    _API_VERSIONS[_kind.kind] = (*_API_VERSIONS.get(_kind.kind, ()), _kind.api_version)
_NAMESPACED = {"Pod", "PodDisruptionBudget"} | {k.kind for k in WATCHED_KINDS if k.namespaced}
_READ = {"Node", "Pod", "PodDisruptionBudget", "PriorityClass", *(kind for _, kind in _KINDS)}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _with_namespaces(cluster: ClusterInput, used: set[str]) -> None:
    """Namespaces first, each labelled with its name as the API server labels it; the ones objects use
    but no file defines are added."""
    defined = [obj for kind, obj in cluster.objects if kind is NAMESPACES]
    names = {obj["metadata"]["name"] for obj in defined}
    implied = [_namespace(name) for name in sorted(used - names)]
    for obj in (*defined, *implied):
        labels = obj["metadata"].get("labels") or {}
        obj["metadata"]["labels"] = {**labels, NAMESPACE_NAME_LABEL: obj["metadata"]["name"]}
    others = [(kind, obj) for kind, obj in cluster.objects if kind is not NAMESPACES]
    cluster.objects = [(NAMESPACES, obj) for obj in (*defined, *implied)] + others


def load_cluster(paths: list[Path]) -> ClusterInput:
    return load_objects(item for root in paths for path in _files(root) for item in _documents(path))


def load_objects(objects: Iterable[tuple[str, dict[str, Any]]]) -> ClusterInput:
    """``load_cluster`` for objects from elsewhere (a live cluster): (where it came from, object) pairs,
    each object the loader's own to change."""
    cluster = ClusterInput()
    seen: set[tuple[str, str, str, str]] = set()
    classes = builtin_priority_classes()
    pods: list[tuple[str, dict[str, Any]]] = []
    budgets: list[tuple[str, dict[str, Any]]] = []
    used_namespaces = {"default"}
    for where, obj in objects:
        kind = obj.get("kind")
        if kind not in _READ:
            label = str(kind) if kind else "<no kind>"
            cluster.ignored[label] = cluster.ignored.get(label, 0) + 1
            continue
        api_version = obj.get("apiVersion")
        served = _API_VERSIONS[kind]
        if api_version is not None and api_version not in served:
            expected = " or ".join(repr(v) for v in served)
            raise UsageError(
                f"{where}: {kind}: apiVersion: {api_version!r} is not served for {kind} (expected {expected})"
            )
        version = api_version if api_version is not None else served[0]
        if obj.get("metadata") is None:
            obj["metadata"] = {}
        meta = obj["metadata"]
        if not isinstance(meta, dict):
            raise UsageError(f"{where}: {kind}: metadata: must be an object")
        for key in ("name", "namespace"):
            if not isinstance(meta.get(key, ""), str):
                raise UsageError(f"{where}: {kind}: metadata.{key}: must be a string")
        if kind == "PriorityClass":
            try:
                priority_class = parse_priority_class(obj)
            except AdmissionError as e:
                raise UsageError(f"{where}: {_describe(obj)}: {e}") from None
            if priority_class.name in classes and priority_class.name not in SYSTEM_PRIORITY_CLASSES:
                raise UsageError(f"{where}: {_describe(obj)}: defined twice")
            classes[priority_class.name] = priority_class
            continue
        if kind in _NAMESPACED:
            meta.setdefault("namespace", "default")
            used_namespaces.add(str(meta["namespace"]))
        if kind == "Pod":
            meta.setdefault("uid", f"sim-{meta['namespace']}-{meta.get('name')}")
        ident = (version, kind, meta.get("namespace", ""), str(meta.get("name")))
        if ident in seen:
            raise UsageError(f"{where}: {_describe(obj)}: defined twice")
        seen.add(ident)
        try:
            if kind == "Node":
                NodeInfo(obj)
                cluster.nodes.append(obj)
            elif kind == "PodDisruptionBudget":
                DisruptionBudget.parse(obj)
                cluster.pdbs.append(obj)
                budgets.append((where, obj))
            elif (version, kind) in _KINDS:
                if kind == "ReplicationController":
                    default_replication_controller(obj)
                _KINDS[version, kind].parse(obj)
                cluster.objects.append((_KINDS[version, kind], obj))
            else:  # read below, once every PriorityClass is known
                pods.append((where, obj))
        except (NodeParseError, PodParseError, BudgetParseError, ObjectParseError) as e:
            raise UsageError(f"{where}: {_describe(obj)}: {e}") from None
    for where, pod in pods:
        try:
            PodInfo(pod)  # readable; what admission sets below keeps it so
            validate_pod_resources(pod)
            resolve_priority(pod, classes)
        except (AdmissionError, PodParseError) as e:
            raise UsageError(f"{where}: {_describe(pod)}: {e}") from None
        target = cluster.bound_pods if (pod.get("spec") or {}).get("nodeName") else cluster.pending_pods
        target.append(pod)
    for where, pdb in budgets:
        try:
            default_disruptions_allowed(pdb, (p for _, p in pods))
        except AdmissionError as e:
            raise UsageError(f"{where}: {_describe(pdb)}: {e}") from None
    _with_namespaces(cluster, used_namespaces)
    return cluster


def load_profiles(paths: list[Path]) -> list[tuple[str, ProfileSpec]]:
    """(where it came from, profile) for every SchedulingProfile in ``paths``."""
    profiles: list[tuple[str, ProfileSpec]] = []
    for root in paths:
        for path in _files(root):
            for where, obj in _documents(path):
                try:
                    profiles.append((where, parse_profile(obj)))
                except ProfileError as e:
                    raise UsageError(f"{where}: {e}") from None
    return profiles
