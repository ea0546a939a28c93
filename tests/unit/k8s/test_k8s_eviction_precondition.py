"""A preemption victim's requests name the victim's UID (the DELETE as a precondition, the status patch as
``metadata.uid``), so a pod created again under the victim's name is never marked nor deleted in its
place; the API server's refusals for another UID (409 for the DELETE, 422 for the patch) mean "the victim
is gone already", not an error that ends the preemption."""

from __future__ import annotations

import pytest
from fake_api import FakeAPI

from kopf_scheduler.framework.client import APIError
from kopf_scheduler.framework.clock import VirtualClock
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.k8s.eviction import delete_options, preempt
from kopf_scheduler.k8s.rest import Response

PREEMPTOR = PodInfo({"metadata": {"name": "high", "namespace": "ns", "uid": "uid-high"}, "spec": {}})
VICTIM = PodInfo(
    {
        "metadata": {"name": "low", "namespace": "ns", "uid": "uid-low"},
        "spec": {"nodeName": "n1"},
        "status": {},
    }
)
#: kube-apiserver's words, v1.34 to v1.37.2 (k8s.io/apiserver's registry/rest/delete.go;
#: tests/e2e/test_preemption_victim_uid_e2e.py)
CONFLICT = (
    b'{"kind":"Status","status":"Failure","reason":"Conflict","code":409,"message":"Operation cannot be '
    b'fulfilled on Pod \\"low\\": the UID in the precondition (uid-low) does not match the UID in record '
    b'(uid-new). The object might have been deleted and then recreated"}'
)


def _answering(delete: Response) -> FakeAPI:
    return FakeAPI().script("DELETE", None, delete, times=None)


async def _preempt(rest: FakeAPI) -> bool:
    return await preempt(rest, VICTIM, PREEMPTOR, VirtualClock(), "2026-01-01T00:00:00Z", retry_delays=())  # type: ignore[arg-type]


async def test_the_delete_carries_the_victims_uid_as_precondition() -> None:
    rest = _answering(Response(200, b"{}"))
    assert await _preempt(rest) is True
    [patch, delete] = rest.requests
    assert (patch.method, patch.path) == ("PATCH", "/api/v1/namespaces/ns/pods/low/status")
    assert patch.body["metadata"] == {"uid": "uid-low"}
    assert patch.body["status"]["conditions"][0]["type"] == "DisruptionTarget"
    assert (delete.method, delete.path, delete.body) == (
        "DELETE",
        "/api/v1/namespaces/ns/pods/low",
        {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "uid-low"}},
    )


@pytest.mark.parametrize(
    "delete", [Response(409, CONFLICT), Response(404, b"{}")], ids=["replaced-by-a-new-pod", "gone"]
)
async def test_a_victim_replaced_or_gone_is_not_an_error(delete: Response) -> None:
    assert await _preempt(_answering(delete)) is False


async def test_a_victim_replaced_before_it_was_marked_is_left_alone() -> None:
    invalid = (
        b'{"kind":"Status","code":422,"reason":"Invalid","message":"Pod \\"low\\" is invalid: metadata.uid: '
        b'Invalid value: \\"uid-low\\": field is immutable"}'
    )
    rest = FakeAPI().script(None, None, Response(422, invalid), times=None)
    assert await _preempt(rest) is False
    assert [c.method for c in rest.requests] == ["PATCH"]  # no DELETE


async def test_other_failures_are_errors() -> None:
    with pytest.raises(APIError):
        await _preempt(_answering(Response(403, b'{"message":"forbidden"}')))


def test_a_victim_without_uid_is_deleted_by_name() -> None:
    nameless = PodInfo({"metadata": {"name": "low", "namespace": "ns"}, "spec": {}})
    assert delete_options(nameless) == {"apiVersion": "v1", "kind": "DeleteOptions"}
