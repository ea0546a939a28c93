"""Node order across zones, as upstream's ``nodeTree``: nodes grouped by zone (region + zone labels), and
listed round-robin over zones, so that scoring a subset of nodes still spreads over zones."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
#: deprecated, still on old nodes; component-helpers' ``GetZoneKey`` reads them first.
BETA_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION_LABEL = "failure-domain.beta.kubernetes.io/region"


def zone_key(labels: Mapping[str, str]) -> str:
    zone = labels[BETA_ZONE_LABEL] if BETA_ZONE_LABEL in labels else labels.get(ZONE_LABEL, "")
    region = labels[BETA_REGION_LABEL] if BETA_REGION_LABEL in labels else labels.get(REGION_LABEL, "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


class NodeTree:
    def __init__(self) -> None:
        self._zones: dict[str, list[str]] = {}  # insertion order = order zones were first seen
        self._zone_of: dict[str, str] = {}

    def add(self, name: str, labels: Mapping[str, str]) -> None:
        zone = zone_key(labels)
        if self._zone_of.get(name) == zone:
            return
        self.remove(name)
        self._zones.setdefault(zone, []).append(name)
        self._zone_of[name] = zone

    def remove(self, name: str) -> None:
        zone = self._zone_of.pop(name, None)
        if zone is None:
            return
        names = self._zones[zone]
        names.remove(name)
        if not names:
            del self._zones[zone]

    def __len__(self) -> int:
        return len(self._zone_of)

    def ordered(self) -> list[str]:
        """All node names, one zone at a time in turn."""
        zones = list(self._zones.values())
        if len(zones) <= 1:
            return list(zones[0]) if zones else []
        return [name for turn in itertools.zip_longest(*zones, fillvalue="") for name in turn if name]
