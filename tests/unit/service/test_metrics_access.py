"""Who may read the secure port: a token the API server authenticates (TokenReview), a user it authorises
for ``get`` on the path (SubjectAccessReview), anonymous without a token, probes without a grant; answers
kept for 10 s, lookups the API server did not answer never kept."""

from __future__ import annotations

from fake_api import status
from review_api import OUTAGE_MESSAGE, ReviewServer

from kopf_scheduler.k8s.delegated_auth import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, DelegatedAuth


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def auth_for(server: ReviewServer, clock: Clock | None = None) -> DelegatedAuth:
    return DelegatedAuth(server.api, clock=clock or Clock())  # type: ignore[arg-type]


async def test_no_token_is_the_anonymous_user_whom_rbac_must_allow() -> None:
    reviews = ReviewServer()
    decision = await auth_for(reviews).check(None, "/metrics")
    assert (decision.status, decision.message) == (
        403,
        'forbidden: User "system:anonymous" cannot get path "/metrics"',
    )
    [(path, review)] = reviews.received
    assert path == SUBJECT_ACCESS_REVIEWS
    assert review["spec"] == {
        "user": "system:anonymous",
        "groups": ["system:unauthenticated"],
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    reviews.allowed["system:anonymous"] = {"/metrics"}
    assert (await auth_for(reviews).check(None, "/metrics")).allowed


async def test_a_token_names_the_user_whose_groups_and_uid_are_reviewed() -> None:
    reviews = ReviewServer()
    reviews.tokens["t0ken"] = {
        "username": "system:serviceaccount:monitoring:prometheus",
        "uid": "u-1",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
    }
    reviews.allowed["system:serviceaccount:monitoring:prometheus"] = {"/metrics"}
    auth = auth_for(reviews)
    assert (await auth.check("Bearer t0ken", "/metrics")).allowed
    token_review, access_review = reviews.received
    assert token_review == (
        TOKEN_REVIEWS,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "t0ken"}},
    )
    assert access_review[1]["spec"] == {
        "user": "system:serviceaccount:monitoring:prometheus",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "uid": "u-1",
        "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    denied = await auth.check("Bearer t0ken", "/debug/pprof")
    assert denied.status == 403
    assert (
        denied.message
        == 'forbidden: User "system:serviceaccount:monitoring:prometheus" cannot get path "/debug/pprof"'
    )


async def test_an_unknown_token_or_another_scheme_is_unauthorized() -> None:
    reviews = ReviewServer()
    auth = auth_for(reviews)
    for header in ("Bearer nope", "Basic dXNlcjpwdw==", "Bearer ", "Bearer"):
        decision = await auth.check(header, "/metrics")
        assert (decision.status, decision.message) == (401, "Unauthorized"), header
    assert [path for path, _ in reviews.received] == [TOKEN_REVIEWS]  # only the bearer token was looked up


async def test_probe_paths_need_no_credentials_and_cost_no_review() -> None:
    reviews = ReviewServer()
    auth = DelegatedAuth(reviews.api, ("/healthz", "/readyz", "/livez", "/debug/*"))  # type: ignore[arg-type]
    for path in ("/readyz", "/healthz", "/livez", "/debug/pprof/heap"):
        assert (await auth.check(None, path)).allowed
    assert reviews.received == []
    # a token sent anyway is checked (as upstream does), but its user needs no grant
    reviews.tokens["t"] = {"username": "alice"}
    assert (await auth.check("Bearer t", "/readyz")).allowed
    assert (await auth.check("Bearer nope", "/readyz")).status == 401
    assert [path for path, _ in reviews.received] == [TOKEN_REVIEWS, TOKEN_REVIEWS]
    assert (await auth.check(None, "/readyz/extra")).status == 403


async def test_answers_are_kept_for_ten_seconds_by_a_hash_of_the_token() -> None:
    reviews = ReviewServer()
    reviews.tokens["t"] = {"username": "alice", "groups": []}
    clock = Clock()
    auth = auth_for(reviews, clock)
    for _ in range(5):
        assert (await auth.check("Bearer t", "/metrics")).status == 403
        assert (await auth.check("Bearer bad", "/metrics")).status == 401
    assert len(reviews.received) == 3  # alice's token, her access, the bad token
    assert all(len(key) == 64 for key in auth._users._entries)  # SHA-256 hex digests, never the token
    reviews.allowed["alice"] = {"/metrics"}
    clock.now += 9.9
    assert (await auth.check("Bearer t", "/metrics")).status == 403  # the denial is still kept
    clock.now += 0.2
    assert (await auth.check("Bearer t", "/metrics")).allowed  # both answers asked again
    assert len(reviews.received) == 5


async def test_an_api_server_that_does_not_answer_denies_and_nothing_is_kept() -> None:
    reviews = ReviewServer()
    reviews.tokens["t"] = {"username": "alice"}
    reviews.allowed["alice"] = {"/metrics"}
    reviews.allowed["system:anonymous"] = {"/metrics"}
    auth = auth_for(reviews)
    reviews.api.down = status(503, OUTAGE_MESSAGE)
    assert (await auth.check("Bearer t", "/metrics")).status == 401
    decision = await auth.check(None, "/metrics")
    assert decision.status == 500 and decision.message.startswith('Internal Server Error: "/metrics"')
    reviews.api.down = None
    assert (await auth.check("Bearer t", "/metrics")).allowed
    assert (await auth.check(None, "/metrics")).allowed
