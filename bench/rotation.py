"""Credential rotation for ``python -m bench soak``: kopf-scheduler runs as the ServiceAccount ``deploy/``
creates (``kopf-scheduler/kopf-scheduler``, with the least-privilege ClusterRole of ``deploy/rbac.yaml``),
through a kubeconfig whose user has a ``tokenFile``. The file holds a bound service-account token (the
TokenRequest API, ``boundObjectRef`` to a Secret made for it): deleting that Secret makes the API server
refuse the token with 401.

Every ``every`` seconds the ``Rotator`` makes a new Secret, requests a token bound to it, writes the token
to the file (a new file renamed over the old one: a reader never sees half a token), deletes the old
Secret, and then asks with the old token until the API server refuses it (the time that takes is
recorded: the API server caches a token's successful authentication for up to 10 s). The scheduler has
not read the new file yet (it re-reads a token file every minute), so its next request after the
refusal gets a 401, and it must reload its credentials and go on.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from kopf_scheduler.devcluster import ApiClient
from kopf_scheduler.devcluster import kubeconfig as dev_kubeconfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
NAMESPACE = "kopf-scheduler"
SERVICE_ACCOUNT = "kopf-scheduler"
#: the shortest expiry the TokenRequest API grants (10 minutes): rotation, not expiry, ends each token
TOKEN_SECONDS = 600
#: how long the old token may still be accepted after its Secret is deleted before that is an error
REFUSAL_TIMEOUT = 30.0
SECRET_PREFIX = "soak-token-"
#: the objects of deploy/ the ServiceAccount needs, and where each kind is created
MANIFESTS = ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml")
RBAC = "/apis/rbac.authorization.k8s.io/v1"
COLLECTIONS = {
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{namespace}/serviceaccounts",
    "ClusterRole": f"{RBAC}/clusterroles",
    "ClusterRoleBinding": f"{RBAC}/clusterrolebindings",
    "Role": f"{RBAC}/namespaces/{{namespace}}/roles",
    "RoleBinding": f"{RBAC}/namespaces/{{namespace}}/rolebindings",
}
#: what the ServiceAccount may do (list nodes): 200 while its token is good, 401 once it is refused
PROBE = "/api/v1/nodes?limit=1"


def token_file_kubeconfig(server: str, ca_pem: bytes, token_file: Path, name: str) -> dict[str, Any]:
    """A kubeconfig (CA embedded) whose one user reads its bearer token from ``token_file``."""
    config = dev_kubeconfig.build(server, ca_pem, "", name=name)
    config["users"] = [{"name": f"{name}-sa", "user": {"tokenFile": str(token_file)}}]
    config["contexts"][0]["context"]["user"] = f"{name}-sa"
    return config


def write_token(path: Path, token: str) -> None:
    """Replaces ``path`` with ``token`` at once (a new private file renamed over it)."""
    temporary = path.with_name(f".{path.name}.new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.replace(temporary, path)


def manifests() -> list[dict[str, Any]]:
    """The namespace, ServiceAccount and RBAC objects of ``deploy/``."""
    docs: list[dict[str, Any]] = []
    for name in MANIFESTS:
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return docs


def install_service_account(api: ApiClient) -> None:
    for doc in manifests():
        path = COLLECTIONS[doc["kind"]].format(namespace=doc["metadata"].get("namespace", ""))
        response = api.request("POST", path, doc)
        if not response.ok:
            raise RuntimeError(
                f"POST {path} ({doc['metadata']['name']}): HTTP {response.status}: {response.text()}"
            )


def token_request(secret: str, uid: str) -> dict[str, Any]:
    """A TokenRequest for a token bound to the Secret ``secret`` (``uid``): valid until it is deleted."""
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": TOKEN_SECONDS,
            "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": secret, "uid": uid},
        },
    }


class Rotator:
    """Writes the first token at once (``start``), then rotates it every ``every`` seconds in its own
    thread until ``stop``."""

    def __init__(self, api: ApiClient, token_file: Path, every: float) -> None:
        self.api = api
        self.token_file = token_file
        self.every = every
        self.rotations = 0
        #: seconds from the old Secret's deletion to the old token's first refusal, per rotation
        self.refused_after: list[float] = []
        #: when each rotation wrote its token (monotonic)
        self.rotated_at: list[float] = []
        self.errors: list[str] = []
        self._serial = 0
        self._secret = ""
        self._token = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="rotator", daemon=True)

    def first(self) -> None:
        """The token the scheduler starts with."""
        self._secret, self._token = self._issue()
        write_token(self.token_file, self._token)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=REFUSAL_TIMEOUT + 30)

    def summary(self) -> dict[str, Any]:
        refused = self.refused_after
        return {
            "rotation_interval_s": self.every,
            "rotations": self.rotations,
            "old_token_refused": len(refused),
            "old_token_refused_after_max_s": round(max(refused), 2) if refused else None,
            "rotation_errors": self.errors[:5],
        }

    def _main(self) -> None:
        started = time.monotonic()
        k = 1
        # on a fixed schedule: waiting for an old token's refusal does not push the next rotation back
        while not self._stop.wait(max(0.0, started + k * self.every - time.monotonic())):
            k += 1
            try:
                self.rotate()
            except (OSError, RuntimeError, ValueError, KeyError) as e:
                self.errors.append(f"rotation {self._serial}: {type(e).__name__}: {e}")

    def rotate(self) -> None:
        old_secret, old_token = self._secret, self._token
        self._secret, self._token = self._issue()
        write_token(self.token_file, self._token)
        self.rotated_at.append(time.monotonic())
        path = f"/api/v1/namespaces/{NAMESPACE}/secrets/{old_secret}"
        deleted = self.api.request("DELETE", path)
        if not deleted.ok:
            raise RuntimeError(f"DELETE {path}: HTTP {deleted.status}: {deleted.text()[:200]}")
        self.rotations += 1
        self.refused_after.append(self._wait_refused(old_token))

    def _issue(self) -> tuple[str, str]:
        self._serial += 1
        name = f"{SECRET_PREFIX}{self._serial}"
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": "Opaque"}
        made = self.api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", body)
        if made.status != 201:
            raise RuntimeError(f"Secret {name}: HTTP {made.status}: {made.text()[:200]}")
        path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token"
        answer = self.api.request("POST", path, token_request(name, made.json()["metadata"]["uid"]))
        if answer.status != 201:
            raise RuntimeError(f"POST {path}: HTTP {answer.status}: {answer.text()[:200]}")
        return name, str(answer.json()["status"]["token"])

    def _wait_refused(self, token: str) -> float:
        """Seconds until a request with ``token`` is answered 401."""
        client = ApiClient(server=self.api.server, token=token, ca_file=self.api.ca_file)
        started = time.monotonic()
        while True:
            status = client.request("GET", PROBE).status
            waited = time.monotonic() - started
            if status == 401:
                return waited
            if waited > REFUSAL_TIMEOUT:
                raise RuntimeError(f"the old token was still accepted (HTTP {status}) {waited:.0f} s on")
            time.sleep(0.25)
