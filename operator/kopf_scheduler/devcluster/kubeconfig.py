"""Writing the admin kubeconfig of the dev cluster (a pure function plus a private-file writer)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml

CONTEXT = "kopf-scheduler-dev"


def build(server: str, ca_pem: bytes, token: str, name: str = CONTEXT) -> dict[str, Any]:
    """A self-contained kubeconfig (CA embedded) with one cluster, one token user and one context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
                },
            }
        ],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
        "preferences": {},
    }


def write(path: Path, config: dict[str, Any]) -> Path:
    """Write ``config`` to ``path`` readable by the owner only (it holds an admin token)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(config, f, sort_keys=False)
    return path
