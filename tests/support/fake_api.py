"""The one fake of the API server's side of the scheduler's client, for every test that needs one.

``FakeAPI`` has both doors the product talks through:

- the REST door, as ``k8s.rest.RestClient``: ``request(method, path, body, ...) -> Response``,
  ``get_json``, ``close``, ``stats`` and ``timeout``. ``KubeClient``, the binder, the event recorder, the
  pod status writer, the leader elector and the secure port's reviews take it where they take a
  ``RestClient``;
- the ``ClusterClient`` door (``framework.client``), which the scheduler uses: ``bind``, ``evict``,
  ``nominate``, ``record_scheduled``, ``record_failure``, ``record_preempted_in_memory``,
  ``clear_nominated_node_name``, ``get_object``,
  ``update_object`` and ``patch_object``. Each call becomes the request ``KubeClient`` sends for it (the
  binding POST with the same body, the eviction DELETE, the pod status PATCH, ...), recorded and answered
  like any other, and an answer other than a success comes back as ``KubeClient`` gives it: an
  ``APIError`` with the status (0 for no answer) and the API server's message.

Every request is recorded in ``requests``, in arrival order: method, path, body, content type, query
parameters, the pod a ``ClusterClient`` call was about, and the answer once given (``log`` has when each
was sent and answered, in order). Answers are scripted
per method and path (``script``): a status and body, a delay, a hold until an event is set, a dropped
connection or a timeout (``DROPPED``, ``TIMED_OUT``: status 0 with the error ``RestClient`` reports, as it
never raises), or a function of the request; each for the next ``times`` matching requests, or for all
(``times=None``). Scripts are tried in the order they were given. A hold or a delay without a status of
its own (``hold``, ``held``) passes the request on, once it is over, to the scripts given after it (also
those given while the request was held) or to ``fallback``: a test can hold a binding, then decide what
it is answered. What no script answers, ``fallback`` does (by default 201 ``{}`` to a POST and 200 ``{}``
to anything else; a test with a server's state, such as a Lease store, passes its own), unless
``strict`` makes an unscripted request fail the test. While ``down`` is set, every request gets that
answer instead (an outage). A request's ``before_write`` (the fence at the wire) is called before it is
recorded, as the pool calls it before the bytes leave; what it raises, the request is not sent.

The reporting calls (``record_scheduled``, ``record_failure``, ``record_preempted_in_memory``,
``clear_nominated_node_name``) are fire-and-forget in the product: they are recorded, never answered,
and never raise. ``record_failure`` is recorded as the pod status PATCH that carries the reason, the
message and the nomination (the real client also sends a FailedScheduling event with the same message);
like the real client, it writes ``nominatedNodeName`` only when that changes it (compared with the
pod's last write through this door, else the pod object). ``bound``, ``failures``, ``scheduled``,
``nominated`` and ``evicted`` read the record the way the scheduler tests ask about it.

The fake is called from one event loop at a time; a thread of its own (the leader election's) may call
``request`` too, as long as its requests are answered without ``until`` (an ``asyncio.Event`` is bound
to its loop).
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kopf_scheduler.framework.client import APIError, PreemptorGroup
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.binding import binding_body
from kopf_scheduler.k8s.conditions import pod_scheduled_false
from kopf_scheduler.k8s.connection import ConnectionInfo
from kopf_scheduler.k8s.event_series import pod_ref
from kopf_scheduler.k8s.eviction import delete_options
from kopf_scheduler.k8s.http_pool import NoAnswer
from kopf_scheduler.k8s.rest import JSON, STRATEGIC_MERGE_PATCH, Response, resource_path
from kopf_scheduler.k8s.stats import ClientStats

__all__ = [
    "DROPPED",
    "TIMED_OUT",
    "Answer",
    "FakeAPI",
    "Request",
    "held",
    "json_answer",
    "status",
]


@dataclass
class Request:
    """One request as the fake received it."""

    method: str
    path: str
    body: Any = None
    content_type: str = ""
    params: Mapping[str, str] | None = None
    #: the pod a ``ClusterClient`` call was about (``bind``, ``evict``, the reports); None for REST calls
    pod: PodInfo | None = field(default=None, repr=False)
    #: the answer given; None while it is held, when it was cancelled, or for a fire-and-forget report
    response: Response | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """``namespace/name`` of the pod a ``ClusterClient`` call was about."""
        assert self.pod is not None, f"{self.method} {self.path} was not about a pod"
        return self.pod.key


@dataclass(frozen=True)
class Answer:
    """What a scripted request gets. ``status`` None (and no ``drop``): after the wait, what the scripts
    given after this one answer, or ``fallback``."""

    status: int | None = None
    body: bytes = b"{}"
    retry_after: float | None = None
    #: seconds to wait first, with the fake's ``sleep`` (``asyncio.sleep``, or a VirtualClock's ``sleep``)
    delay: float = 0.0
    #: held until this event is set (then the delay, then the answer)
    until: asyncio.Event | None = None
    #: no answer: "closed" (the server dropped the connection) or "timeout"
    drop: str = ""


#: the server closed the connection without an answer: ``RestClient`` reports it as status 0
DROPPED = Answer(drop="closed")
#: no answer within the request's timeout: status 0 as well
TIMED_OUT = Answer(drop="timeout")


def status(code: int, message: str = "", *, retry_after: float | None = None) -> Answer:
    """An answer with a ``Status`` body, as the API server words a refusal."""
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return Answer(code, json.dumps(body).encode(), retry_after)


def json_answer(obj: Any, code: int = 200) -> Answer:
    """An answer carrying ``obj`` as JSON."""
    return Answer(code, json.dumps(obj).encode())


def held(event: asyncio.Event, then: Answer | None = None) -> Answer:
    """``then`` once ``event`` is set; without ``then``, what the later scripts or ``fallback`` answer."""
    return replace(then or Answer(), until=event)


#: a scripted answer: fixed, or computed from the request (None: what ``fallback`` answers)
Reply = Answer | Response | Callable[[Request], "Answer | Response | None"]


def default_answer(request: Request) -> Response:
    return Response(201 if request.method == "POST" else 200, b"{}")


@dataclass
class _Rule:
    method: str | None
    path: str | None
    reply: Reply
    #: matching requests it still answers; None: all
    left: int | None

    def matches(self, method: str, path: str) -> bool:
        if self.left is not None and self.left <= 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.path is None or fnmatch.fnmatchcase(path, self.path)


class FakeAPI:
    """See the module docstring."""

    def __init__(
        self,
        *,
        fallback: Callable[[Request], Response] = default_answer,
        strict: bool = False,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        self.fallback = fallback
        self.strict = strict
        self._sleep = sleep
        self.requests: list[Request] = []
        #: ("sent", request) and ("answered", request) in the order they happened
        self.log: list[tuple[str, Request]] = []
        #: while set, every request gets this answer
        self.down: Answer | None = None
        self.stats = ClientStats()
        self.timeout = 10.0
        self.info = ConnectionInfo("http://fake-api.invalid")
        self.closed = False
        self._rules: list[_Rule] = []
        #: per pod uid: the last ``nominatedNodeName`` written through the ClusterClient door
        self._nominations: dict[str, str] = {}

    @property
    def server(self) -> str:
        return self.info.server

    # -- scripting ------------------------------------------------------------------------------------

    def script(self, method: str | None, path: str | None, *replies: Reply, times: int | None = 1) -> FakeAPI:
        """The next requests of ``method`` (None: any) to ``path`` (a glob such as ``*/binding``; None:
        any) get ``replies`` in order, each ``times`` times (None: for good, so only the first of them
        matters). Scripts given earlier are tried first."""
        for reply in replies:
            self._rules.append(_Rule(method, path, reply, times))
        return self

    def hold(self, method: str | None = None, path: str | None = None) -> asyncio.Event:
        """Holds every matching request until the event returned is set; then the scripts given after
        this (also while it held) or ``fallback`` answer it."""
        gate = asyncio.Event()
        self.script(method, path, held(gate), times=None)
        return gate

    # -- the REST door --------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        params: Mapping[str, str] | None = None,
        before_write: Callable[[], None] | None = None,
        **_: Any,
    ) -> Response:
        if before_write is not None:  # as ``HttpPool`` does when the bytes leave: what it raises, unsent
            before_write()
        return await self._send(Request(method, path, body, content_type if body is not None else "", params))

    async def get_json(
        self, path: str, params: Mapping[str, str] | None = None, *, accept: str = JSON
    ) -> Any:
        response = await self.request("GET", path, params=params, accept=accept)
        if response.status != 200:
            raise response.error_for(f"GET {path}")
        return response.json()

    async def close(self) -> None:
        self.closed = True

    # -- the ClusterClient door ----------------------------------------------------------------------

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        path = resource_path("v1", "pods", pod.name, namespace=pod.namespace, subresource="binding")
        body = json.loads(binding_body(pod, node_name))
        response = await self._send(Request("POST", path, body, JSON, pod=pod))
        if not response.ok:
            message = f"binding {pod.key} to {node_name}: {response.message()}"
            raise APIError(response.status, message, settled=True if response.status == 404 else None)

    async def evict(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        """The victim's DELETE; 404: gone already, no error."""
        path = resource_path("v1", "pods", victim.name, namespace=victim.namespace)
        response = await self._send(Request("DELETE", path, delete_options(victim), JSON, pod=victim))
        if not response.ok and response.status != 404:
            raise APIError(response.status, f"deleting {victim.key}: {response.message()}")

    async def nominate(self, pod: PodInfo, node_name: str) -> None:
        """The status PATCH setting ``nominatedNodeName``, answered like any other (a failure is not
        raised: the real client logs it); none when the pod holds that node already."""
        if self._nomination_of(pod) == node_name:
            return
        self._nominations[pod.uid] = node_name
        body = {"status": {"nominatedNodeName": node_name}}
        await self._send(Request("PATCH", _status(pod), body, STRATEGIC_MERGE_PATCH, pod=pod))

    def _nomination_of(self, pod: PodInfo) -> str:
        """The pod's ``nominatedNodeName`` as the real client sees it: its last write, else the pod's."""
        return self._nominations.get(pod.uid, pod.nominated_node_name)

    def record_preempted_in_memory(
        self, victim: PodInfo, preemptor: PodInfo, node_name: str, *, group: PreemptorGroup | None = None
    ) -> None:
        by = f"pod {preemptor.uid}" if group is None else f"podgroup {group.uid}"
        note = f"Preempted by {by} on node {node_name} (in kube-scheduler memory)."
        event = {
            "type": "Normal",
            "reason": "Preempted",
            "action": "Preempting",
            "note": note,
            "regarding": pod_ref(victim).to_json(),
            "related": pod_ref(preemptor).to_json(),
        }
        self._record(Request("POST", _events(victim), event, JSON, pod=victim))

    def record_scheduled(self, pod: PodInfo, node_name: str) -> None:
        note = f"Successfully assigned {pod.namespace}/{pod.name} to {node_name}"
        event = {
            "type": "Normal",
            "reason": "Scheduled",
            "action": "Binding",
            "note": note,
            "regarding": pod_ref(pod).to_json(),
        }
        self._record(Request("POST", _events(pod), event, JSON, pod=pod))

    def record_failure(
        self, pod: PodInfo, reason: str, message: str, nominated_node_name: str | None
    ) -> None:
        patch: dict[str, Any] = {"conditions": [pod_scheduled_false(reason, message)]}
        if nominated_node_name is not None and nominated_node_name != self._nomination_of(pod):
            self._nominations[pod.uid] = nominated_node_name
            patch["nominatedNodeName"] = nominated_node_name or None
        self._record(Request("PATCH", _status(pod), {"status": patch}, STRATEGIC_MERGE_PATCH, pod=pod))

    def clear_nominated_node_name(self, pod: PodInfo) -> None:
        self._nominations[pod.uid] = ""
        body = {"status": {"nominatedNodeName": None}}
        self._record(Request("PATCH", _status(pod), body, STRATEGIC_MERGE_PATCH, pod=pod))

    async def get_object(self, path: str) -> dict[str, Any] | None:
        response = await self.request("GET", path)
        if response.status == 404:
            return None
        if response.status != 200:
            raise response.error_for(f"GET {path}")
        data = response.json()
        return data if isinstance(data, dict) else None

    async def update_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.request("PUT", path, dict(obj))
        if response.status != 200:
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def patch_object(self, path: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.request("PATCH", path, dict(patch), content_type=STRATEGIC_MERGE_PATCH)
        if response.status != 200:
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def create_object(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        response = await self.request("POST", path, dict(obj))
        if response.status not in (200, 201):
            raise APIError(response.status, response.message())
        data = response.json()
        return data if isinstance(data, dict) else {}

    async def delete_object(self, path: str) -> None:
        response = await self.request("DELETE", path)
        if response.status not in (200, 202):
            raise APIError(response.status, response.message())

    # -- what was asked ------------------------------------------------------------------------------

    def sent(self, method: str | None = None, path: str | None = None) -> list[Request]:
        """The requests of ``method`` to ``path`` (a glob), in arrival order; None matches any."""
        return [r for r in self.requests if _Rule(method, path, Answer(), None).matches(r.method, r.path)]

    def bind_attempts(self) -> list[tuple[str, str]]:
        """(pod key, node) of every binding POST, answered or not."""
        return [(r.key, r.body["target"]["name"]) for r in self.sent("POST", "*/binding") if r.pod]

    @property
    def bound(self) -> list[tuple[str, str]]:
        """(pod key, node) of every binding answered with a success."""
        return [
            (r.key, r.body["target"]["name"])
            for r in self.sent("POST", "*/binding")
            if r.pod and r.response is not None and r.response.ok
        ]

    @property
    def scheduled(self) -> list[tuple[str, str]]:
        """(pod key, node) of every ``Scheduled`` report."""
        return [
            (r.key, r.body["note"].rpartition(" to ")[2])
            for r in self.sent("POST", "*/events")
            if r.pod and r.body["reason"] == "Scheduled"
        ]

    @property
    def failures(self) -> list[tuple[str, str, str]]:
        """(pod key, reason, message) of every failure report, in order."""
        out = []
        for r in self.sent("PATCH", "*/status"):
            for condition in r.body["status"].get("conditions", ()) if r.pod else ():
                out.append((r.key, condition["reason"], condition["message"]))
        return out

    @property
    def nominated(self) -> list[tuple[str, str]]:
        """(pod key, node) of every write of ``status.nominatedNodeName``; node "" for a removal."""
        return [
            (r.key, r.body["status"]["nominatedNodeName"] or "")
            for r in self.sent("PATCH", "*/status")
            if r.pod and "nominatedNodeName" in r.body["status"]
        ]

    @property
    def evicted(self) -> list[str]:
        """The pod keys of every eviction DELETE answered with a success."""
        return [r.key for r in self.sent("DELETE") if r.pod and r.response is not None and r.response.ok]

    # -- answering -----------------------------------------------------------------------------------

    def _record(self, request: Request) -> None:
        self.requests.append(request)
        self.log.append(("sent", request))

    async def _send(self, request: Request) -> Response:
        self._record(request)
        reply: Answer | Response | None = self.down
        if reply is None:
            scripted, at = self._scripted(request, 0)
            while True:
                reply = scripted(request) if callable(scripted) else scripted
                if not (isinstance(reply, Answer) and reply.status is None and not reply.drop):
                    break
                # a hold or a delay without an answer of its own passes the request on, once over, to
                # the scripts given after it (perhaps meanwhile), or to fallback
                await self._wait(reply)
                scripted, at = self._scripted(request, at + 1, strict=False)
        if isinstance(reply, Answer):
            await self._wait(reply)
        response = self._answer(request, reply)
        request.response = response
        self.log.append(("answered", request))
        self.stats.requests[(request.method, response.status)] += 1
        return response

    async def _wait(self, answer: Answer) -> None:
        if answer.until is not None:
            await answer.until.wait()
        if answer.delay > 0:
            await (self._sleep or asyncio.sleep)(answer.delay)

    def _scripted(self, request: Request, start: int, *, strict: bool = True) -> tuple[Reply | None, int]:
        """The reply of the first script from ``start`` on that matches, and its index (its count of
        requests to answer taken one off)."""
        for at in range(start, len(self._rules)):
            rule = self._rules[at]
            if rule.matches(request.method, request.path):
                if rule.left is not None:
                    rule.left -= 1
                return rule.reply, at
        if self.strict and strict:
            raise AssertionError(f"unexpected {request.method} {request.path}")
        return None, len(self._rules)

    def _answer(self, request: Request, reply: Answer | Response | None) -> Response:
        if isinstance(reply, Response):
            return reply
        if reply is None:
            return self.fallback(request)
        if reply.drop == "timeout":
            return Response(0, error=f"{request.method} {request.path}: timed out")
        if reply.drop:
            error = NoAnswer("the server closed the connection", nothing_received=True)
            return Response(0, error=f"{request.method} {request.path}: {type(error).__name__}: {error}")
        assert reply.status is not None
        return Response(reply.status, reply.body, retry_after=reply.retry_after)


def _events(pod: PodInfo) -> str:
    return f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events"


def _status(pod: PodInfo) -> str:
    return resource_path("v1", "pods", pod.name, namespace=pod.namespace, subresource="status")
