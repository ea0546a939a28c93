"""DefaultBinder: POST the pod's ``binding`` subresource (``defaultbinder/default_binder.go``)."""

from kopf_scheduler.framework.args import NoArgs as Args
from kopf_scheduler.plugins.default_binder.plugin import NAME, DefaultBinder, new

__all__ = ["NAME", "Args", "DefaultBinder", "new"]
