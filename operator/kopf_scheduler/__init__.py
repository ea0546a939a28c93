"""kopf-scheduler: a Kubernetes scheduler with kube-scheduler's semantics, run as a Kopf operator."""

__version__ = "0.1.0"
