"""The per-cycle snapshot: the nodes (cloned ``NodeInfo``s, in node-tree order) and their ``NodeTable``.

The cache refreshes only the nodes that changed since the last cycle (``Cache.update_snapshot``), so a
cycle costs one clone per changed node, not one per node. Plugins read it through ``SnapshotLister``.
"""

from __future__ import annotations

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable


class Snapshot:
    def __init__(self) -> None:
        self.node_infos: list[NodeInfo] = []
        self.table = NodeTable()
        self._index: dict[str, int] = {}
        self._with_affinity: dict[str, NodeInfo] = {}
        self._with_anti_affinity: dict[str, NodeInfo] = {}
        self._image_counts: dict[str, int] | None = None

    # -- SnapshotLister --------------------------------------------------------------------------------
    def get(self, name: str) -> NodeInfo | None:
        i = self._index.get(name)
        return None if i is None else self.node_infos[i]

    def index_of(self, name: str) -> int | None:
        return self._index.get(name)

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return list(self._with_affinity.values())

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return list(self._with_anti_affinity.values())

    def image_num_nodes(self, image: str) -> int:
        if self._image_counts is None:
            counts: dict[str, int] = {}
            for node in self.node_infos:
                for name in node.image_sizes:
                    counts[name] = counts.get(name, 0) + 1
            self._image_counts = counts
        return self._image_counts.get(image, 0)

    def __len__(self) -> int:
        return len(self.node_infos)

    # -- maintained by the cache -----------------------------------------------------------------------
    def rebuild(self, infos: list[NodeInfo]) -> None:
        """The snapshot becomes ``infos``, in that order. A node whose copy is the very one the snapshot
        holds keeps its table row (moved to its new place); the others' rows are written."""
        held, index = self.node_infos, self._index
        moved_to, moved_from, fresh = [], [], []
        for i, info in enumerate(infos):
            j = index.get(info.name)
            if j is not None and held[j] is info:
                moved_to.append(i)
                moved_from.append(j)
            else:
                fresh.append(i)
        self.node_infos = infos
        self._index = {info.name: i for i, info in enumerate(infos)}
        self.table.reorder(len(infos), moved_to, moved_from)
        for i in fresh:
            self.table.set_row(i, infos[i], labels_changed=False)
        # a kept node's copy is unchanged, so only the fresh ones can join (or leave) these
        for kept in (self._with_affinity, self._with_anti_affinity):
            for name, info in list(kept.items()):
                if self.get(name) is not info:
                    del kept[name]
        for row in fresh:
            info = infos[row]
            if info.pods_with_affinity:
                self._with_affinity[info.name] = info
            if info.pods_with_required_anti_affinity:
                self._with_anti_affinity[info.name] = info
        self._image_counts = None

    def replace(self, info: NodeInfo) -> None:
        i = self._index[info.name]
        self.node_infos[i] = info
        self.table.set_row(i, info, labels_changed=False)
        for index, present in (
            (self._with_affinity, bool(info.pods_with_affinity)),
            (self._with_anti_affinity, bool(info.pods_with_required_anti_affinity)),
        ):
            if present:
                index[info.name] = info
            else:
                index.pop(info.name, None)

    def invalidate_images(self) -> None:
        self._image_counts = None
