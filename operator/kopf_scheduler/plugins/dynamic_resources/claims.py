"""A pod's ResourceClaims (``resourceclaim.Name`` and ``foreachPodResourceClaim`` upstream).

``spec.resourceClaims[i]`` names a claim directly (``resourceClaimName``) or through a template
(``resourceClaimTemplateName``): then kube-controller-manager's resource-claim controller creates the
claim, owned by the pod, and records its name in ``status.resourceClaimStatuses``. Until it has, the
pod waits (``ResourceClaim not created yet``); a status entry without a name means no claim is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kopf_scheduler.framework.objects import ResourceClaim
from kopf_scheduler.framework.pod_info import PodInfo

NOT_CREATED = "ResourceClaim not created yet"
UNSUPPORTED = "none of the supported fields are set"


class ClaimError(Exception):
    """Why the pod cannot be scheduled now, in upstream's words."""


class ClaimLister(Protocol):
    def get(self, namespace: str, name: str) -> ResourceClaim | None: ...


def has_claims(pod: PodInfo) -> bool:
    return bool(pod.spec.get("resourceClaims"))


def claim_name(pod: PodInfo, pod_claim: Mapping[str, Any]) -> tuple[str | None, bool]:
    """The name of the claim for one ``spec.resourceClaims`` entry (None: none is needed) and whether
    the claim must be owned by the pod; raises ``ClaimError``."""
    if pod_claim.get("resourceClaimName") is not None:
        return str(pod_claim["resourceClaimName"]), False
    if pod_claim.get("resourceClaimTemplateName") is not None:
        status = pod.raw.get("status") or {}
        for entry in status.get("resourceClaimStatuses") or ():
            if isinstance(entry, Mapping) and entry.get("name") == pod_claim.get("name"):
                name = entry.get("resourceClaimName")
                return (None if name is None else str(name)), True
        raise ClaimError(f'pod "{pod.namespace}/{pod.name}": {NOT_CREATED}')
    raise ClaimError(
        f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{pod_claim.get("name") or ""}": {UNSUPPORTED}'
    )


_KEYS = "DynamicResources.claim_keys"


def claim_keys(pod: PodInfo) -> frozenset[tuple[str, str]]:
    """``(namespace, name)`` of every claim the pod names now (``resourceClaimName``, and the claims its
    status records for its templates), ignoring entries ``pod_claims`` would reject: a superset of the
    keys of the claims ``pod_claims`` returns. Memoised on ``PodInfo.extra`` (a PodInfo is one version
    of the pod)."""
    found: frozenset[tuple[str, str]] | None = pod.extra.get(_KEYS)
    if found is None:
        keys = set()
        for pod_claim in pod.spec.get("resourceClaims") or ():
            if not isinstance(pod_claim, Mapping):
                continue
            try:
                name, _ = claim_name(pod, pod_claim)
            except ClaimError:
                continue
            if name is not None:
                keys.add((pod.namespace, name))
        found = pod.extra[_KEYS] = frozenset(keys)
    return found


def pod_claims(pod: PodInfo, claims: ClaimLister) -> list[ResourceClaim]:
    """The pod's claims in ``spec.resourceClaims`` order (those needed); raises ``ClaimError`` when one
    is missing, being deleted, or not the pod's own although made from a template."""
    out = []
    for pod_claim in pod.spec.get("resourceClaims") or ():
        if not isinstance(pod_claim, Mapping):
            continue
        name, must_own = claim_name(pod, pod_claim)
        if name is None:
            continue
        claim = claims.get(pod.namespace, name)
        if claim is None:
            raise ClaimError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
        if claim.deleting:
            raise ClaimError(f'resourceclaim "{claim.name}" is being deleted')
        if must_own and (claim.namespace != pod.namespace or claim.controller_uid != pod.uid):
            raise ClaimError(
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for pod "
                f"{pod.namespace}/{pod.name} (pod is not owner)"
            )
        out.append(claim)
    return out
