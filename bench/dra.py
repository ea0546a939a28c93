"""Dynamic Resource Allocation objects for SchedulingWithResourceClaimTemplate and ExtendedResource, as
upstream scheduler_perf makes them (``dra/performance-config.yaml``, ``dra/extendedresource/``,
``dra/templates/``, ``dra.go``).

- ``createResourceDriver``: one ResourceSlice per node, named after it, of the driver
  ``test-driver.cdi.k8s.io``, ``nodeName`` the node, pool = the node (one slice), with
  ``maxClaimsPerNode`` devices ``instance-<i>``: attributes ``model`` A100, ``family`` GPU,
  ``driverVersion`` 1.2.3, ``dra.example.com/numa`` i; capacity ``memory`` 1 Gi (``resourceSlice``);
- ``templates/deviceclass.yaml``: DeviceClass ``test-class`` with the CEL selector
  ``device.driver == "test-driver.cdi.k8s.io"``;
- ``templates/resourceclaimtemplate.yaml``: ResourceClaimTemplate ``test-claim-template``, one request
  ``req-0`` for exactly one device of ``test-class``; the measured pods are
  ``templates/pod-with-claim-template.yaml`` (one pause container using the claim ``resource`` made from
  the template by kube-controller-manager's resource-claim controller, as upstream runs that controller
  beside its scheduler).

The initial pods differ from upstream's in how they get there, not in the state they leave: upstream
creates them unscheduled and lets the scheduler allocate their claims before measuring; here, as every
initial pod of this harness, each is created bound (node ``i % nodes``), using a claim ``<pod>-resource``
(``templates/resourceclaim.yaml``'s spec) that the harness allocates as the scheduler would have: device
``instance-<i // nodes>`` of that node's pool, the node selector ``metadata.name`` of the node, the
scheduler's finalizer ``resource.kubernetes.io/delete-protection``, and reserved for the pod. So the
measured pods find as many devices taken as upstream's do (upstream's counts fill the cluster exactly).

ExtendedResource (``dra/extendedresource``, ``Explicit_25classes``): the same slices, plus ``classes``
DeviceClasses ``test-class-<k>`` (``templates/deviceclass-extended-resource.yaml``: the same selector and
``extendedResourceName: example.com/gpu-<k>``); measured pod ``i`` asks for one ``example.com/gpu-<i mod
classes>`` (``templates/pod-with-extended-resource.yaml``), a resource no node advertises, so the scheduler
allocates a device for it and creates the pod's claim itself (no controller). The initial pods take their
devices through claims allocated by the harness as above (upstream's initial pods ask for the extended
resource too; the devices they leave taken are the same).
"""

from __future__ import annotations

from typing import Any

from bench.objects import Extras, Setup

DRIVER = "test-driver.cdi.k8s.io"
DEVICE_CLASS = "test-class"
CLAIM_TEMPLATE = "test-claim-template"
REQUEST = "req-0"
#: the pod's name for its claim (``spec.resourceClaims[].name``)
POD_CLAIM = "resource"
#: the label upstream's node-with-dra-test-driver.yaml sets
DRA_NODE_LABEL = "node-with-dra"
FINALIZER = "resource.kubernetes.io/delete-protection"
RESOURCE = "/apis/resource.k8s.io/v1"
#: ExtendedResource's resource names: ``example.com/gpu-<k>``, one per class ``test-class-<k>``
EXTENDED_RESOURCE = "example.com/gpu"


def init_claim_name(pod_name: str) -> str:
    return f"{pod_name}-{POD_CLAIM}"


