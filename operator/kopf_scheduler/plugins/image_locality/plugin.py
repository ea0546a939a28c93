"""ImageLocality: prefers nodes that already hold the pod's images (upstream's
``imagelocality/image_locality.go`` at v1.37.2).

The pod's images are those of its init and regular containers and, since v1.36, of its image volumes
(``spec.volumes[].image.reference``). Each one that is on the node (``:latest`` added when untagged) adds
``size * nodesWithImage / totalNodes``: spreading the score by how many nodes have the image keeps pods
from piling onto the one node that pulled it first. The sum is clamped to ``[23 MiB, 1000 MiB * images]``
and scaled to ``100 * (sum - 23 MiB) / (max - 23 MiB)``. There is no pre-score and no normalisation
upstream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from kopf_scheduler.framework import signers
from kopf_scheduler.framework.args import NoArgs
from kopf_scheduler.framework.cycle_state import CycleState
from kopf_scheduler.framework.handle import Handle
from kopf_scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorScore,
)
from kopf_scheduler.framework.node_info import NodeInfo, normalized_image_name
from kopf_scheduler.framework.node_table import NodeTable
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Status
from kopf_scheduler.plugins import names

NAME = names.IMAGE_LOCALITY
MB = 1024 * 1024
#: below this the image is cheap to pull anyway (90 % of registry images are between the thresholds)
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def pod_images(pod: PodInfo) -> tuple[tuple[str, ...], int]:
    """The normalised image of every init and regular container and every image volume (repeats kept),
    and their count (``sumImageScores``)."""
    found = pod.extra.get(NAME)
    if found is None:
        spec = pod.spec
        containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
        references = [str(c.get("image") or "") for c in containers]
        for volume in spec.get("volumes") or ():
            image = volume.get("image") if isinstance(volume, Mapping) else None
            if isinstance(image, Mapping):  # upstream's ``volume.Image != nil``
                references.append(str(image.get("reference") or ""))
        images = tuple(normalized_image_name(reference) for reference in references)
        found = pod.extra[NAME] = (images, len(images))
    return found  # type: ignore[no-any-return]


def scaled_image_score(size: int, nodes_with_image: int, total_nodes: int) -> int:
    spread = float(nodes_with_image) / float(total_nodes)
    return int(float(size) * spread)


def calculate_priority(sum_scores: int, images: int) -> int:
    max_threshold = MAX_CONTAINER_THRESHOLD * images
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    numerator, denominator = MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD), max_threshold - MIN_THRESHOLD
    # Go's integer division truncates toward zero (only a pod without images makes it negative).
    quotient = abs(numerator) // abs(denominator)
    return -quotient if (numerator < 0) != (denominator < 0) else quotient


class ImageLocality(ScorePlugin, VectorScore, SignPlugin):
    name = NAME

    def sign_pod(self, pod: PodInfo) -> Sequence[SignFragment] | Status:
        """The images of the pod's containers and init containers, ``:latest`` added when untagged."""
        images: set[str] = set()
        for key in ("containers", "initContainers"):
            for container in pod.spec.get(key) or ():
                image = str(container.get("image") or "")
                images.add(image if image.rfind(":") > image.rfind("/") else image + ":latest")
        return [(signers.IMAGE_NAMES, sorted(images))]

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        images, count = pod_images(pod)
        snapshot = self.handle.snapshot()
        total = len(snapshot.node_infos)
        sizes = node.image_sizes
        summed = 0
        for image in images:
            size = sizes.get(image)
            if size is not None:
                summed += scaled_image_score(size, snapshot.image_num_nodes(image), total)
        return calculate_priority(summed, count)

    def score_rows(self, state: CycleState, pod: PodInfo, table: NodeTable, rows: np.ndarray) -> np.ndarray:
        images, count = pod_images(pod)
        snapshot = self.handle.snapshot()
        present = {
            image: repeats for image, repeats in Counter(images).items() if snapshot.image_num_nodes(image)
        }
        if not present:  # no node has any of the images: every node scores calculate_priority(0) = 0
            return np.full(len(rows), calculate_priority(0, count), dtype=np.int64)
        total = len(snapshot.node_infos)
        infos = snapshot.node_infos
        out = np.empty(len(rows), dtype=np.int64)
        spread = {image: snapshot.image_num_nodes(image) for image in present}
        for i, row in enumerate(rows.tolist()):
            sizes = infos[row].image_sizes
            summed = 0
            for image, repeats in present.items():
                size = sizes.get(image)
                if size is not None:
                    summed += repeats * scaled_image_score(size, spread[image], total)
            out[i] = calculate_priority(summed, count)
        return out


def new(args: NoArgs, handle: Handle) -> ImageLocality:
    return ImageLocality(handle)
