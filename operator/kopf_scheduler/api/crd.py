"""Generates the SchedulingProfile CRD from ``schema.SPEC_SCHEMA`` (the one source of the schema).

``python -m kopf_scheduler.api.crd > crds/schedulingprofile.yaml`` writes it; a test checks that the
committed file is what this module generates. The JSON schema is converted into a structural OpenAPI v3
schema: numeric ``exclusiveMinimum`` becomes ``minimum`` + ``exclusiveMinimum: true``;
``additionalProperties: false`` is dropped (the API server prunes unknown fields instead, and
``kubectl`` reports them); lists keyed by plugin name become ``x-kubernetes-list-type: map`` so
duplicates are rejected by the API server itself. ``crd_rules.py`` then adds the CEL rules the API server
checks at admission (numeric bounds, the queue sort, extenders), with the model's messages.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from kopf_scheduler.api.crd_rules import attach
from kopf_scheduler.api.schema import GROUP, KIND, PLURAL, SHORT_NAMES, SINGULAR, SPEC_SCHEMA, VERSION


def _structural(node: Any, key: str = "") -> Any:
    if isinstance(node, list):
        return [_structural(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "additionalProperties" and v is False:
            continue
        if k == "exclusiveMinimum" and not isinstance(v, bool):
            out["minimum"] = v
            out["exclusiveMinimum"] = True
            continue
        out[k] = _structural(v, k)
    if out.get("type") == "array" and key in ("enabled", "disabled", "pluginConfig"):
        out["x-kubernetes-list-type"] = "map"
        out["x-kubernetes-list-map-keys"] = ["name"]
    return out


_CONDITION = {
    "type": "object",
    "description": "A condition of the profile (Accepted).",
    "required": ["type", "status"],
    "properties": {
        "type": {"type": "string", "description": "The condition's type: Accepted."},
        "status": {
            "type": "string",
            "enum": ["True", "False", "Unknown"],
            "description": "True when the profile serves; False when it was refused (the last good "
            "profile serves on).",
        },
        "reason": {"type": "string", "description": "A CamelCase word for why (Accepted, Invalid, ...)."},
        "message": {"type": "string", "description": "One line naming the field at fault, when refused."},
        "observedGeneration": {
            "type": "integer",
            "format": "int64",
            "description": "The generation of the spec the condition is about.",
        },
        "lastTransitionTime": {
            "type": "string",
            "format": "date-time",
            "description": "When the status last changed.",
        },
    },
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What the operator made of the profile.",
    "properties": {
        "observedGeneration": {
            "type": "integer",
            "format": "int64",
            "description": "The generation of the spec the operator last read.",
        },
        "conditions": {
            "description": "Whether the profile serves (Accepted) and why not.",
            "type": "array",
            "items": _CONDITION,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
        "effectivePlugins": {
            "type": "object",
            "description": "The plugins that run at each extension point after merging with the defaults.",
            "x-kubernetes-preserve-unknown-fields": True,
        },
    },
}


def crd() -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": SHORT_NAMES,
            },
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Scheduler", "type": "string", "jsonPath": ".spec.schedulerName"},
                        {
                            "name": "Accepted",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Accepted")].status',
                        },
                        {"name": "Observed", "type": "integer", "jsonPath": ".status.observedGeneration"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "How kopf-scheduler schedules pods with this spec.schedulerName.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string", "description": "kopf-scheduler.io/v1alpha1"},
                                "kind": {"type": "string", "description": "SchedulingProfile"},
                                "metadata": {"type": "object"},
                                "spec": attach(_structural(SPEC_SCHEMA)),
                                "status": STATUS_SCHEMA,
                            },
                        }
                    },
                }
            ],
        },
    }


def render() -> str:
    header = (
        "# Generated by `python -m kopf_scheduler.api.crd` from kopf_scheduler/api/schema.py; do not edit.\n"
    )
    return header + yaml.safe_dump(crd(), sort_keys=False, width=120)


if __name__ == "__main__":
    sys.stdout.write(render())
