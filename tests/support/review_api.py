"""The API server's side of the secure port's reviews (TokenReview, SubjectAccessReview), answered from
tables the test fills, through the one fake client: ``ReviewServer().api`` is a ``FakeAPI`` whose
unscripted requests this server answers."""

from __future__ import annotations

import json
from typing import Any

from fake_api import FakeAPI, Request

from kopf_scheduler.k8s.delegated_auth import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS
from kopf_scheduler.k8s.rest import Response

#: what the API server answers when etcd is not there (set as ``api.down`` for an outage)
OUTAGE_MESSAGE = "etcdserver: request timed out"


class ReviewServer:
    """Answers TokenReviews from ``tokens`` (token -> user) and SubjectAccessReviews from ``allowed``
    (user -> paths)."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {}
        self.allowed: dict[str, set[str]] = {}
        self.api = FakeAPI(fallback=self.answer)

    @property
    def received(self) -> list[tuple[str, Any]]:
        """(path, body) of every review the API server got, in order."""
        return [(r.path, r.body) for r in self.api.requests]

    def answer(self, request: Request) -> Response:
        assert request.method == "POST", request
        body = request.body
        if request.path == TOKEN_REVIEWS:
            user = self.tokens.get(body["spec"]["token"])
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
        else:
            assert request.path == SUBJECT_ACCESS_REVIEWS, request
            spec = body["spec"]
            status = {
                "allowed": spec["nonResourceAttributes"]["path"] in self.allowed.get(spec["user"], set())
            }
        return Response(201, json.dumps({**body, "status": status}).encode())
