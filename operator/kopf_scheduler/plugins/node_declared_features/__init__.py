"""NodeDeclaredFeatures: pods that need a node feature go to nodes that declare it
(``nodedeclaredfeatures/nodedeclaredfeatures.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.node_declared_features.plugin import (
    ERR_REASON_UNSATISFIED_REQUIREMENTS,
    NAME,
    NodeDeclaredFeatures,
    new,
)

__all__ = ["ERR_REASON_UNSATISFIED_REQUIREMENTS", "NAME", "Args", "NodeDeclaredFeatures", "new"]
