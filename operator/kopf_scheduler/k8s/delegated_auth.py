"""Who may read the secure port: the API server decides, as it does for kube-scheduler's port 10259
(delegated authentication and authorization, ``k8s.io/apiserver/pkg/server/options``).

A bearer token is checked with a TokenReview; the user it names, or ``system:anonymous`` (group
``system:unauthenticated``) when the request carries no token, is checked with a SubjectAccessReview for
``get`` on the request's path, a non-resource URL as RBAC grants it (``nonResourceURLs: ["/metrics"]``).
The probe paths (``--authorization-always-allow-paths``) need neither authorization nor credentials, but
a token sent with them is still checked, as upstream checks it (an unknown one gets 401). Both answers
are kept for 10 s (kube-scheduler's ``--authentication-token-webhook-cache-ttl`` and
``--authorization-webhook-cache-{authorized,unauthorized}-ttl`` defaults), the token under its SHA-256
only, so a scrape every few seconds costs an API request at most every 10 s. A lookup the API server
does not answer is not kept and denies the request: 401 for authentication, 500 for authorization, as
upstream answers.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kopf_scheduler.k8s.rest import RestClient

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
ANONYMOUS = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
CACHE_TTL = 10.0
CACHE_SIZE = 1024


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict, hash=False, compare=False)


ANONYMOUS_USER = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


@dataclass(frozen=True)
class Decision:
    """The HTTP status to answer (200 when allowed) and, when denied, the body's one line."""

    status: int
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


class _TTLCache:
    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._entries: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self.clock():
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = (self.clock() + self.ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


class DelegatedAuth:
    def __init__(
        self,
        rest: RestClient,
        always_allow_paths: tuple[str, ...] = ("/healthz", "/readyz", "/livez"),
        *,
        ttl: float = CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rest = rest
        self.always_allow_paths = always_allow_paths
        self._users = _TTLCache(ttl, CACHE_SIZE, clock)
        self._verdicts = _TTLCache(ttl, CACHE_SIZE, clock)

    def always_allowed(self, path: str) -> bool:
        """kube's ``--authorization-always-allow-paths``: an exact path, or a prefix ending in ``/*``."""
        for allowed in self.always_allow_paths:
            if (allowed.endswith("*") and path.startswith(allowed[:-1])) or path == allowed:
                return True
        return False

    async def check(self, authorization: str | None, path: str) -> Decision:
        """The decision for a ``GET`` of ``path`` with this ``Authorization`` header (None: none sent)."""
        always = self.always_allowed(path)
        if always and not authorization:
            return Decision(200)
        user = ANONYMOUS_USER
        if authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return Decision(401, "Unauthorized")
            found = await self._authenticate(token.strip())
            if found is None:
                return Decision(401, "Unauthorized")
            user = found
        return Decision(200) if always else await self._authorize(user, path)

    async def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None:
            return cached if isinstance(cached, User) else None
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        response = await self.rest.request("POST", TOKEN_REVIEWS, review)
        if not response.ok:
            log.warning(
                "TokenReview failed (HTTP %s: %s): request refused", response.status, response.message
            )
            return None
        status = (response.json() or {}).get("status") or {}
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            user = User(
                str(info.get("username") or ""),
                str(info.get("uid") or ""),
                tuple(info.get("groups") or ()),
                dict(info.get("extra") or {}),
            )
        self._users.put(key, user if user is not None else False)
        return user

    async def _authorize(self, user: User, path: str) -> Decision:
        key = (user.name, user.uid, user.groups, path)
        cached = self._verdicts.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": "get"},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = user.extra
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        response = await self.rest.request("POST", SUBJECT_ACCESS_REVIEWS, review)
        if not response.ok:
            log.warning(
                "SubjectAccessReview failed (HTTP %s: %s): request refused", response.status, response.message
            )
            return Decision(500, f'Internal Server Error: "{path}": authorization could not be checked')
        status = (response.json() or {}).get("status") or {}
        if status.get("allowed") and not status.get("denied"):
            decision = Decision(200)
        else:
            decision = Decision(403, f'forbidden: User "{user.name}" cannot get path "{path}"')
        self._verdicts.put(key, decision)
        return decision
