"""kopf-scheduler: a Kubernetes scheduler with kube-scheduler's semantics, run as a Kopf operator."""

from importlib import metadata

try:  # the one place of the version is pyproject.toml; the installed package's metadata carries it
    __version__ = metadata.version("kopf-scheduler")
except metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
