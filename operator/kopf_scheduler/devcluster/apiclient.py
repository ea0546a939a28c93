"""Minimal HTTP access to the dev cluster's API server: urllib for a few blocking calls, aiohttp for bulk.

Deliberately not the `kubernetes` client (only ``kopf_scheduler.k8s`` may use it): the dev cluster needs
a handful of raw requests (readiness probes, CRDs, nodes), each with a bearer token over verified TLS.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        return json.loads(self.body)

    def text(self) -> str:
        return self.body.decode(errors="replace")


@dataclass(frozen=True)
class ApiClient:
    """Where the API server is and how to authenticate to it."""

    server: str
    token: str
    ca_file: Path

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def headers(self, content_type: str = "application/json") -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Content-Type": content_type,
        }

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 10.0,
    ) -> Response:
        """One blocking request; HTTP errors are returned as responses, network errors raise OSError."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(
            self.server + path, data=data, method=method, headers=self.headers(content_type)
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl_context()) as resp:
                return Response(resp.status, resp.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read())

    def session(self, concurrency: int = 32) -> aiohttp.ClientSession:
        """An aiohttp session with at most ``concurrency`` connections, authenticated and verified."""
        import aiohttp  # only bulk callers pay for it; `kopf-scheduler --help` does not

        connector = aiohttp.TCPConnector(limit=concurrency, ssl=self.ssl_context())
        return aiohttp.ClientSession(
            base_url=self.server,
            connector=connector,
            headers=self.headers(),
            timeout=aiohttp.ClientTimeout(total=60),
        )


def probe(
    url: str,
    *,
    token: str | None = None,
    cafile: Path | None = None,
    timeout: float = 2.0,
    contains: str | None = None,
) -> bool:
    """True when GET ``url`` answers 200 (and its body holds ``contains``, when given). Without ``cafile``
    the certificate is not verified (used for the self-signed serving certificates of kube-scheduler and
    kube-controller-manager on loopback)."""
    if url.startswith("https://"):
        ctx = ssl.create_default_context(cafile=str(cafile)) if cafile else ssl._create_unverified_context()
    else:
        ctx = None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout, context=ctx
        ) as resp:
            if resp.status != 200:
                return False
            return contains is None or contains in resp.read().decode(errors="replace")
    except (OSError, ValueError):
        return False
