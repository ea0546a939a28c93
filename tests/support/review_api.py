"""A fake API server for the secure port's reviews (TokenReview, SubjectAccessReview)."""

from __future__ import annotations

import json
from typing import Any

from kopf_scheduler.k8s.delegated_auth import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from kopf_scheduler.k8s.rest import Response


class ReviewAPI:
    """Answers TokenReviews from ``tokens`` (token -> user) and SubjectAccessReviews from ``allowed``
    (user -> paths); ``down`` answers 503 to everything. Records every review it gets."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {}
        self.allowed: dict[str, set[str]] = {}
        self.down = False
        self.reviews: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, path: str, body: Any = None, **_: Any) -> Response:
        assert method == "POST"
        self.reviews.append((path, body))
        if self.down:
            return Response(503, b'{"message":"etcdserver: request timed out"}')
        if path == TOKEN_REVIEWS:
            user = self.tokens.get(body["spec"]["token"])
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
        else:
            assert path == SUBJECT_ACCESS_REVIEWS
            spec = body["spec"]
            status = {
                "allowed": spec["nonResourceAttributes"]["path"] in self.allowed.get(spec["user"], set())
            }
        return Response(201, json.dumps({**body, "status": status}).encode())

    async def close(self) -> None:
        pass
