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
#: kube-scheduler v1.37's extension points of the pod group scheduling cycle (``Plugins`` in
#: ``config/v1/types.go``), which runs only with the GenericWorkload gate (off by default): a profile carries
#: their plugin sets, but kopf-scheduler has no plugin there, so they may only disable (``profile.py``)
POD_GROUP_POINTS = ("placementGenerate", "placementScore", "podGroupPostFilter")
PLUGIN_SET_FIELDS = ("multiPoint", *EXTENSION_POINTS, *POD_GROUP_POINTS)

_NAME = {"type": "string", "minLength": 1, "maxLength": 253}


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """``schema`` with its own description: the shapes below are shared, what a field means is not."""
    return {**schema, "description": description}


_PLUGIN = {
    "type": "object",
    "description": "A plugin by name; weight applies to score and placementScore plugins only.",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": _described(_NAME, "The plugin's name, as kube-scheduler names it (NodeResourcesFit, ...)."),
        "weight": {
            "type": "integer",
            "exclusiveMinimum": 0,
            "maximum": 100,
            "description": "Multiplies the plugin's normalized 0-100 node scores; score and placementScore "
            "plugins only, default 1 or the plugin's default weight.",
        },
    },
}

_PLUGIN_SET = {
    "type": "object",
    "description": "Plugins enabled and disabled at one extension point, merged with the defaults as "
    "kube-scheduler merges them.",
    "additionalProperties": False,
    "properties": {
        "enabled": {
            "type": "array",
            "items": _PLUGIN,
            "maxItems": 64,
            "description": "Plugins to run, after the default ones that are not disabled, in this order.",
        },
        "disabled": {
            "type": "array",
            "maxItems": 64,
            "description": 'Default plugins not to run; the name "*" disables every default one.',
            "items": {
                "type": "object",
                "description": "A default plugin by name.",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": _described(_NAME, 'The plugin\'s name, or "*" for all of them.')},
            },
        },
    },
}

_EXTENSION_POINT_DESCRIPTIONS = {
    "multiPoint": "Plugins enabled or disabled at every extension point each of them implements.",
    "preEnqueue": "Plugins that must pass before a pod enters the active queue (SchedulingGates).",
    "queueSort": "The one plugin that orders the scheduling queue (PrioritySort).",
    "preFilter": "Plugins that check the pod and compute what filtering needs, once per cycle.",
    "filter": "Plugins that rule nodes out for the pod.",
    "postFilter": "Plugins run when no node fits (DefaultPreemption).",
    "preScore": "Plugins that compute what scoring needs, once per cycle.",
    "score": "Plugins that rank the feasible nodes; weight multiplies each plugin's scores.",
    "reserve": "Plugins that reserve what the pod gets on its node (volumes, devices) before binding.",
    "permit": "Plugins that approve, deny or delay the binding (Coscheduling).",
    "preBind": "Plugins that act before the binding (volume and claim writes).",
    "bind": "Plugins that bind the pod to its node (DefaultBinder).",
    "postBind": "Plugins informed after a successful binding.",
    "placementGenerate": "Plugins that propose placements for a pod group (kube-scheduler's GenericWorkload "
    "feature); kopf-scheduler has none, so this set may only disable.",
    "placementScore": "Plugins that rank a pod group's placements (GenericWorkload); kopf-scheduler has "
    "none, so this set may only disable.",
    "podGroupPostFilter": "Plugins run when a pod group cannot be scheduled (GenericWorkload); "
    "kopf-scheduler has none, so this set may only disable.",
}


def _verb(name: str) -> dict[str, Any]:
    return {
        "type": "string",
        "maxLength": 253,
        "description": f"The path appended to urlPrefix for the {name} call; empty: not called.",
    }


