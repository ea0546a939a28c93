"""A pod's inter-pod affinity terms, parsed once (upstream's ``AffinityTerm`` and ``PodInfo`` parsing in
``pkg/scheduler/framework/types.go``).

- Namespaces: a term with neither ``namespaces`` nor ``namespaceSelector`` means the pod's own namespace;
  otherwise the listed names, plus the namespaces the selector picks. A missing ``namespaceSelector``
  matches no namespace, an empty one (``{}``) every namespace.
- ``labelSelector``: missing matches no pod, empty matches every pod. ``matchLabelKeys`` and
  ``mismatchLabelKeys`` are merged into ``labelSelector`` by the API server when the pod is created, so the
  scheduler ignores them, as upstream does.
- The incoming pod's selector-based namespaces are resolved once per cycle (``merged``) against the
  namespaces known to the plugin, and the merged term's selector then matches no namespace (see
  ``AffinityTerm.merged``); existing pods' terms keep their selector, matched against the incoming pod's
  namespace labels.

Parsed terms are cached on ``PodInfo.extra`` (PodInfos are reused across cycles). A group of terms that
cannot be parsed is empty, and the pod records the error, as upstream's ``PodInfo.Update`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kopf_scheduler.framework.objects import Namespace, ObjectLister
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.selectors import LabelSelector, SelectorError
from kopf_scheduler.plugins.inter_pod_affinity.label_syntax import parse_label_selector

_EXTRA_KEY = "interpodaffinity.terms"
_EMPTY: Mapping[str, str] = {}


class AffinityTerm:
    """A parsed ``PodAffinityTerm``; immutable, hashable (equal terms share caches)."""

    __slots__ = ("_hash", "_key", "namespace_selector", "namespaces", "selector", "topology_key")

    def __init__(
        self,
        namespaces: frozenset[str],
        selector: LabelSelector | None,
        topology_key: str,
        namespace_selector: LabelSelector | None,
    ) -> None:
        self.namespaces = namespaces
        #: ``None`` matches no pod
        self.selector = selector
        self.topology_key = topology_key
        #: ``None`` matches no namespace; an empty selector matches every namespace
        self.namespace_selector = namespace_selector
        self._key = (namespaces, selector, topology_key, namespace_selector)
        self._hash = hash(self._key)

    def matches(self, pod: PodInfo, namespace_labels: Mapping[str, str] | None) -> bool:
        """Upstream's ``AffinityTerm.Matches``: namespace (listed, or picked by the selector through the
        pod's namespace labels), then the label selector."""
        if pod.namespace not in self.namespaces:
            ns_selector = self.namespace_selector
            if ns_selector is None or not ns_selector.matches(namespace_labels or _EMPTY):
                return False
        return self.selector is not None and self.selector.matches(pod.labels)

    def merged(self, namespaces: NamespaceLister) -> AffinityTerm:
        """This term with the namespaces its non-empty namespace selector picks now added, and that
        selector replaced by one matching no namespace: upstream's ``mergeAffinityTermNamespacesIfNotEmpty``
        (``interpodaffinity/plugin.go`` at v1.37.2, which takes the term by pointer and sets
        ``at.NamespaceSelector = labels.Nothing()``). The merged term is matched with nil namespace labels
        (``podMatchesAllAffinityTerms``, the scoring's ``processTerms(..., nil, ...)``), so a selector the
        empty label set satisfies (``NotIn``, ``DoesNotExist``) sees only the namespaces it picked.
        """
        ns_selector = self.namespace_selector
        if ns_selector is None or ns_selector.empty:
            return self
        picked = {
            name for name in namespaces.names() if ns_selector.matches(namespaces.labels(name) or _EMPTY)
        }
        return AffinityTerm(self.namespaces | picked, self.selector, self.topology_key, None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AffinityTerm) and other._key == self._key

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"AffinityTerm({sorted(self.namespaces)}, {self.selector}, {self.topology_key!r})"


class WeightedTerm:
    __slots__ = ("term", "weight")

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        self.term = term
        self.weight = weight


class PodTerms:
    """The four term groups of a pod; ``error`` is upstream's aggregated parse error, if any."""

    __slots__ = ("error", "preferred_affinity", "preferred_anti", "required_affinity", "required_anti")

    def __init__(
        self,
        required_affinity: tuple[AffinityTerm, ...] = (),
        required_anti: tuple[AffinityTerm, ...] = (),
        preferred_affinity: tuple[WeightedTerm, ...] = (),
        preferred_anti: tuple[WeightedTerm, ...] = (),
        error: str = "",
    ) -> None:
        self.required_affinity = required_affinity
        self.required_anti = required_anti
        self.preferred_affinity = preferred_affinity
        self.preferred_anti = preferred_anti
        self.error = error

    @property
    def has_required(self) -> bool:
        return bool(self.required_affinity or self.required_anti)


