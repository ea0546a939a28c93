"""Nodes and pods as the scheduler sees them, assumed pods included, and per-cycle snapshots."""

from kopf_scheduler.backend.cache.cache import Cache, CacheError
from kopf_scheduler.backend.cache.snapshot import Snapshot

__all__ = ["Cache", "CacheError", "Snapshot"]
