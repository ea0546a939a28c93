"""What the scheduler knows about one kind of cluster object it reads besides pods and nodes: where the
API serves it, how it is parsed into the small immutable value plugins read, and which queue resource
its events are.

Adding a kind is one ``ObjectKind`` (here or in a plugin-facing module beside it), one line in
``WATCHED_KINDS`` (``framework.objects``), and one RBAC rule: the stores, the watch handlers, the
start-up lists, the resync and ``simulate`` all iterate over the registered kinds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kopf_scheduler.framework.events import Resource

T = TypeVar("T")


class ObjectParseError(ValueError):
    """The object cannot be read as its kind; the message names the field path."""


@dataclass(frozen=True, slots=True, eq=False)
class ObjectKind(Generic[T]):
    #: the ``kind`` of the API object (``Service``)
    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    #: raw API object -> the value kept in the store; raises ``ObjectParseError``
    parse: Callable[[Mapping[str, Any]], T]
    #: the queue resource its add, update and delete events are
    resource: Resource

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_path(self) -> str:
        """The cluster-wide collection path (``/apis/apps/v1/replicasets``)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{base}/{self.plural}"

    def object_path(self, namespace: str, name: str) -> str:
        """The path of one object (``/api/v1/namespaces/ns/persistentvolumeclaims/data``); ``namespace`` is
        ignored for a cluster-scoped kind."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced:
            return f"{base}/namespaces/{namespace}/{self.plural}/{name}"
        return f"{base}/{self.plural}/{name}"

    def __str__(self) -> str:
        return self.kind

    def __repr__(self) -> str:
        return f"ObjectKind({self.kind})"


def object_key(raw: Mapping[str, Any], namespaced: bool) -> tuple[str, str]:
    """``(namespace, name)`` of a raw object; a namespaced object without a namespace is in ``default``,
    as the API server and kubectl put it."""
    meta = raw.get("metadata")
    if not isinstance(meta, Mapping):
        raise ObjectParseError("metadata: must be an object")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectParseError("metadata.name: required")
    if not namespaced:
        return "", name
    namespace = meta.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise ObjectParseError(f"metadata.namespace: must be a string, not {namespace!r}")
    return namespace, name


def string_map(value: Any, path: str) -> dict[str, str] | None:
    """A ``map[string]string`` field (labels, a Service selector); ``None`` when absent or null."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ObjectParseError(f"{path}: must be a map of strings")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ObjectParseError(f"{path}.{k}: must be a string, not {v!r}")
        out[k] = v
    return out
