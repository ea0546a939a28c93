"""The JSON schema of a SchedulingProfile's ``spec``: the one source for the operator's validation and for
the CRD's structural OpenAPI schema (``crd.py`` converts it; ``crds/`` holds the generated file).

Plugin ``args`` stay open objects here: each plugin validates its own arguments.
"""

from __future__ import annotations

from typing import Any

GROUP = "kopf-scheduler.io"
VERSION = "v1alpha1"
KIND = "SchedulingProfile"
PLURAL = "schedulingprofiles"
SINGULAR = "schedulingprofile"
SHORT_NAMES = ["sprof"]

EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
PLUGIN_SET_FIELDS = ("multiPoint", *EXTENSION_POINTS)

_NAME = {"type": "string", "minLength": 1, "maxLength": 253}

_PLUGIN = {
    "type": "object",
    "description": "A plugin by name; weight applies to score plugins only.",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": _NAME,
        "weight": {"type": "integer", "exclusiveMinimum": 0, "maximum": 100},
    },
}

_PLUGIN_SET = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "enabled": {"type": "array", "items": _PLUGIN, "maxItems": 64},
        "disabled": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": _NAME},
            },
        },
    },
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schedulerName"],
    "additionalProperties": False,
    "properties": {
        "schedulerName": {
            "type": "string",
            "minLength": 1,
            "maxLength": 253,
            "description": "Pods with this spec.schedulerName are scheduled with this profile.",
        },
        "percentageOfNodesToScore": {
            "type": "integer",
            "minimum": 0,
            "maximum": 100,
            "description": "Share of nodes to find feasible before scoring; 0 or absent means adaptive.",
        },
        "plugins": {
            "type": "object",
            "additionalProperties": False,
            "properties": {point: _PLUGIN_SET for point in PLUGIN_SET_FIELDS},
        },
        "pluginConfig": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": _NAME,
                    "args": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        },
    },
}
