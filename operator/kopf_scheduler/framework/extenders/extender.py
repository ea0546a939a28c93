"""``HTTPExtender``: one configured scheduler extender (upstream's ``pkg/scheduler/extender.go``).

Each verb is optional: without a filter verb ``filter`` passes every node without a call, without a
prioritize verb ``prioritize`` scores nothing, and so on. ``is_interested`` is kube-scheduler's
``IsInterested``: an extender with managed resources only sees pods whose containers or init containers
request or limit one of them. Calls raise ``ExtenderError`` with kube-scheduler's wording; whether an
error fails the pod (or is skipped because the extender is ``ignorable``) is the caller's decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kopf_scheduler.api.extenders import ExtenderSpec
from kopf_scheduler.framework.extenders import wire
from kopf_scheduler.framework.extenders.replay import CURRENT, Replay
from kopf_scheduler.framework.extenders.transport import Endpoint, ExtenderError, ExtenderTransport, endpoint
from kopf_scheduler.framework.interface import SnapshotLister
from kopf_scheduler.framework.node_info import NodeInfo
from kopf_scheduler.framework.pod_info import PodInfo


class HTTPExtender:
    def __init__(self, spec: ExtenderSpec, transport: ExtenderTransport) -> None:
        """Raises ``transport.TLSError`` for unusable TLS settings."""
        self.spec = spec
        #: kube-scheduler names an extender by its URL prefix
        self.name = spec.url_prefix
        self.weight = spec.weight
        self.managed_resources = frozenset(r.name for r in spec.managed_resources)
        self._transport = transport
        self._endpoint: Endpoint = endpoint(spec)

    def __repr__(self) -> str:
        return f"HTTPExtender({self.name})"

    @property
    def is_filter(self) -> bool:
        return bool(self.spec.filter_verb)

    @property
    def is_prioritizer(self) -> bool:
        return bool(self.spec.prioritize_verb)

    @property
    def is_binder(self) -> bool:
        return bool(self.spec.bind_verb)

    @property
    def supports_preemption(self) -> bool:
        return bool(self.spec.preempt_verb)

    @property
    def is_ignorable(self) -> bool:
        return self.spec.ignorable

    def is_interested(self, pod: PodInfo) -> bool:
        if not self.managed_resources:
            return True
        spec = pod.spec
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or ():
                resources = container.get("resources") or {}
                for kind in ("requests", "limits"):
                    if not self.managed_resources.isdisjoint(resources.get(kind) or ()):
                        return True
        return False

    async def _send(self, verb: str, args: Any) -> Any:
        request = wire.encode(args)
        replay = CURRENT.get()
        if replay is None:
            body = await self._transport.post(self._endpoint, verb, request)
        else:  # a replayed cycle: the recorded answer, or the call to make first (``replay``)
            key = Replay.key(self._endpoint.url(verb), verb, request)
            body = replay.answer(key, lambda: self._transport.post(self._endpoint, verb, request))
        try:
            return wire.decode(body)
        except wire.WireError as e:
            raise ExtenderError(f"decoding the {verb} answer of extender {self.name}: {e}") from None

    def _args(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        return wire.extender_args(
            pod.raw,
            [n.node or {"metadata": {"name": n.name}} for n in nodes],
            [n.name for n in nodes],
            self.spec.node_cache_capable,
        )

    async def filter(
        self, pod: PodInfo, nodes: Sequence[NodeInfo]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names of the nodes that pass, failed node -> reason, failed-and-unresolvable node -> reason).

        As upstream: a cache-capable extender's ``NodeNames`` must name input nodes; otherwise the
        returned Node objects count (a non-cache-capable extender's ``NodeNames`` are ignored), and an
        answer with neither passes no node.

        Bounded beyond upstream, which takes any Node objects a non-cache-capable extender returns (nodes
        the filter plugins refused, or none it knows) and records a failure for any name: the nodes passed
        must be among those sent, whichever way they are named, each counts once (so never more than were
        sent), and failures named for nodes not sent are dropped."""
        if not self.is_filter:
            return [n.name for n in nodes], {}, {}
        try:
            result = wire.decode_filter_result(
                await self._send(self.spec.filter_verb, self._args(pod, nodes))
            )
        except wire.WireError as e:
            raise ExtenderError(str(e)) from None
        if result.error:
            raise ExtenderError(result.error)
        if self.spec.node_cache_capable and result.node_names is not None:
            named = result.node_names
        elif result.nodes is not None:
            named = result.nodes
        else:
            named = []
        sent = {n.name for n in nodes}
        for name in named:
            if name not in sent:
                raise ExtenderError(
                    f'extender "{self.name}" claims a filtered node "{name}" which is not found in the '
                    "input node list"
                )
        passed = list(dict.fromkeys(named))
        failed = {n: r for n, r in result.failed.items() if n in sent}
        unresolvable = {n: r for n, r in result.failed_and_unresolvable.items() if n in sent}
        return passed, failed, unresolvable

    async def prioritize(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[list[tuple[str, int]], int]:
        """((host, score 0..10) pairs, weight); nothing and weight 0 without a prioritize verb. Beyond
        upstream, which adds up whatever the list holds, an answer may hold at most one score per node
        sent."""
        if not self.is_prioritizer:
            return [(n.name, 0) for n in nodes], 0
        try:
            scores = wire.decode_host_priorities(
                await self._send(self.spec.prioritize_verb, self._args(pod, nodes))
            )
        except wire.WireError as e:
            raise ExtenderError(str(e)) from None
        if len(scores) > len(nodes):
            raise ExtenderError(
                f"extender {self.name} answered {len(scores)} scores for the {len(nodes)} nodes it was sent"
            )
        return scores, self.weight

    async def bind(self, pod: PodInfo, node_name: str) -> None:
        if not self.is_binder:
            raise ExtenderError("unexpected empty bindVerb in extender")
        args = wire.binding_args(pod.name, pod.namespace, pod.uid, node_name)
        try:
            message = wire.decode_error_result(
                await self._send(self.spec.bind_verb, args), "ExtenderBindingResult"
            )
        except wire.WireError as e:
            raise ExtenderError(str(e)) from None
        if message:
            raise ExtenderError(message)

    async def process_preemption(
        self,
        pod: PodInfo,
        victims: Mapping[str, tuple[list[PodInfo], int]],
        snapshot: SnapshotLister,
    ) -> dict[str, tuple[list[PodInfo], int] | None]:
        """The candidates the extender keeps, node -> (victims, PDB violations); it answers with victim
        UIDs, which must be pods on that node in the snapshot (as upstream checks). A node mapped to null
        stays None.

        Beyond upstream, which takes any pod of the node: the answer may only narrow what it was sent. A
        node must be one of the candidates, each victim one of that candidate's victims and of lower
        priority than ``pod``; else the answer is an ``ExtenderError`` (an extender cannot make
        preemption delete a pod the scheduler would not). A victim named twice counts once, and a node's
        ``NumPDBViolations`` must lie in 0..its victims (it orders the candidates). Upstream's checks come
        first, so where upstream fails too the words are its own."""
        if not self.supports_preemption:
            raise ExtenderError(
                f"preempt verb is not defined for extender {self.name} but run into ProcessPreemption"
            )
        args = wire.preemption_args(
            pod.raw,
            {node: ([p.raw for p in pods], count) for node, (pods, count) in victims.items()},
            self.spec.node_cache_capable,
        )
        try:
            answer = wire.decode_preemption_result(await self._send(self.spec.preempt_verb, args))
        except wire.WireError as e:
            raise ExtenderError(str(e)) from None
        kept: dict[str, tuple[list[PodInfo], int] | None] = {}
        for node_name, meta in answer.items():
            node = snapshot.get(node_name)
            if node is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node_name}"')
            sent = victims.get(node_name)
            not_a_candidate = ExtenderError(
                f"extender: {self.name} claims to preempt on node: {node_name}, which is not a "
                "preemption candidate"
            )
            if meta is None:
                if sent is None:
                    raise not_a_candidate
                kept[node_name] = None
                continue
            by_uid = {p.uid: p for p in node.pods.values()}
            candidates = {p.uid for p in sent[0]} if sent is not None else set()
            pods = []
            for uid in dict.fromkeys(meta.uids):
                found = by_uid.get(uid)
                if found is None:  # upstream's check first, with its words
                    raise ExtenderError(
                        f"extender: {self.name} claims to preempt pod (UID: &{{{uid}}}) on node: "
                        f"{node_name}, but the pod is not found on that node"
                    )
                if sent is None:
                    raise not_a_candidate
                if uid not in candidates:
                    raise ExtenderError(
                        f"extender: {self.name} claims to preempt pod {found.key} (UID: {uid}) on node: "
                        f"{node_name}, but it is not one of that node's preemption victims"
                    )
                if found.priority >= pod.priority:
                    raise ExtenderError(
                        f"extender: {self.name} claims to preempt pod {found.key} (UID: {uid}) on node: "
                        f"{node_name}, but its priority {found.priority} is not lower than the "
                        f"preemptor's {pod.priority}"
                    )
                pods.append(found)
            if sent is None:
                raise not_a_candidate
            if not 0 <= meta.num_pdb_violations <= len(pods):
                raise ExtenderError(
                    f"extender: {self.name} claims {meta.num_pdb_violations} PDB violations for "
                    f"{len(pods)} victim(s) on node: {node_name}"
                )
            kept[node_name] = (pods, meta.num_pdb_violations)
        return kept
