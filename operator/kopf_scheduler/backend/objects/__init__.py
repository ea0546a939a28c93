"""Stores of the cluster objects the scheduler reads besides pods and nodes."""

from kopf_scheduler.backend.objects.store import ClusterObjects, ObjectStore

__all__ = ["ClusterObjects", "ObjectStore"]