def resource_slice(node: str, devices: int) -> dict[str, Any]:
    """upstream's ``resourceSlice(driverName, nodeName, capacity)``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def device_class(name: str = DEVICE_CLASS, extended_resource: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended_resource is not None:
        spec["extendedResourceName"] = extended_resource
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def extended_resource(index: int, classes: int) -> str:
    """The resource measured pod ``index`` asks for (``{{.class}}-{{Mod .Index .classes}}``)."""
    return f"{EXTENDED_RESOURCE}-{index % classes}"


def claim_spec() -> dict[str, Any]:
    return {"devices": {"requests": [{"name": REQUEST, "exactly": {"deviceClassName": DEVICE_CLASS}}]}}


def claim_template() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CLAIM_TEMPLATE},
        "spec": {"spec": claim_spec()},
    }


def init_claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "finalizers": [FINALIZER]},
        "spec": claim_spec(),
    }


def allocation(node: str, device: str, pod: str, pod_uid: str) -> dict[str, Any]:
    """The status the scheduler writes: one device of the node's pool, the node, the pod."""
    selector = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "allocation": {
            "devices": {"results": [{"request": REQUEST, "driver": DRIVER, "pool": node, "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [selector]},
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": pod_uid}],
    }


class StructuredResources(Extras):
    """The driver's slices, the class, the template, and the initial pods' allocated claims; with
    ``extended_classes``, also that many classes mapping ``example.com/gpu-<k>`` (ExtendedResource)."""

    def __init__(self, devices_per_node: int, extended_classes: int = 0) -> None:
        self.devices_per_node = devices_per_node
        self.extended_classes = extended_classes

    async def before_pods(self, setup: Setup) -> None:
        loader = setup.loader
        if len(setup.init_pods) > len(setup.nodes) * self.devices_per_node:
            raise ValueError("more initial pods than devices")
        await loader.create(f"{RESOURCE}/deviceclasses", device_class())
        for k in range(self.extended_classes):
            resource = extended_resource(k, self.extended_classes)
            await loader.create(f"{RESOURCE}/deviceclasses", device_class(f"{DEVICE_CLASS}-{k}", resource))
        await loader.each(
            setup.nodes,
            lambda node: loader.create(
                f"{RESOURCE}/resourceslices", resource_slice(node, self.devices_per_node)
            ),
        )
        for namespace in (setup.init_namespace, setup.measured_namespace):
            await loader.create(f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates", claim_template())
        claims = f"{RESOURCE}/namespaces/{setup.init_namespace}/resourceclaims"
        await loader.each(
            setup.init_pods, lambda pod: loader.create(claims, init_claim(init_claim_name(pod)))
        )

    async def after_init_pods(self, setup: Setup) -> None:
        loader = setup.loader
        listed = await loader.request("GET", f"/api/v1/namespaces/{setup.init_namespace}/pods")
        uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in listed["items"]}
        claims = f"{RESOURCE}/namespaces/{setup.init_namespace}/resourceclaims"
        nodes = len(setup.nodes)

        async def allocate(i: int) -> None:
            pod = setup.init_pods[i]
            node, device = setup.nodes[i % nodes], f"instance-{i // nodes}"
            status = allocation(node, device, pod, uids[pod])
            await loader.patch_status(f"{claims}/{init_claim_name(pod)}", status)

        await loader.each(range(len(setup.init_pods)), allocate)

    async def check(self, setup: Setup) -> list[str]:
        """Every measured pod's claim is allocated one device of its node's pool and reserved for it, and
        no device is allocated twice."""
        loader, problems = setup.loader, []
        ns = setup.measured_namespace
        pods = (await loader.request("GET", f"/api/v1/namespaces/{ns}/pods"))["items"]
        claims: dict[tuple[str, str], dict[str, Any]] = {}
        for namespace in (setup.init_namespace, ns):
            listed = await loader.request("GET", f"{RESOURCE}/namespaces/{namespace}/resourceclaims")
            claims.update({(namespace, c["metadata"]["name"]): c for c in listed["items"]})
        owners: dict[tuple[str, str], str] = {}
        for (_, name), claim in claims.items():
            results = (
                ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
            )
            for result in results:
                device = (result["pool"], result["device"])
                if device in owners:
                    problems.append(f"device {device} allocated to {owners[device]} and {name}")
                owners[device] = name
        for pod in pods:
            name, node = pod["metadata"]["name"], pod["spec"].get("nodeName")
            claim_name = _pod_claim_name(pod)
            used = claims.get((ns, claim_name or ""))
            status = (used or {}).get("status") or {}
            results = (status.get("allocation") or {}).get("devices", {}).get("results", [])
            reserved = {r.get("uid") for r in status.get("reservedFor") or []}
            if used is None:
                problems.append(f"pod {name}: no claim")
            elif len(results) != 1 or results[0]["pool"] != node or results[0]["driver"] != DRIVER:
                problems.append(f"pod {name} on {node}: claim {claim_name} allocated {results}")
            elif pod["metadata"]["uid"] not in reserved:
                problems.append(f"pod {name}: claim {claim_name} not reserved for it")
        return problems


def _pod_claim_name(pod: dict[str, Any]) -> str | None:
    """The claim the pod's devices are in: the one made from its template (``resourceClaimStatuses``), or
    the one the scheduler made for its extended resource (``extendedResourceClaimStatus``)."""
    status = pod.get("status") or {}
    extended = status.get("extendedResourceClaimStatus")
    if extended:
        name = extended.get("resourceClaimName")
        return name if isinstance(name, str) else None
    statuses = status.get("resourceClaimStatuses") or []
    return next((s.get("resourceClaimName") for s in statuses if s["name"] == POD_CLAIM), None)
