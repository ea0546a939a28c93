"""Resource names and the arithmetic kube-scheduler does on them.

CPU is counted in millicores, everything else in whole units (bytes, counts), as ``Quantity.MilliValue``
and ``Quantity.Value`` do upstream. A resource set is a plain ``dict[str, int]``; missing means zero.
"""

from __future__ import annotations

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

#: requests the scoring functions assume for a container that sets none (``pkg/scheduler/util``).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_NATIVE = frozenset({CPU, MEMORY, EPHEMERAL_STORAGE, PODS, "storage"})


def is_extended(name: str) -> bool:
    """Extended resources: fully qualified names outside ``kubernetes.io/`` (``example.com/gpu``)."""
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("requests.")


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_scalar(name: str) -> bool:
    """Counted like upstream's ``ScalarResources``: extended, hugepages and attachable-volume resources."""
    return is_extended(name) or is_hugepages(name) or name.startswith("attachable-volumes-")


def is_native(name: str) -> bool:
    return name in _NATIVE or is_hugepages(name) or "/" not in name or name.startswith("kubernetes.io/")


def add_into(total: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        total[name] = total.get(name, 0) + amount


def subtract_from(total: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        total[name] = total.get(name, 0) - amount


def max_into(total: dict[str, int], other: dict[str, int]) -> None:
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount
