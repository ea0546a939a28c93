"""ImageLocality: prefers nodes that already hold the pod's container and image volume images
(``imagelocality/image_locality.go`` upstream)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.image_locality.plugin import (
    MAX_CONTAINER_THRESHOLD,
    MIN_THRESHOLD,
    NAME,
    ImageLocality,
    calculate_priority,
    new,
)

__all__ = [
    "MAX_CONTAINER_THRESHOLD",
    "MIN_THRESHOLD",
    "NAME",
    "Args",
    "ImageLocality",
    "calculate_priority",
    "new",
]
