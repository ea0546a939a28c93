"""Bound claims' volumes as the volume binder checks them on nodes (``checkBoundClaims`` in upstream's
``binder.go``), node by node and over the snapshot's rows at once (the vectorised filter).

The volumes are looked up once per pod (pre-filter). Each is checked in claim order; the first that is
missing (``ERR_REASON_PV_NOT_EXIST``) or not reachable from the node (``ERR_REASON_NODE_CONFLICT``)
decides. A volume of an in-tree plugin the binder migrates is checked, on a node whose CSINode lists the
plugin as migrated, as its CSI translation (``tryTranslatePVToCSI``): with the translated node affinity,
or, when the volume cannot be translated, as a failure of the filter (``could not translate pv: ...``),
which ends filtering and fails the attempt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.objects import CSINode, ObjectLister, PersistentVolume
from kopf_scheduler.framework.selectors import NodeSelector
from kopf_scheduler.plugins._csi_translation import (
    TranslationError,
    binder_translates,
    migrated_on,
    translated_affinity,
)

_PREFIX = "VolumeBinding"
#: node affinities whose per-row matches are kept (most recently used first to stay)
MAX_CACHED_AFFINITIES = 64


@dataclass(frozen=True, slots=True)
class BoundVolume:
    """A bound claim's volume (None: missing) and, when the binder translates it, its plugin and the
    translation's node affinity or why it cannot be translated."""

    volume: PersistentVolume | None
    #: the in-tree plugin; "" when the volume is never translated
    plugin: str = ""
    translated: NodeSelector | None = None
    error: str = ""

    @property
    def anywhere(self) -> bool:
        """Reachable from every node, as is or translated."""
        return self.volume is not None and self.volume.node_affinity is None and not self.plugin


def bound_volume(volume: PersistentVolume | None) -> BoundVolume:
    if volume is None or not binder_translates(volume.in_tree):
        return BoundVolume(volume)
    plugin = volume.in_tree.plugin  # type: ignore[union-attr]
    try:
        return BoundVolume(volume, plugin, translated_affinity(volume))
    except TranslationError as e:
        return BoundVolume(volume, plugin, error=f"could not translate pv: {e}")


def _reachable(affinity: NodeSelector | None, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: upstream builds a node with the labels only, so a ``matchFields`` term on
    ``metadata.name`` never matches."""
    return affinity is None or affinity.matches(labels, "")


def check_bound_volumes(
    volumes: Sequence[BoundVolume], labels: Mapping[str, str], csi_node: CSINode | None
) -> tuple[bool, bool, str]:
    """(every volume reachable from the node, every volume exists, why the node cannot be judged: a
    volume its migration needs translated cannot be; "" when it can)."""
    for bound in volumes:
        if bound.volume is None:
            return True, False, ""
        affinity = bound.volume.node_affinity
        if bound.plugin and migrated_on(csi_node, bound.plugin):
            if bound.error:
                return False, True, bound.error
            affinity = bound.translated
        if not _reachable(affinity, labels):
            return False, True, ""
    return True, True, ""


def needs_csi_node(volumes: Sequence[BoundVolume]) -> bool:
    return any(bound.plugin for bound in volumes)


# -- over rows -----------------------------------------------------------------------------------------
def affinity_mask(table: NodeTable, infos: Sequence[NodeInfo], affinity: NodeSelector) -> np.ndarray:
    """Per row, whether the node is reachable under ``affinity``; kept (up to ``MAX_CACHED_AFFINITIES``)
    until node labels change. Shared: callers must not modify it."""
    cache: OrderedDict[NodeSelector, np.ndarray] = table.memo((_PREFIX, "affinity"), OrderedDict)
    found = cache.get(affinity)
    if found is None or len(found) != len(infos):
        found = np.fromiter((_reachable(affinity, i.labels) for i in infos), dtype=bool, count=len(infos))
        cache[affinity] = found
        if len(cache) > MAX_CACHED_AFFINITIES:
            cache.popitem(last=False)
    else:
        cache.move_to_end(affinity)
    return found


def migrated_mask(
    table: NodeTable, infos: Sequence[NodeInfo], csi_nodes: ObjectLister[CSINode], plugin: str
) -> np.ndarray:
    """Per row, whether the node's CSINode lists ``plugin`` as migrated; kept until CSINodes or node
    labels change (or nodes come or go). Shared: callers must not modify it."""
    cache: dict[str, tuple[int, np.ndarray]] = table.memo((_PREFIX, "migrated"), dict)
    generation = csi_nodes.generation
    found = cache.get(plugin)
    if found is None or found[0] != generation or len(found[1]) != len(infos):
        mask = np.fromiter(
            (migrated_on(csi_nodes.get("", i.name), plugin) for i in infos), dtype=bool, count=len(infos)
        )
        found = cache[plugin] = (generation, mask)
    return found[1]


def check_rows(
    volumes: Sequence[BoundVolume],
    rows: np.ndarray,
    reachable: Callable[[NodeSelector], np.ndarray],
    migrated: Callable[[str], np.ndarray],
) -> tuple[np.ndarray, np.ndarray | None]:
    """``check_bound_volumes`` on every row of ``rows`` (``reachable`` and ``migrated``: per-row masks
    over the table): (passes, fails with an error)."""
    n = len(rows)
    passes = np.ones(n, dtype=bool)
    decided = np.zeros(n, dtype=bool)
    failing: np.ndarray | None = None
    for bound in volumes:
        if bound.volume is None:
            passes[~decided] = False
            break
        affinity = bound.volume.node_affinity
        ok = np.ones(n, dtype=bool) if affinity is None else reachable(affinity)[rows]
        if bound.plugin:
            on = migrated(bound.plugin)[rows]
            if bound.error:
                errs = on & ~decided
                failing = errs if failing is None else failing | errs
                passes[errs] = False
                decided |= errs
            else:
                if bound.translated is not None:
                    ok = np.where(on, reachable(bound.translated)[rows], ok)
                else:
                    ok = ok | on
        bad = ~ok & ~decided
        passes[bad] = False
        decided |= bad
        if decided.all():
            break
    return passes, failing
