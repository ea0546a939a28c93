"""The JSON schema of a SchedulingProfile's ``spec``: the one source for the operator's validation and for
the CRD's structural OpenAPI schema (``crd.py`` converts it; ``crds/`` holds the generated file).

Every number has a ``maximum``, every list a ``maxItems`` and every string a ``maxLength`` (a test walks
the schema): names as Kubernetes bounds them (253), paths as ``PATH_MAX`` (4096), URLs 2048, PEM data
1 MiB. Plugin ``args`` stay open objects here: each plugin validates and bounds its own arguments, and
``profile.py`` bounds their size as a whole.
"""

from __future__ import annotations

from typing import Any

from kopf_scheduler.api.extenders import MAX_EXTENDER_WEIGHT

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

_VERB = {"type": "string", "maxLength": 253}
_BOOLEAN = {"type": "boolean"}
_PEM_DATA = {
    "type": "string",
    "format": "byte",
    "maxLength": 1024 * 1024,
    "description": "PEM data, base64-encoded.",
}
_TLS_FILE = {
    "type": "string",
    "maxLength": 4096,
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
            "maxLength": 2048,
            "description": "The extender's base URL; each verb is appended to it. Redirects are not "
            "followed; link-local and cloud metadata addresses are refused unless the operator allows "
            "them (--allow-extender-link-local).",
        },
        "filterVerb": _VERB,
        "preemptVerb": _VERB,
        "prioritizeVerb": _VERB,
        "bindVerb": _VERB,
        "weight": {
            "type": "integer",
            "maximum": MAX_EXTENDER_WEIGHT,
            "description": "Multiplies the extender's 0-10 node scores (after scaling them to 0-100); "
            f"must be > 0 when prioritizeVerb is set, never negative, at most {MAX_EXTENDER_WEIGHT}.",
        },
        "enableHTTPS": _BOOLEAN,
        "tlsConfig": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "insecure": _BOOLEAN,
                "serverName": {"type": "string", "maxLength": 253},
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
            "maxLength": 64,
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
