"""`kopf-scheduler simulate` with Dynamic Resource Allocation: the resource-claim controller's claims
for claim templates, the devices each claim gets on the chosen node (JSON and --explain), a pod whose
template is missing (it waits, with upstream's message), a selector that fails (upstream's error text,
the run goes on), and devices never given twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from simulate_runner import run_cli

DRIVER = "gpu.example.com"


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def gpu_slice(node_name: str, model: str, memory: str) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "pcieRoot": {"string": f"pci{i // 2}"}},
            "capacity": {"memory": {"value": memory}},
        }
        for i in range(4)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-gpus"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class(name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def template(name: str, device_class_name: str, **exactly: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name, **exactly}}]
        }
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": spec},
    }


def pod(name: str, second: int, template_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "creationTimestamp": f"2026-01-01T00:00:{second:02d}Z",
        },
        "spec": {
            "containers": [{"name": "c", "image": "app"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
        },
    }


def cluster(tmp_path: Path) -> Path:
    objects = [
        node("n1"),
        node("n2"),
        node("n3"),
        gpu_slice("n1", "a100", "80Gi"),
        gpu_slice("n2", "t4", "16Gi"),
        gpu_slice("n3", "t4", "16Gi"),
        device_class("gpu", f'device.driver == "{DRIVER}"'),
        device_class("big", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'),
        device_class("broken", f'device.attributes["{DRIVER}"].vendor == "x"'),
        template("two", "gpu", count=2),
        template("big", "big"),
        template("all", "gpu", allocationMode="All"),
        template("broken", "broken"),
        template("five", "gpu", count=5),
        pod("big", 1, "big"),
        pod("all", 2, "all"),
        pod("two-a", 3, "two"),
        pod("two-b", 4, "two"),
        pod("broken", 5, "broken"),
        pod("missing", 6, "missing"),
        pod("five", 7, "five"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


def test_devices_per_claim_in_json(tmp_path: Path) -> None:
    done = run_cli("--cluster", str(cluster(tmp_path)), "--output", "json", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    pods = {p["name"]: p for p in json.loads(done.stdout)["pods"]}
    taken: dict[tuple[str, str], str] = {}
    for name in ("big", "all", "two-a", "two-b"):
        entry = pods[name]
        assert entry["node"], entry
        (claim,) = entry["resourceClaims"]
        assert claim["claim"].startswith(f"{name}-gpu-") and len(claim["claim"]) == len(name) + 10
        for device in claim["devices"]:
            assert device["pool"] == entry["node"] and device["driver"] == DRIVER
            key = (device["pool"], device["device"])
            assert key not in taken, f"{key} to {taken.get(key)} and {name}"
            taken[key] = name
    assert len(pods["two-a"]["resourceClaims"][0]["devices"]) == 2
    assert pods["big"]["node"] == "n1"  # only the a100s have 40Gi or more
    assert len(pods["all"]["resourceClaims"][0]["devices"]) == 4
    assert pods["broken"]["node"] is None
    assert pods["broken"]["message"] == (
        'running "DynamicResources" filter plugin: '
        "class broken: selector #0 on device gpu.example.com/n1/gpu-3: CEL runtime error: no such key: "
        "vendor. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with "
        "has() for optional fields"
    )
    assert pods["missing"] == {
        "namespace": "default",
        "name": "missing",
        "node": None,
        "message": 'pod "default/missing": ResourceClaim not created yet',
        "resourceClaims": [{"name": "gpu", "claim": None, "devices": []}],
    }
    assert pods["five"]["message"] == (
        "0/3 nodes are available: 3 cannot allocate all claims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_explain_shows_the_devices(tmp_path: Path) -> None:
    done = run_cli("--cluster", str(cluster(tmp_path)), "--explain", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "  claim gpu: big-gpu-" in done.stdout
    assert f"-> {DRIVER}/n1/" in done.stdout
    assert "filtered out by DynamicResources: cannot allocate all claims" in done.stdout


def test_explain_names_the_device_taint_that_kept_a_claim_off_a_node(tmp_path: Path) -> None:
    """A node whose devices are tainted (the driver's own taint, a DeviceTaintRule's) is filtered out for
    a claim that does not tolerate them, and --explain says which device had which taint; in JSON the
    node's filter verdict lists them under ``deviceTaints``."""
    tainted = gpu_slice("n1", "a100", "80Gi")
    for device in tainted["spec"]["devices"]:
        device["taints"] = [{"key": "example.com/unhealthy", "value": "true", "effect": "NoSchedule"}]
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "n2-gpu-0"},
        "spec": {
            "deviceSelector": {"driver": DRIVER, "pool": "n2", "device": "gpu-0"},
            "taint": {"key": "example.com/maintenance", "effect": "NoExecute"},
        },
    }
    objects = [
        node("n1"),
        node("n2"),
        tainted,
        gpu_slice("n2", "t4", "16Gi"),
        rule,
        device_class("gpu", f'device.driver == "{DRIVER}"'),
        template("four", "gpu", count=4),
        pod("four", 1, "four"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    done = run_cli("--cluster", str(path), "--explain", "--seed", "1")
    assert done.returncode == 0, done.stderr
    assert "four  <none>  0/2 nodes are available: 2 cannot allocate all claims." in done.stdout
    lines = done.stdout.splitlines()
    at = lines.index("  n1: filtered out by DynamicResources: cannot allocate all claims")
    claim = next(line for line in lines if line.startswith("  claim gpu: ")).split()[2]
    assert lines[at + 1 : at + 5] == [
        f"    claim default/{claim}, request gpu: device {DRIVER}/n1/gpu-{i} has taint "
        "example.com/unhealthy=true:NoSchedule, not tolerated"
        for i in range(4)
    ]
    at = lines.index("  n2: filtered out by DynamicResources: cannot allocate all claims")
    assert lines[at + 1 :][:2] == [
        f"    claim default/{claim}, request gpu: device {DRIVER}/n2/gpu-0 has taint "
        "example.com/maintenance:NoExecute, not tolerated",
        "",
    ]
    done = run_cli("--cluster", str(path), "--explain", "--output", "json", "--seed", "1")
    (entry,) = json.loads(done.stdout)["pods"]
    assert entry["nodes"]["n2"]["filter"] == {
        "plugin": "DynamicResources",
        "reason": "cannot allocate all claims",
        "deviceTaints": [
            f"claim default/{claim}, request gpu: device {DRIVER}/n2/gpu-0 has taint "
            "example.com/maintenance:NoExecute, not tolerated"
        ],
    }
