"""Resource names and the arithmetic kube-scheduler does on them.

CPU is counted in millicores, everything else in whole units (bytes, counts), as ``Quantity.MilliValue``
and ``Quantity.Value`` do upstream. A resource set is a plain ``dict[str, int]``; missing means zero.

Every amount is an int64 and sums wrap around as Go's int64 ``+=`` does in ``NodeInfo.update`` and
``Resource.Add`` (``pkg/scheduler/framework/types.go``): a quantity that does not fit (``cpu: 1e30``,
``memory: 10Ei``) already reads as the int64 upstream reads (``api.quantity``), and two pods of 2^63-1
bytes on one node add up to -2 there as here. So a sum never grows past what a numpy int64 holds.
"""

from __future__ import annotations

from kopf_scheduler.api.quantity import INT64_MAX, INT64_MIN, wrap_int64

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

#: requests the scoring functions assume for a container that sets none (``pkg/scheduler/util``).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


def is_extended(name: str) -> bool:
    """Extended resources: fully qualified names outside ``kubernetes.io/`` (``example.com/gpu``)."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("requests.")


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_scalar(name: str) -> bool:
    """Counted like upstream's ``ScalarResources``: extended, hugepages and attachable-volume resources."""
    return is_extended(name) or is_hugepages(name) or name.startswith("attachable-volumes-")


def add_into(total: dict[str, int], other: dict[str, int]) -> None:
    """``total += other`` per resource, wrapping around as int64 does."""
    for name, amount in other.items():
        summed = total.get(name, 0) + amount
        total[name] = summed if INT64_MIN <= summed <= INT64_MAX else wrap_int64(summed)


def subtract_from(total: dict[str, int], other: dict[str, int]) -> None:
    """``total -= other`` per resource, wrapping around as int64 does (so a wrapped sum comes back)."""
    for name, amount in other.items():
        left = total.get(name, 0) - amount
        total[name] = left if INT64_MIN <= left <= INT64_MAX else wrap_int64(left)
