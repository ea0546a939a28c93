"""Logic several in-tree plugins share and no other layer needs (upstream's ``plugins/helper``).

Plugins do not import each other; what more than one of them computes the same way lives here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.node_table import NodeTable


def topology_values(
    table: NodeTable, infos: Sequence[NodeInfo], key: str
) -> tuple[dict[str, int], np.ndarray]:
    """The distinct values of the label ``key`` over the table's rows (value -> slot, in order of first
    appearance) and, per row, the slot of the row's value (-1 when the node lacks the key).

    Depends on node labels only, so it is memoised on the table until they change. Shared: callers must
    not mutate the returned dict or array.
    """

    def build() -> tuple[dict[str, int], np.ndarray]:
        values: dict[str, int] = {}
        row_value = np.empty(len(infos), dtype=np.int64)
        for i, node in enumerate(infos):
            value = node.labels.get(key)
            if value is None:
                row_value[i] = -1
                continue
            slot = values.get(value)
            if slot is None:
                slot = values[value] = len(values)
            row_value[i] = slot
        return values, row_value

    return table.memo(("topology-values", key), build)  # type: ignore[no-any-return]


def default_normalize_score(max_priority: int, reverse: bool, scores: np.ndarray) -> None:
    """Scales non-negative raw ``scores`` in place from ``[0, max(scores)]`` to ``[0, max_priority]``
    (integer division), then subtracts each from ``max_priority`` when ``reverse``.

    When every score is 0, ``reverse`` turns them all into ``max_priority`` and otherwise they stay 0
    (upstream's ``helper.DefaultNormalizeScore``).
    """
    if not len(scores):
        return
    highest = int(scores.max())
    if highest <= 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = scores * max_priority // highest
    scores[:] = max_priority - scaled if reverse else scaled


_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_PREFIX_MSG = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def label_name_error(key: str) -> str | None:
    """The first problem ``metav1validation.ValidateLabelName`` finds in ``key``, if any (topology keys,
    resource names)."""
    prefix, _, name = key.rpartition("/")
    if key.count("/") > 1:
        return (
            "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and "
            "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
            "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
            "prefix and '/' (e.g. 'example.com/MyName')"
        )
    if "/" in key:
        if not prefix:
            return "prefix part must be non-empty"
        if len(prefix) > 253:
            return "prefix part must be no more than 253 bytes"
        if not all(_DNS_LABEL.match(part) for part in prefix.split(".")):
            return _PREFIX_MSG
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 bytes"
    if not _NAME_PART.match(name):
        return _NAME_PART_MSG
    return None