def _boolean(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


_PEM_DATA = {
    "type": "string",
    "format": "byte",
    "maxLength": 1024 * 1024,
    "description": "PEM data, base64-encoded.",
}
_TLS_FILE_WHERE = (
    "A PEM file in the operator's extender TLS directory (--extender-tls-dir, default "
    "/etc/kopf-scheduler/extender-tls); a relative path is taken from there."
)
_TLS_FILE = {"type": "string", "maxLength": 4096, "description": _TLS_FILE_WHERE}

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
        "filterVerb": _verb("filter"),
        "preemptVerb": _verb("preempt"),
        "prioritizeVerb": _verb("prioritize"),
        "bindVerb": _verb("bind (the extender binds instead of DefaultBinder)"),
        "weight": {
            "type": "integer",
            "maximum": MAX_EXTENDER_WEIGHT,
            "description": "Multiplies the extender's 0-10 node scores (after scaling them to 0-100); "
            f"must be > 0 when prioritizeVerb is set, never negative, at most {MAX_EXTENDER_WEIGHT}.",
        },
        "enableHTTPS": _boolean("Call the extender over HTTPS."),
        "tlsConfig": {
            "type": "object",
            "description": "TLS settings of HTTPS calls: the client certificate and the CAs to trust.",
            "additionalProperties": False,
            "properties": {
                "insecure": _boolean("Do not verify the extender's certificate (testing only)."),
                "serverName": {
                    "type": "string",
                    "maxLength": 253,
                    "description": "The name to verify the extender's certificate against (SNI).",
                },
                "certFile": _described(_TLS_FILE, "The client certificate. " + _TLS_FILE_WHERE),
                "keyFile": _described(_TLS_FILE, "The client key. " + _TLS_FILE_WHERE),
                "caFile": _described(_TLS_FILE, "The CAs to trust. " + _TLS_FILE_WHERE),
                "certData": _described(_PEM_DATA, "The client certificate: PEM data, base64-encoded."),
                "keyData": _described(_PEM_DATA, "The client key: PEM data, base64-encoded."),
                "caData": _described(_PEM_DATA, "The CAs to trust: PEM data, base64-encoded."),
            },
        },
        "httpTimeout": {
            "type": "string",
            "maxLength": 64,
            "description": 'Timeout of one call, a Go duration ("5s", "1m30s"); default 5s, at most 5m, '
            "never negative.",
        },
        "nodeCacheCapable": _boolean(
            "The extender keeps its own node cache: calls send node names only, not whole Node objects."
        ),
        "managedResources": {
            "type": "array",
            "maxItems": 64,
            "description": "Extended resources this extender manages; only pods requesting one of them "
            "are sent to it (none listed: every pod).",
            "items": {
                "type": "object",
                "description": "An extended resource this extender manages.",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": _described(_NAME, "The extended resource's name (example.com/gpu)."),
                    "ignoredByScheduler": _boolean(
                        "NodeResourcesFit does not count this resource: the extender alone decides."
                    ),
                },
            },
        },
        "ignorable": _boolean(
            "A failed or unreachable call is skipped instead of failing the pod's attempt."
        ),
    },
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Which pods the profile schedules (schedulerName) and how: plugins, their arguments, "
    "extenders.",
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
            "description": "Which plugins run at each extension point, over kube-scheduler's defaults.",
            "additionalProperties": False,
            "properties": {
                point: _described(_PLUGIN_SET, _EXTENSION_POINT_DESCRIPTIONS[point])
                for point in PLUGIN_SET_FIELDS
            },
        },
        "pluginConfig": {
            "type": "array",
            "maxItems": 64,
            "description": "Arguments of plugins, one entry per plugin, as kube-scheduler's pluginConfig.",
            "items": {
                "type": "object",
                "description": "One plugin's arguments.",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": _described(_NAME, "The plugin the arguments are for."),
                    "args": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "description": "The plugin's arguments, as in kube-scheduler's <Plugin>Args "
                        "(apiVersion and kind may be left out); each plugin validates its own.",
                    },
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
