"""NodeVolumeLimits' node side as arrays over the snapshot's rows, for the vectorised filter: per row, the
CSINode profile, whether the node has limits, whether its pods cannot be counted, the room left per
driver (limit minus count), and which rows attach each volume (a volume the pod shares with a pod on the
node counts once).

A row is refreshed from ``VolumeCounter.node_counts`` when the node's ``generation`` differs from the one
it was counted at (the node changed, or another node took the row). Store changes make rows stale: a
CSINode or VolumeAttachment change every row; a claim, volume or class change only the rows whose counts
read claims (``NodeCounts.reads_claims``), unless VolumeAttachments exist (their count reads volumes).
Rows are refreshed only when a filter asks for them, so a pod pays for the nodes that changed since the
last pod, not for every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    STORAGE_CLASSES,
    VOLUME_ATTACHMENTS,
)
from kopf_scheduler.plugins.node_volume_limits.counting import NodeCounts, Profile, VolumeCounter, profile

#: room on a node without a limit for the driver (more than any pod asks for)
UNLIMITED = np.iinfo(np.int64).max // 4
#: ``kind`` codes of the CSINode profiles
KINDS: dict[Profile, int] = {False: 0, True: 1}
PROFILES: tuple[Profile, ...] = (False, True)


class NodeRows:
    __slots__ = (
        "entries",
        "failed",
        "generation",
        "holders",
        "kind",
        "limited",
        "reads_claims",
        "room",
        "stamps",
    )

    def __init__(self, size: int, stamps: tuple[int, int, int]) -> None:
        #: the node generation each row was counted at (-1: not counted, or stale)
        self.generation = np.full(size, -1, dtype=np.int64)
        self.kind = np.zeros(size, dtype=np.int8)
        self.limited = np.zeros(size, dtype=bool)
        self.failed = np.zeros(size, dtype=bool)
        self.reads_claims = np.zeros(size, dtype=bool)
        #: per driver: limit minus count on each row (``UNLIMITED`` without a limit)
        self.room: dict[str, np.ndarray] = {}
        self.entries: list[NodeCounts | None] = [None] * size
        #: volume (``<driver>/<handle>``) -> the rows whose pods attach it
        self.holders: dict[str, set[int]] = {}
        #: the store generations counted from: CSINodes, VolumeAttachments, claims + volumes + classes
        self.stamps = stamps

    def invalidate_claim_readers(self) -> None:
        self.generation[self.reads_claims] = -1

    def set_row(self, row: int, counts: NodeCounts, kind: Profile) -> None:
        old = self.entries[row]
        if old is not None:
            for unique in old.attached:
                holders = self.holders.get(unique)
                if holders is not None:
                    holders.discard(row)
                    if not holders:
                        del self.holders[unique]
        self.entries[row] = counts
        for unique in counts.attached:
            self.holders.setdefault(unique, set()).add(row)
        self.kind[row] = KINDS[kind]
        self.limited[row] = bool(counts.limits)
        self.failed[row] = counts.failure is not None
        self.reads_claims[row] = counts.reads_claims
        for room in self.room.values():
            room[row] = UNLIMITED
        for driver, limit in counts.limits.items():
            found = self.room.get(driver)
            if found is None:  # rows counted before had no limit for it
                found = self.room[driver] = np.full(len(self.generation), UNLIMITED, dtype=np.int64)
            found[row] = limit - counts.counts.get(driver, 0)
        self.generation[row] = counts.generation

    def exceeded(self, wanted: Mapping[str, str], rows: np.ndarray) -> np.ndarray:
        """Per row of ``rows`` (all counted), whether the pod's volumes ``wanted`` not attached there
        already take some driver past its limit."""
        by_driver: dict[str, list[str]] = {}
        for unique, driver in wanted.items():
            by_driver.setdefault(driver, []).append(unique)
        out = np.zeros(len(rows), dtype=bool)
        for driver, uniques in by_driver.items():
            room = self.room.get(driver)
            if room is None:  # no node limits the driver
                continue
            new = np.full(len(rows), len(uniques), dtype=np.int64)
            held = [h for h in (self.holders.get(u) for u in uniques) if h]
            if held:
                shared = np.zeros(len(self.generation), dtype=np.int64)
                for holders in held:
                    shared[list(holders)] += 1
                new -= shared[rows]
            out |= (new > 0) & (new > room[rows])
        return out


def stamps(counter: VolumeCounter) -> tuple[int, int, int]:
    objects = counter.objects
    return (
        objects.generation(CSI_NODES),
        objects.generation(VOLUME_ATTACHMENTS),
        objects.generation(PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES),
    )


def synced(counter: VolumeCounter, current: NodeRows | None, size: int) -> NodeRows:
    """``current`` brought up to the stores (a new one when it cannot be), before its rows are counted."""
    now = stamps(counter)
    if current is None or len(current.generation) != size or current.stamps[:2] != now[:2]:
        return NodeRows(size, now)
    if current.stamps[2] != now[2]:
        if len(counter.objects.of(VOLUME_ATTACHMENTS).list()):  # attachments count only CSI volumes
            return NodeRows(size, now)
        current.invalidate_claim_readers()
        current.stamps = now
    return current


def refresh(counter: VolumeCounter, node_rows: NodeRows, infos: Sequence[NodeInfo], rows: np.ndarray,
            generations: np.ndarray) -> None:  # fmt: skip
    """Counts the rows of ``rows`` that are stale (``generations``: the table's node generations)."""
    stale = rows[node_rows.generation[rows] != generations[rows]]
    if not len(stale):
        return
    csi_nodes = counter.objects.of(CSI_NODES)
    stamp = counter.stamp()
    for row in stale.tolist():
        node = infos[row]
        csi_node = csi_nodes.get("", node.name)
        node_rows.set_row(row, counter.node_counts(node, csi_node, stamp), profile(csi_node))
