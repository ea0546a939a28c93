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

_STRING = {"type": "string"}
_BOOLEAN = {"type": "boolean"}
_PEM_DATA = {"type": "string", "format": "byte", "description": "PEM data, base64-encoded."}
_TLS_FILE = {
    "type": "string",
    "description": "A PEM file in the operator's extender TLS directory (--extender-tls-dir, default "
    "/etc/kopf-scheduler/extender-tls); a relative path is taken from there.",
}

#: kube-scheduler's ``Extender`` (``kubescheduler.config.k8s.io/v1``); see ``api/extenders.py``.
_EXTENDER = {
    "type": "object",
    "description": "A scheduler extender: an HTTP service consulted at filter, prioritize, preempt and bind.",
    "required": ["urlPrefix"],
    "additionalProperties": False,
    "properties": {
        "urlPrefix": {
            "type": "string",
            "minLength": 1,
            "description": "The extender's base URL; each verb is appended to it. Redirects are not "
            "followed; link-local and cloud metadata addresses are refused unless the operator allows "
            "them (--allow-extender-link-local).",
        },
        "filterVerb": _STRING,
        "preemptVerb": _STRING,
        "prioritizeVerb": _STRING,
        "bindVerb": _STRING,
        "weight": {
            "type": "integer",
            "description": "Multiplies the extender's 0-10 node scores (after scaling them to 0-100); "
            "must be > 0 when prioritizeVerb is set.",
        },
        "enableHTTPS": _BOOLEAN,
        "tlsConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "insecure": _BOOLEAN,
                "serverName": _STRING,
                "certFile": _TLS_FILE,
                "keyFile": _TLS_FILE,
                "caFile": _TLS_FILE,
                "certData": _PEM_DATA,
                "keyData": _PEM_DATA,
                "caData": _PEM_DATA,
            },
        },
        "httpTimeout": {
            "type": "string",
            "description": 'Timeout of one call, a Go duration ("5s", "1m30s"); default 5s, at most 5m, '
            "never negative.",
        },
        "nodeCacheCapable": _BOOLEAN,
        "managedResources": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": _NAME, "ignoredByScheduler": _BOOLEAN},
            },
        },
        "ignorable": _BOOLEAN,
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
        "shadow": {
            "type": "boolean",
            "description": "Never bind: for each pod of schedulerName another scheduler binds, record "
            "where this profile would have placed it (kopf_scheduler_shadow_decisions_total).",
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
        "extenders": {
            "type": "array",
            "maxItems": 16,
            "description": "Scheduler extenders, consulted in this order (ignorable ones last).",
            "items": _EXTENDER,
        },
    },
}
