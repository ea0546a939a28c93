"""InterPodAffinity: required pod affinity / anti-affinity (and existing pods' anti-affinity) as a filter,
preferred terms and existing pods' terms as a score."""

from kopf_scheduler.plugins.inter_pod_affinity.args import Args
from kopf_scheduler.plugins.inter_pod_affinity.filtering import (
    ERR_REASON_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
)
from kopf_scheduler.plugins.inter_pod_affinity.plugin import NAME, InterPodAffinity, new
from kopf_scheduler.plugins.inter_pod_affinity.terms import NamespaceLister, NoNamespaces, StaticNamespaces

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "Args",
    "InterPodAffinity",
    "NamespaceLister",
    "NoNamespaces",
    "StaticNamespaces",
    "new",
]