class NamespaceLister(Protocol):
    """The namespaces the scheduler knows, for ``namespaceSelector`` (upstream's namespace informer)."""

    def labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of namespace ``name``; ``None`` when unknown (then treated as no labels)."""

    def names(self) -> Iterable[str]:
        """Every known namespace."""


class NoNamespaces:
    """No namespace known: a non-empty namespace selector picks nothing, ``{}`` still picks all."""

    def labels(self, name: str) -> Mapping[str, str] | None:
        return None

    def names(self) -> Iterable[str]:
        return ()


class StaticNamespaces:
    """Namespaces from a mapping of name to labels."""

    def __init__(self, namespaces: Mapping[str, Mapping[str, str]]) -> None:
        self._namespaces = {str(k): dict(v) for k, v in namespaces.items()}

    def labels(self, name: str) -> Mapping[str, str] | None:
        return self._namespaces.get(name)

    def names(self) -> Iterable[str]:
        return self._namespaces.keys()


def _term(pod: PodInfo, raw: Any) -> AffinityTerm:
    if not isinstance(raw, Mapping):
        raise SelectorError("must be an object")
    selector = parse_label_selector(raw.get("labelSelector"))
    listed = raw.get("namespaces") or ()
    ns_raw = raw.get("namespaceSelector")
    namespaces = (
        frozenset(str(n) for n in listed) if listed or ns_raw is not None else frozenset({pod.namespace})
    )
    ns_selector = parse_label_selector(ns_raw)
    return AffinityTerm(namespaces, selector, str(raw.get("topologyKey") or ""), ns_selector)


def _required(pod: PodInfo, group: Mapping[str, Any]) -> tuple[AffinityTerm, ...]:
    return tuple(_term(pod, raw) for raw in group.get("requiredDuringSchedulingIgnoredDuringExecution") or ())


def _preferred(pod: PodInfo, group: Mapping[str, Any]) -> tuple[WeightedTerm, ...]:
    out = []
    for raw in group.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
        if not isinstance(raw, Mapping):
            raise SelectorError("must be an object")
        out.append(WeightedTerm(_term(pod, raw.get("podAffinityTerm") or {}), int(raw.get("weight") or 0)))
    return tuple(out)


_NO_TERMS = PodTerms()


def _parse(pod: PodInfo) -> PodTerms:
    affinity = pod.affinity.get("podAffinity") or {}
    anti = pod.affinity.get("podAntiAffinity") or {}
    if not affinity and not anti:
        return PodTerms()
    errors: list[str] = []
    groups: list[Any] = []
    for name, parse, group in (
        ("requiredAffinityTerms", _required, affinity),
        ("requiredAntiAffinityTerms", _required, anti),
        ("preferredAffinityTerms", _preferred, affinity),
        ("preferredAntiAffinityTerms", _preferred, anti),
    ):
        try:
            groups.append(parse(pod, group) if isinstance(group, Mapping) else ())
        except (SelectorError, TypeError, ValueError) as e:
            errors.append(f"{name}: {e}")
            groups.append(())
    unique = list(dict.fromkeys(errors))
    error = "" if not unique else unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return PodTerms(groups[0], groups[1], groups[2], groups[3], error)


#: parsed terms by (namespace, spec text), shared by the PodInfos of pods of one template and by the
#: successive PodInfos of one pod (``repr`` of API data is faithful, and cheap); dropped wholesale when it
#: grows past the bound
_BY_SPEC: dict[tuple[str, str, str], PodTerms] = {}
_MAX_SPECS = 4096


def pod_terms(pod: PodInfo) -> PodTerms:
    """The pod's parsed terms, computed once per ``PodInfo`` (and once per distinct spec)."""
    extra = pod.extra
    terms = extra.get(_EXTRA_KEY)
    if terms is None:
        affinity = pod.affinity
        pod_affinity, anti = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
        if not pod_affinity and not anti:
            terms = _NO_TERMS
        else:
            key = (pod.namespace, repr(pod_affinity), repr(anti))
            terms = _BY_SPEC.get(key)
            if terms is None:
                terms = _parse(pod)
                if len(_BY_SPEC) >= _MAX_SPECS:
                    _BY_SPEC.clear()
                _BY_SPEC[key] = terms
        extra[_EXTRA_KEY] = terms
    return terms  # type: ignore[no-any-return]


def merge_all(terms: Sequence[AffinityTerm], namespaces: NamespaceLister) -> tuple[AffinityTerm, ...]:
    return tuple(t.merged(namespaces) for t in terms)


def merge_weighted(terms: Sequence[WeightedTerm], namespaces: NamespaceLister) -> tuple[WeightedTerm, ...]:
    return tuple(WeightedTerm(t.term.merged(namespaces), t.weight) for t in terms)


def matches_all(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    """Upstream's ``podMatchesAllAffinityTerms``: false for no terms; terms are the incoming pod's, with
    their namespace selectors already merged, so no namespace labels are needed."""
    if not terms:
        return False
    return all(t.matches(pod, None) for t in terms)


def matcher(term: AffinityTerm) -> Callable[[PodInfo], bool]:
    """Whether an existing pod matches one of the incoming pod's (merged) terms."""
    return lambda pod: term.matches(pod, None)


class ListedNamespaces:
    """The namespaces of the scheduler's store (upstream's namespace lister)."""

    def __init__(self, lister: ObjectLister[Namespace]) -> None:
        self._lister = lister

    def labels(self, name: str) -> Mapping[str, str] | None:
        found = self._lister.get("", name)
        return found.labels if found is not None else None

    def names(self) -> Iterable[str]:
        return [ns.name for ns in self._lister.list()]
