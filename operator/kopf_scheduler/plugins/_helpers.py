"""Logic several in-tree plugins share and no other layer needs (upstream's ``plugins/helper``).

Plugins do not import each other; what more than one of them computes the same way lives here.
"""

from __future__ import annotations

import numpy as np


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
