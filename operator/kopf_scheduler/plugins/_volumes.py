"""What the volume plugins share: how a missing object is worded, a claim's storage class, and the
claim lookups of a pod's volumes.

A missing object is reported in the words of the informer listers kube-scheduler reads
(``errors.NewNotFound(<group resource>, name)``): ``persistentvolumeclaim "data" not found``,
``persistentvolume "pv-1" not found``, ``storageclass.storage.k8s.io "fast" not found``.
"""

from __future__ import annotations

import json

from kopf_scheduler.framework.objects import PersistentVolumeClaim

#: the group resources the listers name in their not-found errors
PVC_RESOURCE = "persistentvolumeclaim"
PV_RESOURCE = "persistentvolume"
STORAGE_CLASS_RESOURCE = "storageclass.storage.k8s.io"

#: the claim annotation that predates ``spec.storageClassName`` and still wins over it
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


def not_found(resource: str, name: str) -> str:
    """``apierrors.NewNotFound(resource, name).Error()`` (Go's %q on a name is JSON's quoting)."""
    return f"{resource} {json.dumps(name)} not found"


def claim_class(claim: PersistentVolumeClaim) -> str:
    """``storagehelpers.GetPersistentVolumeClaimClass``: the beta annotation, else
    ``spec.storageClassName``, else "" (no class)."""
    beta = claim.annotations.get(BETA_STORAGE_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return claim.storage_class or ""
