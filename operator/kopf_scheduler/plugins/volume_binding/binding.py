"""The volume binder in the binding cycle (upstream's ``BindPodVolumes``): write the reserved decisions to
the API server, then wait until the PV controller (and, for provisioning, a provisioner) has bound every
claim.

Writes, as upstream: each statically chosen volume is PUT with its claimRef (``bindAPIUpdate``), then
each claim to provision is PUT with ``volume.kubernetes.io/selected-node``; both carry the
resourceVersion they were read at, so a change since then fails the write (409) instead of overwriting
it. A failed write ends pre-bind with the API server's message; what it did not write is dropped from the
assume cache at once. Nothing written is taken back (upstream: "there is no API rollback"): a volume
whose claimRef was written is bound to that claim by the PV controller whatever happens to the pod, and a
claim with a selected node gets its volume provisioned there; both stay usable by the claim.

Then every second (and once right away) the objects as the API server last reported them are checked
(``checkBindings``): done when every claim is bound (``bind-completed``); an error when the node or the
pod is gone (a pod deleted meanwhile stops the wait: the failed pre-bind unreserves, which restores the
assume cache), a volume lost its claimRef, a provisioner gave up (the selected node removed), or a bound
volume is not reachable from the node (as its CSI translation where the node's CSINode lists its in-tree
plugin as migrated, an error when it cannot be translated). After ``bindTimeoutSeconds`` (0: at once,
without checking, as upstream) pre-bind fails with ``context deadline exceeded``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

from kopf_scheduler.framework.client import APIError, ClusterClient
from kopf_scheduler.framework.clock import Clock
from kopf_scheduler.framework.objects import (
    CSI_NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    CSINode,
    ObjectParseError,
    PersistentVolume,
)
from kopf_scheduler.framework.objects.storage import (
    ANN_SELECTED_NODE,
    parse_persistent_volume,
    parse_persistent_volume_claim,
)
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.plugins._csi_translation import migrated_on
from kopf_scheduler.plugins.volume_binding.assume_cache import version_of
from kopf_scheduler.plugins.volume_binding.binder import PodVolumes, Provision, StaticBinding, VolumeBinder
from kopf_scheduler.plugins.volume_binding.bound import bound_volume
from kopf_scheduler.plugins.volume_binding.claims import VolumeBindingError
from kopf_scheduler.plugins.volume_binding.matching import claim_fully_bound, object_body

#: how often the API server's view is checked while waiting (``wait.PollUntilContextTimeout``'s interval)
POLL_INTERVAL = 1.0
DEADLINE_EXCEEDED = "context deadline exceeded"


class PodVolumesBinding:
    """Writes and waits for one profile's volume binder; see the module docstring."""

    def __init__(
        self,
        binder: VolumeBinder,
        client: ClusterClient,
        clock: Clock,
        timeout: float,
        node_labels: Callable[[str], Mapping[str, str] | None],
        pod_exists: Callable[[PodInfo], bool],
    ) -> None:
        self.binder = binder
        self.client = client
        self.clock = clock
        self.timeout = timeout
        self.node_labels = node_labels
        self.pod_exists = pod_exists

    async def bind(self, pod: PodInfo, node_name: str, pod_volumes: PodVolumes) -> None:
        """Raises ``VolumeBindingError`` with upstream's message."""
        await self.write(pod_volumes)
        deadline = self.clock.now() + self.timeout
        if self.timeout <= 0:
            raise VolumeBindingError(f"binding volumes: {DEADLINE_EXCEEDED}")
        while True:
            try:
                if self.check(pod, node_name, pod_volumes):
                    return
            except VolumeBindingError as e:
                raise VolumeBindingError(f"binding volumes: {e}") from None
            remaining = deadline - self.clock.now()
            if remaining > 0:
                await self.clock.sleep(min(POLL_INTERVAL, remaining))
            if self.clock.now() >= deadline:
                raise VolumeBindingError(f"binding volumes: {DEADLINE_EXCEEDED}")

    async def write(self, pod_volumes: PodVolumes) -> None:
        """``bindAPIUpdate``: the PUTs; ``pod_volumes`` then holds the objects the API server returned."""
        bindings, provisions = pod_volumes.static_bindings, pod_volumes.dynamic_provisions
        written_volumes = written_claims = 0
        try:
            for i, binding in enumerate(bindings):
                volume = binding.volume
                stored = await self.client.update_object(
                    PERSISTENT_VOLUMES.object_path("", volume.name),
                    object_body(volume.raw, "v1", "PersistentVolume"),
                )
                bindings[i] = StaticBinding(binding.claim, parse_persistent_volume(stored))
                written_volumes += 1
            for i, provision in enumerate(provisions):
                claim = provision.claim
                stored = await self.client.update_object(
                    PERSISTENT_VOLUME_CLAIMS.object_path(claim.namespace, claim.name),
                    object_body(claim.raw, "v1", "PersistentVolumeClaim"),
                )
                provisions[i] = Provision(parse_persistent_volume_claim(stored), provision.capacity)
                written_claims += 1
        except APIError as e:
            raise VolumeBindingError(e.message) from None
        except ObjectParseError as e:
            raise VolumeBindingError(f"reading the API server's answer: {e}") from None
        finally:  # only what was not written leaves the assume cache: the rest is the API server's now
            self.binder.revert(PodVolumes(bindings[written_volumes:], provisions[written_claims:]))

    def check(self, pod: PodInfo, node_name: str, pod_volumes: PodVolumes) -> bool:
        """``checkBindings``: True when every claim is bound; False to wait; ``VolumeBindingError`` to give
        up. Reads what the API server said last, never what is assumed."""
        labels = self.node_labels(node_name)
        if labels is None:
            name = json.dumps(node_name)
            raise VolumeBindingError(f"failed to get node {name}: node {name} not found")
        if not self.pod_exists(pod):
            raise VolumeBindingError(f"pod does not exist any more: pod {json.dumps(pod.name)} not found")
        volumes, claims = self.binder.volumes, self.binder.claims
        csi_node = self.binder.objects.of(CSI_NODES).get("", node_name)
        for binding in pod_volumes.static_bindings:
            volume = volumes.get_api("", binding.volume.name)
            if volume is None:
                raise VolumeBindingError(
                    f"failed to check binding: {volumes.not_found('', binding.volume.name)}"
                )
            key = (binding.claim.namespace, binding.claim.name)
            claim = claims.get_api(*key)
            if claim is None:
                raise VolumeBindingError(f"failed to check binding: {claims.not_found(*key)}")
            if version_of(binding.volume) > version_of(volume):
                return False  # the store has not seen our write yet
            if not _reachable(volume, labels, csi_node, "failed to translate pv to csi: "):
                raise VolumeBindingError(_affinity_mismatch(volume.name, node_name))
            if volume.claim_ref is None or not volume.claim_ref.uid:
                raise VolumeBindingError(f"ClaimRef got reset for pv {json.dumps(volume.name)}")
            if not claim_fully_bound(claim):
                return False
        for provision in pod_volumes.dynamic_provisions:
            written = provision.claim
            claim = claims.get_api(written.namespace, written.name)
            if claim is None:
                raise VolumeBindingError(
                    f"failed to check provisioning pvc: {claims.not_found(written.namespace, written.name)}"
                )
            if version_of(written) > version_of(claim):
                return False
            if not claim.annotations:
                raise VolumeBindingError(f"selectedNode annotation reset for PVC {json.dumps(claim.name)}")
            if claim.annotations.get(ANN_SELECTED_NODE) != node_name:
                # a provisioner that cannot make the volume removes the annotation: schedule again
                raise VolumeBindingError(f"provisioning failed for PVC {json.dumps(claim.name)}")
            if claim.volume_name:
                volume = volumes.get_api("", claim.volume_name)
                if volume is None:
                    return False  # not seen yet (or deleted: the claim will be unbound then)
                if not _reachable(volume, labels, csi_node):
                    raise VolumeBindingError(_affinity_mismatch(volume.name, node_name))
            if not claim_fully_bound(claim):
                return False
        return True


def _reachable(
    volume: PersistentVolume, labels: Mapping[str, str], csi_node: CSINode | None, context: str = ""
) -> bool:
    """``CheckNodeAffinity`` of the volume, translated to CSI where the node has its plugin migrated
    (``tryTranslatePVToCSI``; ``context`` prefixes the translation's error)."""
    bound = bound_volume(volume)
    affinity = volume.node_affinity
    if bound.plugin and migrated_on(csi_node, bound.plugin):
        if bound.error:
            raise VolumeBindingError(context + bound.error)
        affinity = bound.translated
    return affinity is None or affinity.matches(labels, "")


def _affinity_mismatch(volume: str, node: str) -> str:
    return (
        f"pv {json.dumps(volume)} node affinity doesn't match node {json.dumps(node)}: "
        "no matching NodeSelectorTerms"
    )
