"""A seeded random DRA cluster for the side-by-side comparison in ``test_operator_dynamic_resources``:
ResourceSlices, DeviceClasses, DeviceTaintRules, ResourceClaims and the pods that use them, drawn with
what Kubernetes 1.37's DRA has (with kube-apiserver's default feature gates):

- device taints in the slices (``NoSchedule``, ``NoExecute`` or ``None``, which keeps no device from a
  claim) and DeviceTaintRules tainting chosen devices, and requests that tolerate some of them
  (``Exists`` or ``Equal``, one effect or all);
- prioritized lists (``firstAvailable``) of two or three subrequests, some unsatisfiable;
- partitionable devices: a counter set (``sharedCounters``, in a slice of its own in the node's pool) and
  a whole device, two halves and four quarters consuming its counters;
- consumable capacity: devices that allow multiple allocations, with a ``requestPolicy`` (none, a valid
  range or valid values) and requests of capacity;
- per-device node selection (``DRAPartitionableDevices``, beta and on): one slice without a node,
  ``perDeviceNodeSelection: true``, whose ``remote`` devices say each where they are (``nodeName`` of a
  pinned pods' node, a ``nodeSelector`` naming two of them, or ``allNodes``);
- admin access: ``exactly`` requests with ``adminAccess: true`` (``DRAAdminAccess``, GA; the namespace
  needs the label ``resource.kubernetes.io/admin-access: "true"``), which may be given devices allocated
  to others;
- pods asking for ``example.com/rnd``, which the DeviceClass ``rnd-ext`` stands for
  (``extendedResourceName``): the scheduler makes their claim;
- ``All`` and counted requests, selectors, ``matchAttribute`` constraints.

Each node has a pool of its own (the driver ``rnd.e2e.example``, pool named after the node); of the
pinned pods' nodes, one also has a pool of a second driver (``aux.e2e.example``, whose devices publish
their attributes and capacity in the first driver's domain), one a second pool of the first driver
(``extra-<node>``), one its pool's devices in two slices whose names sort the other way round. The
structured allocator's choice of devices stays deterministic: pools by driver, then pool name (the
remote pool among them), slices by name, devices in order; so the devices each pod gets can be compared
exactly. Pods are pinned to one node each (``kubernetes.io/hostname``), except the score pods: each
comes first on a pair of nodes of its own, identical but for their devices (one kind on each), and asks
for both kinds in a random order (``firstAvailable``), so DynamicResources' Score alone decides which
node it gets (remote devices with ``allNodes`` are on both, and no score pod asks for them).

Not drawn: DRADeviceCompatibilityGroups, DRAListTypeAttributes and DRADerivedAttributes (alpha, off by
default in 1.37, and the comparison's clusters keep the defaults).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

DRIVER = "rnd.e2e.example"
#: a second driver on some nodes: its name sorts before ``DRIVER``'s, so its pool comes first
AUX_DRIVER = "aux.e2e.example"
EXTENDED = "example.com/rnd"
API = "resource.k8s.io/v1"
KINDS = ("plain", "part", "share")
#: the kind of the devices in the slice with per-device node selection, and its pool
REMOTE = "remote"
REMOTE_POOL = "rnd-remote"
TAINT_KEYS = ("example.com/unhealthy", "example.com/maintenance")
EFFECTS = ("NoSchedule", "NoExecute", "None")
HOSTNAME = "kubernetes.io/hostname"
#: the label a namespace needs for claims with ``adminAccess`` (kube-apiserver refuses them without)
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
#: (driver, pool, device)
Located = tuple[str, str, dict[str, Any]]
#: pods pinned to one node each, after the score pods
PINNED_PODS = 30


@dataclass
class RandomCluster:
    """Everything one seed draws; created in the order of the fields."""

    seed: int
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    rules: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    #: pod bodies in creation order
    pods: list[dict[str, Any]] = field(default_factory=list)
    #: score pod -> the node DynamicResources' Score makes the unique best one (None: fits neither)
    score_winners: dict[str, str | None] = field(default_factory=dict)


def attr(name: str) -> str:
    return f'device.attributes["{DRIVER}"].{name}'


def kind_selector(kind: str) -> dict[str, Any]:
    return {"cel": {"expression": f'{attr("kind")} == "{kind}"'}}


def device_classes() -> list[dict[str, Any]]:
    """``rnd`` and ``rnd-big`` take the devices of both drivers (the second one's publish their attributes
    and capacity in ``DRIVER``'s domain), ``rnd-ext`` those of ``DRIVER`` only."""
    driver = f'device.driver == "{DRIVER}"'
    either = f'({driver} || device.driver == "{AUX_DRIVER}")'
    big = f'{either} && device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    specs = {
        "rnd": {"selectors": [{"cel": {"expression": either}}]},
        "rnd-big": {"selectors": [{"cel": {"expression": big}}]},
        "rnd-ext": {"extendedResourceName": EXTENDED, "selectors": [{"cel": {"expression": driver}}]},
    }
    return [
        {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": n}, "spec": s}
        for n, s in specs.items()
    ]


def taint(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"key": rng.choice(TAINT_KEYS), "effect": rng.choice(EFFECTS)}
    if rng.random() < 0.5:
        out["value"] = "true"
    return out


def toleration(rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {"key": rng.choice(TAINT_KEYS)}
    if rng.random() < 0.5:
        out |= {"operator": "Equal", "value": "true"}
    else:
        out["operator"] = "Exists"
    if rng.random() < 0.7:
        out["effect"] = rng.choice(EFFECTS)
    return out


def plain_device(
    rng: random.Random, index: int, taints: bool, *, kind: str = "plain", domain: str = ""
) -> dict[str, Any]:
    """A device of ``kind`` taken whole; ``domain``: the one its attribute and capacity names carry."""
    prefix = f"{domain}/" if domain else ""
    device: dict[str, Any] = {
        "name": f"{kind}-{index}",
        "attributes": {
            f"{prefix}kind": {"string": kind},
            f"{prefix}group": {"string": f"g{rng.randint(0, 1)}"},
        },
        "capacity": {f"{prefix}memory": {"value": rng.choice(("16Gi", "80Gi"))}},
    }
    if taints and rng.random() < 0.3:
        device["taints"] = [taint(rng)]
    return device


def part_devices(rng: random.Random, taints: bool) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A counter set of 40Gi and 4 slices, and the devices that take it whole, by halves, by quarters."""
    counters = {"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}, "slices": {"value": "4"}}}
    shapes = [("gpu-0", "40Gi", "4")]
    shapes += [(f"gpu-0-half-{i}", "20Gi", "2") for i in range(2)]
    if rng.random() < 0.5:
        shapes += [(f"gpu-0-quarter-{i}", "10Gi", "1") for i in range(4)]
    devices = []
    for name, memory, slices in shapes:
        device: dict[str, Any] = {
            "name": name,
            "attributes": {"kind": {"string": "part"}, "group": {"string": "g0"}},
            "capacity": {"memory": {"value": memory}},
            "consumesCounters": [
                {
                    "counterSet": "gpu-0",
                    "counters": {"memory": {"value": memory}, "slices": {"value": slices}},
                }
            ],
        }
        if taints and rng.random() < 0.2:
            device["taints"] = [taint(rng)]
        devices.append(device)
    return counters, devices


def share_device(rng: random.Random, index: int, taints: bool) -> dict[str, Any]:
    memory: dict[str, Any] = {"value": rng.choice(("8Gi", "10Gi"))}
    policy = rng.choice(("none", "range", "values"))
    if policy == "range":
        memory["requestPolicy"] = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    elif policy == "values":
        memory["requestPolicy"] = {"default": "2Gi", "validValues": ["2Gi", "4Gi", "8Gi"]}
    device: dict[str, Any] = {
        "name": f"share-{index}",
        "allowMultipleAllocations": True,
        "attributes": {"kind": {"string": "share"}, "group": {"string": f"g{rng.randint(0, 1)}"}},
        "capacity": {"memory": memory},
    }
    if taints and rng.random() < 0.2:
        device["taints"] = [taint(rng)]
    return device


def slice_body(name: str, driver: str, pool: str, count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            **spec,
        },
    }


#: what a pinned pods' node has besides its pool (``node_slices``)
VARIANTS = ("aux", "extra", "split", "")


def node_slices(
    rng: random.Random, node: str, kinds: tuple[str, ...], pinned: bool, variant: str = ""
) -> tuple[list[dict[str, Any]], list[Located]]:
    """The node's pools (their slices) and their devices. The pinned pods' nodes (``pinned``) have
    tainted devices, and by ``variant`` a second pool of plain devices, of ``AUX_DRIVER`` (``aux``) or of
    ``DRIVER`` with a name that sorts first (``extra``), or their pool's devices in two slices whose names
    sort the other way round (``split``)."""
    devices: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []
    if "plain" in kinds:
        devices += [plain_device(rng, i, pinned) for i in range(rng.randint(1, 3))]
    if "part" in kinds:
        counter_set, parts = part_devices(rng, pinned)
        counters.append(counter_set)
        devices += parts
    if "share" in kinds:
        devices += [share_device(rng, i, pinned) for i in range(rng.randint(1, 2))]
    parts_of = [devices]
    if variant == "split" and len(devices) > 1:
        cut = rng.randint(1, len(devices) - 1)
        parts_of = [devices[:cut], devices[cut:]]
    count = len(parts_of) + (1 if counters else 0)
    on_node = {"nodeName": node}
    names = ["devices"] if len(parts_of) == 1 else ["devices-b", "devices-a"]  # the second one first
    slices = [
        slice_body(f"{node}-{name}", DRIVER, node, count, **on_node, devices=part)
        for name, part in zip(names, parts_of, strict=True)
    ]
    if counters:
        slices.append(slice_body(f"{node}-counters", DRIVER, node, count, **on_node, sharedCounters=counters))
    located: list[Located] = [(DRIVER, node, d) for d in devices]
    if variant in ("aux", "extra"):
        driver, pool = (AUX_DRIVER, node) if variant == "aux" else (DRIVER, f"extra-{node}")
        domain = DRIVER if driver != DRIVER else ""
        extra = [plain_device(rng, i, True, domain=domain) for i in range(rng.randint(1, 2))]
        slices.append(slice_body(f"{pool}-{driver}", driver, pool, 1, **on_node, devices=extra))
        located += [(driver, pool, d) for d in extra]
    return slices, located


def remote_slice(rng: random.Random, nodes: list[str]) -> tuple[dict[str, Any], list[Located]]:
    """A slice with ``perDeviceNodeSelection`` (pool ``REMOTE_POOL``): devices of the kind ``REMOTE``,
    one seen by one of ``nodes`` (``nodeName``), one by two of them (``nodeSelector``), one by every node
    (``allNodes``), one more of any of these."""
    how = ["nodeName", "nodeSelector", "allNodes"]
    rng.shuffle(how)
    how += rng.sample(how, rng.randint(0, 1))
    devices = []
    for i, where in enumerate(how):
        device = plain_device(rng, i, True, kind=REMOTE)
        if where == "nodeName":
            device["nodeName"] = rng.choice(nodes)
        elif where == "nodeSelector":
            term = {"key": HOSTNAME, "operator": "In", "values": sorted(rng.sample(nodes, 2))}
            device["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
        else:
            device["allNodes"] = True
        devices.append(device)
    body = slice_body(REMOTE_POOL, DRIVER, REMOTE_POOL, 1, perDeviceNodeSelection=True, devices=devices)
    return body, [(DRIVER, REMOTE_POOL, d) for d in devices]


def sees(device: dict[str, Any], node: str) -> bool:
    """Whether a device of the slice with per-device node selection is there for ``node``."""
    if device.get("allNodes"):
        return True
    if "nodeName" in device:
        return bool(device["nodeName"] == node)
    return node in device["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]


def request_body(
    rng: random.Random, kind: str, *, for_score: bool = False, exactly: bool = False
) -> dict[str, Any]:
    """An ``exactly`` request (or subrequest, without its name) for devices of ``kind``; ``exactly``: not
    a subrequest, so it may ask for admin access (devices allocated to others too)."""
    body: dict[str, Any] = {"deviceClassName": "rnd-big" if not for_score and rng.random() < 0.1 else "rnd"}
    body["selectors"] = [kind_selector(kind)]
    if for_score:
        if kind == "share":
            body["capacity"] = {"requests": {"memory": "1Gi"}}
        return body
    if kind == "part" and rng.random() < 0.5:
        size = rng.choice(("10Gi", "20Gi", "40Gi"))
        expression = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{size}")) == 0'
        body["selectors"].append({"cel": {"expression": expression}})
    if kind == "share" and rng.random() < 0.8:
        body["capacity"] = {"requests": {"memory": rng.choice(("1Gi", "2Gi", "2.5Gi", "3Gi", "4Gi", "9Gi"))}}
    roll = rng.random()
    if roll < 0.1:
        body["allocationMode"] = "All"
    elif roll < 0.35:
        body["count"] = 2
    if rng.random() < 0.4:
        body["tolerations"] = [toleration(rng) for _ in range(rng.randint(1, 2))]
    if exactly and rng.random() < 0.2:
        body["adminAccess"] = True
    return body


def claim_spec(rng: random.Random, kinds: tuple[str, ...], remote: bool) -> dict[str, Any]:
    """One or two requests, each for a kind the node has (mostly; ``remote``: the node sees devices of
    the slice with per-device node selection), some as prioritized lists."""

    def pick() -> str:
        roll = rng.random()
        if remote and roll < 0.2:
            return REMOTE
        return rng.choice(kinds) if kinds and roll < 0.85 else rng.choice((*KINDS, REMOTE))

    requests: list[dict[str, Any]] = []
    for r in range(1 if rng.random() < 0.7 else 2):
        if rng.random() < 0.6:
            requests.append({"name": f"r{r}", "exactly": request_body(rng, pick(), exactly=True)})
        else:
            subs = [{"name": f"s{s}", **request_body(rng, pick())} for s in range(rng.randint(2, 3))]
            requests.append({"name": f"r{r}", "firstAvailable": subs})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.2:
        devices["constraints"] = [{"matchAttribute": f"{DRIVER}/group"}]
    return {"devices": devices}


def pod_body(name: str, namespace: str, *, claim: bool, extended: int = 0) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "100m"}
    resources: dict[str, Any] = {"requests": requests}
    if extended:  # extended resources cannot be overcommitted: the limit equals the request
        requests[EXTENDED] = str(extended)
        resources["limits"] = {EXTENDED: str(extended)}
    spec: dict[str, Any] = {
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10", "resources": resources}]
    }
    if claim:
        spec["resourceClaims"] = [{"name": "devices", "resourceClaimName": name}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def generate(seed: int, pairs: list[tuple[str, str]], nodes: list[str], namespace: str) -> RandomCluster:
    """The cluster ``seed`` draws over score node ``pairs`` and the other ``nodes``."""
    rng = random.Random(seed)
    out = RandomCluster(seed, classes=device_classes())
    kinds_of: dict[str, tuple[str, ...]] = {}
    devices_of: dict[str, list[Located]] = {}

    def claim(name: str, spec: dict[str, Any]) -> None:
        out.claims.append(
            {
                "apiVersion": API,
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": spec,
            }
        )

    for p, (first, second) in enumerate(pairs):
        pair_kinds = rng.sample(KINDS, 2)
        for node, kind in zip((first, second), pair_kinds, strict=True):
            slices, devices_of[node] = node_slices(rng, node, (kind,), pinned=False)
            out.slices += slices
            kinds_of[node] = (kind,)
        order = rng.sample(pair_kinds, 2)
        subs = [{"name": f"s{i}", **request_body(rng, k, for_score=True)} for i, k in enumerate(order)]
        if rng.random() < 0.3:  # a first choice no node has
            subs.insert(0, {"name": "none", "deviceClassName": "rnd", "selectors": [kind_selector("none")]})
        name = f"score-{p}"
        claim(name, {"devices": {"requests": [{"name": "r0", "firstAvailable": subs}]}})
        pod = pod_body(name, namespace, claim=True)
        term = {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [first, second]}
            ]
        }
        pod["spec"]["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
        out.pods.append(pod)
        out.score_winners[name] = first if order[0] == pair_kinds[0] else second
    variants = list(VARIANTS[: len(nodes)]) + [rng.choice(VARIANTS) for _ in nodes[len(VARIANTS) :]]
    rng.shuffle(variants)
    for node, variant in zip(nodes, variants, strict=True):
        kinds = tuple(k for k in KINDS if rng.random() < 0.6) or (rng.choice(KINDS),)
        slices, devices_of[node] = node_slices(rng, node, kinds, pinned=True, variant=variant)
        out.slices += slices
        if "plain" not in kinds and any(d["name"].startswith("plain-") for _, _, d in devices_of[node]):
            kinds += ("plain",)  # a second pool's
        kinds_of[node] = kinds
    remote, remote_devices = remote_slice(rng, nodes)
    out.slices.append(remote)
    # the devices with allNodes are there for the score pods' nodes too
    remote_for = {n for n in kinds_of if any(sees(d, n) for _, _, d in remote_devices)}
    for r in range(rng.randint(1, 3)):  # rules tainting chosen devices of the pinned pods' nodes
        candidates = remote_devices if rng.random() < 0.25 else devices_of[rng.choice(nodes)]
        if not candidates:
            continue
        driver, pool, device = rng.choice(candidates)
        selector: dict[str, Any] = {"driver": driver, "pool": pool}
        if rng.random() < 0.8:
            selector["device"] = device["name"]
        out.rules.append(
            {
                "apiVersion": API,
                "kind": "DeviceTaintRule",
                "metadata": {"name": f"rnd-rule-{r}"},
                "spec": {"deviceSelector": selector, "taint": taint(rng)},
            }
        )
    # the pinned pods' nodes, with more pools and kinds, twice as likely
    everywhere = [node for pair in pairs for node in pair] + 2 * list(nodes)
    for p in range(PINNED_PODS):
        node = rng.choice(everywhere)
        name = f"rnd-{p}"
        if rng.random() < 0.25:
            pod = pod_body(name, namespace, claim=False, extended=rng.randint(1, 2))
        else:
            claim(name, claim_spec(rng, kinds_of[node], node in remote_for))
            pod = pod_body(name, namespace, claim=True)
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        out.pods.append(pod)
    return out
