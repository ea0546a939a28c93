"""Extenders over real HTTP on loopback (``testing.extender_server``): what each verb sends and how its
answer counts, as kube-scheduler's ``extender.go`` and ``schedule_one.go`` do it: managed resources
(``IsInterested``), ignorable extenders, failed vs unresolvable nodes, score scaling, bind precedence,
timeouts and errors worded as kube-scheduler words them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kopf_scheduler.api.extenders import ExtenderSpec, ManagedResource, TLSConfig
from kopf_scheduler.backend.cache.snapshot import Snapshot
from kopf_scheduler.framework.extenders import (
    ExtenderError,
    ExtenderTransport,
    HTTPExtender,
    TLSError,
    build_extenders,
)
from kopf_scheduler.framework.extenders import scheduling as extending
from kopf_scheduler.framework.pod_info import PodInfo
from kopf_scheduler.framework.status import Code, Status, unresolvable, unschedulable
from kopf_scheduler.testing import make_pod
from kopf_scheduler.testing.extender_server import Answer, FakeExtender, node_snapshot, unused_url

GPU = "example.com/gpu"


def _ext(transport: ExtenderTransport, url: str, **fields: Any) -> HTTPExtender:
    return HTTPExtender(ExtenderSpec(url_prefix=url + "/prefix/", **fields), transport)


POD = PodInfo(make_pod().name("p").namespace("ns").uid("u1").req(cpu="1").obj())
GPU_POD = PodInfo(make_pod().name("g").namespace("ns").uid("u2").limits(**{GPU: "1"}).obj())


@pytest.fixture
def snapshot() -> Snapshot:
    return node_snapshot("n1", "n2", "n3", "n4")


# -- IsInterested ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pod", "interested"),
    [
        (make_pod().req(cpu="1"), False),
        (make_pod().req(**{GPU: "1"}), True),
        (make_pod().limits(**{GPU: "1"}), True),
        (make_pod().init_container(**{GPU: "1"}), True),
        (make_pod().req(**{"other.com/x": "1"}), False),
    ],
    ids=["cpu-only", "requests", "limits", "init-container", "other-resource"],
)
def test_is_interested_in_pods_using_managed_resources(
    transport: ExtenderTransport, pod: Any, interested: bool
) -> None:
    ext = _ext(transport, "http://x", managed_resources=(ManagedResource(GPU),))
    assert ext.is_interested(PodInfo(pod.name("p").obj())) is interested
    assert _ext(transport, "http://x").is_interested(
        PodInfo(pod.name("p").obj())
    )  # no managed resources: every pod


def test_ignorable_extenders_are_called_last(transport: ExtenderTransport) -> None:
    specs = [
        ExtenderSpec("http://a", ignorable=True),
        ExtenderSpec("http://b"),
        ExtenderSpec("http://c", ignorable=True),
        ExtenderSpec("http://d"),
    ]
    assert [e.name for e in build_extenders(specs, transport)] == [
        "http://b",
        "http://d",
        "http://a",
        "http://c",
    ]


# -- filter ---------------------------------------------------------------------------------------------
async def test_filter_sends_full_nodes_and_records_failures(
    transport: ExtenderTransport, snapshot: Snapshot
) -> None:
    answer = {
        "Nodes": {"items": [{"metadata": {"name": "n3"}}, {"metadata": {"name": "n1"}}]},
        "FailedNodes": {"n2": "too hot", "n4": "also listed as unresolvable"},
        "FailedAndUnresolvableNodes": {"n4": "never"},
    }
    statuses: dict[str, Status] = {}
    with FakeExtender({"filter": Answer(answer)}) as fake:
        ext = _ext(transport, fake.url, filter_verb="filter")
        rows = await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(4), snapshot, statuses.__setitem__
        )
    [(verb, body)] = fake.requests
    assert verb == "filter"
    assert body["Pod"]["metadata"]["uid"] == "u1"
    assert [n["metadata"]["name"] for n in body["Nodes"]["items"]] == ["n1", "n2", "n3", "n4"]
    assert body["NodeNames"] is None
    assert rows.tolist() == [2, 0]  # the extender's order
    assert statuses == {"n2": unschedulable("too hot"), "n4": unresolvable("never")}
    assert all(s.plugin == "" for s in statuses.values())  # upstream's statuses name no plugin


async def test_filter_extenders_run_in_turn_over_what_passed(
    transport: ExtenderTransport, snapshot: Snapshot
) -> None:
    with (
        FakeExtender({"f": Answer({"NodeNames": ["n1", "n2"]})}) as first,
        FakeExtender({"f": Answer({"NodeNames": ["n2"]})}) as second,
        FakeExtender({"f": Answer({"NodeNames": []})}) as third,
        FakeExtender({"f": Answer({"NodeNames": ["n1"]})}) as never_called,
    ):
        exts = [
            _ext(transport, first.url, filter_verb="f", node_cache_capable=True),
            _ext(transport, second.url, filter_verb="f", node_cache_capable=True),
            _ext(transport, third.url, filter_verb="f", node_cache_capable=True),
            _ext(transport, never_called.url, filter_verb="f", node_cache_capable=True),
        ]
        rows = await extending.find_nodes_that_pass_extenders(
            exts, POD, np.arange(4), snapshot, lambda *_: None
        )
    assert rows.tolist() == []
    assert first.requests[0][1]["NodeNames"] == ["n1", "n2", "n3", "n4"]
    assert first.requests[0][1]["Nodes"] is None
    assert second.requests[0][1]["NodeNames"] == ["n1", "n2"]
    assert third.requests[0][1]["NodeNames"] == ["n2"]
    assert never_called.requests == []  # no node left: later extenders are not asked


async def test_filter_skips_extenders_not_interested_and_without_filter_verb(
    transport: ExtenderTransport, snapshot: Snapshot
) -> None:
    with FakeExtender({"f": Answer({"NodeNames": []})}) as fake:
        exts = [
            _ext(
                transport,
                fake.url,
                filter_verb="f",
                node_cache_capable=True,
                managed_resources=(ManagedResource(GPU),),
            ),
            _ext(transport, fake.url, prioritize_verb="p", weight=1),
        ]
        rows = await extending.find_nodes_that_pass_extenders(
            exts, POD, np.arange(4), snapshot, lambda *_: None
        )
        assert rows.tolist() == [0, 1, 2, 3] and fake.requests == []
        rows = await extending.find_nodes_that_pass_extenders(
            exts, GPU_POD, np.arange(4), snapshot, lambda *_: None
        )
        assert rows.tolist() == [] and fake.verbs_called() == ["f"]


@pytest.mark.parametrize(
    ("answer", "cache_capable", "passed"),
    [
        ({"NodeNames": ["n2"]}, False, []),  # a non-cache-capable extender's NodeNames do not count
        ({"Nodes": {"items": [{"metadata": {"name": "n2"}}]}}, True, [1]),  # Nodes count when names are null
        ({}, True, []),  # neither: no node passes
        ({}, False, []),
    ],
    ids=["names-ignored", "nodes-used", "none-cache-capable", "none"],
)
async def test_which_answer_field_counts(
    transport: ExtenderTransport,
    snapshot: Snapshot,
    answer: dict[str, Any],
    cache_capable: bool,
    passed: list[int],
) -> None:
    with FakeExtender({"f": Answer(answer)}) as fake:
        ext = _ext(transport, fake.url, filter_verb="f", node_cache_capable=cache_capable)
        rows = await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(4), snapshot, lambda *_: None
        )
    assert rows.tolist() == passed


async def test_filter_failures(transport: ExtenderTransport, snapshot: Snapshot) -> None:
    down = unused_url()
    with FakeExtender(
        {
            "error": Answer({"Error": "extender says no"}),
            "status": Answer({}, status=503),
            "slow": Answer({"NodeNames": ["n1"]}, delay=2.0),
            "unknown": Answer({"NodeNames": ["n9"]}),
            "garbage": Answer(b"<html>"),
        }
    ) as fake:

        async def failure(verb: str, url: str | None = None, **fields: Any) -> str:
            ext = _ext(transport, url or fake.url, filter_verb=verb, node_cache_capable=True, **fields)
            with pytest.raises(extending.ExtenderFailure) as e:
                await extending.find_nodes_that_pass_extenders(
                    [ext], POD, np.arange(4), snapshot, lambda *_: None
                )
            assert e.value.status.code == Code.ERROR
            return e.value.status.message()

        assert await failure("error") == "extender says no"
        assert (
            await failure("status")
            == f"failed status with extender at URL {fake.url}/prefix/status, code 503"
        )
        assert await failure("slow", http_timeout=0.2) == (
            f'Post "{fake.url}/prefix/slow": context deadline exceeded '
            "(Client.Timeout exceeded while awaiting headers)"
        )
        port = down.rsplit(":", 1)[1]
        assert await failure("filter", url=down) == (
            f'Post "{down}/prefix/filter": dial tcp 127.0.0.1:{port}: connect: connection refused'
        )
        assert await failure("unknown") == (
            f'extender "{fake.url}/prefix/" claims a filtered node "n9" which is not found in the input '
            "node list"
        )
        assert (await failure("garbage")).startswith(
            f"decoding the garbage answer of extender {fake.url}/prefix/"
        )

        # the same failures of an ignorable extender: it is skipped, the nodes stay as they were
        for verb in ("error", "status", "unknown"):
            ext = _ext(transport, fake.url, filter_verb=verb, node_cache_capable=True, ignorable=True)
            rows = await extending.find_nodes_that_pass_extenders(
                [ext], POD, np.arange(4), snapshot, lambda *_: None
            )
            assert rows.tolist() == [0, 1, 2, 3], verb
        ext = _ext(transport, down, filter_verb="filter", ignorable=True)
        rows = await extending.find_nodes_that_pass_extenders(
            [ext], POD, np.arange(4), snapshot, lambda *_: None
        )
        assert rows.tolist() == [0, 1, 2, 3]


# -- prioritize -----------------------------------------------------------------------------------------
async def test_prioritize_scales_scores_by_weight_and_ten(
    transport: ExtenderTransport, snapshot: Snapshot
) -> None:
    nodes = snapshot.node_infos[:3]
    with (
        FakeExtender(
            {
                "p": Answer(
                    [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 3}, {"Host": "zz", "Score": 9}]
                )
            }
        ) as a,
        FakeExtender({"p": Answer([{"Host": "n2", "Score": 1}, {"Host": "n2", "Score": 1}])}) as b,
        FakeExtender({"p": Answer({}, status=500)}) as failing,
    ):
        exts = [
            _ext(transport, a.url, prioritize_verb="p", weight=2),
            _ext(transport, b.url, prioritize_verb="p", weight=5),
            _ext(transport, failing.url, prioritize_verb="p", weight=100),  # errors only cost its scores
            _ext(transport, a.url, filter_verb="f"),  # no prioritize verb: not called
        ]
        total, per_extender = await extending.prioritize(exts, POD, nodes)
    # n1: 10*2*10; n2: 3*2*10 + (1+1)*5*10 (a host listed twice counts twice); unknown hosts are ignored
    assert total.tolist() == [200, 160, 0]
    assert per_extender[a.url + "/prefix/"][0].tolist() == [10, 3, 0]
    assert set(per_extender) == {a.url + "/prefix/", b.url + "/prefix/"}
    assert [n["metadata"]["name"] for n in a.requests[0][1]["Nodes"]["items"]] == ["n1", "n2", "n3"]
    assert a.verbs_called() == ["p"]


async def test_prioritize_skips_extenders_not_interested(
    transport: ExtenderTransport, snapshot: Snapshot
) -> None:
    with FakeExtender({"p": Answer([{"Host": "n1", "Score": 1}])}) as fake:
        exts = [
            _ext(
                transport, fake.url, prioritize_verb="p", weight=1, managed_resources=(ManagedResource(GPU),)
            )
        ]
        total, _ = await extending.prioritize(exts, POD, snapshot.node_infos)
        assert total.tolist() == [0, 0, 0, 0] and fake.requests == []
        total, _ = await extending.prioritize(exts, GPU_POD, snapshot.node_infos)
        assert total.tolist() == [10, 0, 0, 0]


# -- bind -----------------------------------------------------------------------------------------------
async def test_first_interested_binder_binds(transport: ExtenderTransport) -> None:
    with FakeExtender({"bind": Answer({"Error": ""}), "broken": Answer({}, status=500)}) as fake:
        gpu_only = _ext(transport, fake.url, bind_verb="bind", managed_resources=(ManagedResource(GPU),))
        assert await extending.extenders_binding([gpu_only], POD, "n1") == (False, None)
        assert await extending.extenders_binding([gpu_only], GPU_POD, "n1") == (True, None)
        assert fake.requests == [
            ("bind", {"PodName": "g", "PodNamespace": "ns", "PodUID": "u2", "Node": "n1"})
        ]

        ignorable = _ext(transport, fake.url, bind_verb="broken", ignorable=True)
        assert await extending.extenders_binding([ignorable], POD, "n1") == (False, None)  # bind plugins then
        failing = _ext(transport, fake.url, bind_verb="broken")
        bound, status = await extending.extenders_binding([failing, gpu_only], GPU_POD, "n1")
        assert bound and status is not None and status.code == Code.ERROR
        assert status.message() == f"failed broken with extender at URL {fake.url}/prefix/broken, code 500"


async def test_bind_error_in_answer(transport: ExtenderTransport) -> None:
    with (
        FakeExtender({"bind": Answer({"Error": "quota exhausted"})}) as fake,
        pytest.raises(ExtenderError) as e,
    ):
        await _ext(transport, fake.url, bind_verb="bind").bind(POD, "n1")
    assert str(e.value) == "quota exhausted"


# -- preempt --------------------------------------------------------------------------------------------
async def test_process_preemption_maps_uids_back_to_pods(transport: ExtenderTransport) -> None:
    snapshot = node_snapshot("n1", "n2")
    victim = PodInfo(make_pod().name("v").namespace("ns").uid("v1").node("n1").priority(-1).obj())
    snapshot.node_infos[0].add_pod(victim)
    answer = {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}}}
    with FakeExtender(
        {
            "preempt": Answer(answer),
            "lies": Answer({"NodeNameToMetaVictims": {"n2": {"Pods": [{"UID": "v1"}]}}}),
        }
    ) as fake:
        ext = _ext(transport, fake.url, preempt_verb="preempt")
        kept = await ext.process_preemption(POD, {"n1": ([victim], 0), "n2": ([], 0)}, snapshot)
        assert kept == {"n1": ([victim], 1)}
        body = fake.requests[0][1]
        assert body["NodeNameToVictims"]["n1"]["Pods"][0]["metadata"]["uid"] == "v1"
        assert body["NodeNameToMetaVictims"] is None
        liar = _ext(transport, fake.url, preempt_verb="lies")
        with pytest.raises(ExtenderError) as e:
            await liar.process_preemption(POD, {"n1": ([victim], 0)}, snapshot)
    assert str(e.value) == (
        f"extender: {fake.url}/prefix/ claims to preempt pod (UID: &{{v1}}) on node: n2, "
        "but the pod is not found on that node"
    )


# -- TLS ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"tls": TLSConfig(insecure=True, ca_data=b"x")},
            "insecure",
            "specifying a root certificates file with the insecure flag is not allowed",
        ),
        ({"tls": TLSConfig(ca_file="/nonexistent/ca.pem")}, "caFile", "unable to load root certificates"),
        ({"tls": TLSConfig(cert_file="/c.pem")}, "keyFile", "a client certificate needs both"),
    ],
    ids=["insecure-with-ca", "missing-ca-file", "cert-without-key"],
)
def test_unusable_tls_settings(
    transport: ExtenderTransport, fields: dict[str, Any], field: str, message: str
) -> None:
    spec = ExtenderSpec("https://x", path="spec.extenders[3]", **fields)
    with pytest.raises(TLSError) as e:
        build_extenders([spec], transport)
    assert e.value.field == f"spec.extenders[3].tlsConfig.{field}"
    assert str(e.value).startswith(message)


def test_enable_https_without_ca_skips_verification(transport: ExtenderTransport) -> None:
    import ssl

    [ext] = build_extenders([ExtenderSpec("https://x", enable_https=True)], transport)
    context = ext._endpoint.ssl_context
    assert context is not None and context.verify_mode == ssl.CERT_NONE and not context.check_hostname
    [plain] = build_extenders([ExtenderSpec("https://x")], transport)
    assert plain._endpoint.ssl_context is None  # system roots, as Go's default transport
