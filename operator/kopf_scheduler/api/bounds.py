"""The operator's bounds on what a SchedulingProfile may claim and reach.

Writing a SchedulingProfile is as privileged as editing kube-scheduler's configuration: a profile decides
where pods run, which pods preemption deletes, and which HTTP services (extenders) see every pod and node
of the cluster. These bounds keep a profile from reaching beyond the scheduler itself:

- ``schedulerName``: a reserved name (``default-scheduler``, kube-scheduler's, and whatever the operator
  adds with ``--deny-scheduler-name``) can be claimed only when the operator allows it
  (``--allow-scheduler-name``); a profile cannot silently take over the pods of another scheduler.
- extender TLS files (``caFile``, ``certFile``, ``keyFile``) are read only from one directory
  (``--extender-tls-dir``, default ``/etc/kopf-scheduler/extender-tls``), so a profile cannot make the
  scheduler read (and report on) any file it can read.
- extender URLs may not point at link-local or cloud metadata addresses (``169.254.0.0/16``, ``fe80::/10``,
  ``fd00:ec2::254``, ``100.100.100.200``, ``metadata.google.internal``) unless the operator allows it
  (``--allow-extender-link-local``): the check is made on the URL when the profile is validated and
  again on every address a host name resolves to when an extender is called (``framework.extenders``).

``ProfileBounds()`` are the operator's defaults; ``OFFLINE`` is what tools working on the user's own files
(``simulate``, tests) use: no reserved names and TLS files anywhere, but still no metadata addresses.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass

#: where extender TLS files are read from unless the operator says otherwise (``--extender-tls-dir``)
DEFAULT_EXTENDER_TLS_DIR = "/etc/kopf-scheduler/extender-tls"
#: scheduler names a profile may claim only with ``--allow-scheduler-name``
RESERVED_SCHEDULER_NAMES = frozenset({"default-scheduler"})

#: link-local ranges and the cloud instance metadata services' addresses (AWS, GCP, Azure, OpenStack and
#: Oracle at 169.254.169.254; AWS's IPv6 endpoint; Alibaba Cloud's)
_LINK_LOCAL_OR_METADATA = tuple(
    ipaddress.ip_network(net)
    for net in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32")
)
#: host names of metadata services (their addresses are refused anyway when a call resolves them)
METADATA_HOSTNAMES = frozenset({"metadata.google.internal", "metadata.goog"})

ALLOW_SCHEDULER_NAME_FLAG = "--allow-scheduler-name"
ALLOW_LINK_LOCAL_FLAG = "--allow-extender-link-local"
EXTENDER_TLS_DIR_FLAG = "--extender-tls-dir"


def is_link_local_or_metadata(address: str) -> bool:
    """Whether the IP address ``address`` (an IPv6 zone allowed) is link-local or a metadata service's;
    False for anything that is not an IP address."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _LINK_LOCAL_OR_METADATA)


def is_metadata_hostname(host: str) -> bool:
    return host.rstrip(".").lower() in METADATA_HOSTNAMES


def confined_path(directory: str, path: str) -> str | None:
    """``path`` (relative paths taken from ``directory``) normalised, if it lies in ``directory``; None
    otherwise. Lexical only: symlinks are resolved when the file is read."""
    if "\x00" in path:
        return None
    root = os.path.normpath(directory)
    full = os.path.normpath(os.path.join(root, path))
    inside = full == root or full.startswith(root.rstrip(os.sep) + os.sep)
    return full if inside and full != root else None


@dataclass(frozen=True, slots=True)
class ProfileBounds:
    #: names a profile may not claim unless they are also in ``allowed_scheduler_names``
    reserved_scheduler_names: frozenset[str] = RESERVED_SCHEDULER_NAMES
    #: reserved names the operator lets profiles claim nonetheless (``--allow-scheduler-name``)
    allowed_scheduler_names: frozenset[str] = frozenset()
    #: the directory extender TLS files must be in (``--extender-tls-dir``); None: anywhere
    extender_tls_dir: str | None = DEFAULT_EXTENDER_TLS_DIR
    #: extender URLs may point at link-local and metadata addresses (``--allow-extender-link-local``)
    allow_link_local_extenders: bool = False

    def scheduler_name_error(self, name: str) -> str | None:
        """Why a profile may not claim ``name``; None when it may."""
        if name in self.reserved_scheduler_names and name not in self.allowed_scheduler_names:
            return (
                f"{name!r} is a reserved scheduler name: a SchedulingProfile may claim it only when the "
                f"operator runs with {ALLOW_SCHEDULER_NAME_FLAG} {name}"
            )
        return None


#: for tools that work on the user's own files (``simulate``, tests): no reserved names, TLS files
#: anywhere, but no extender at a link-local or metadata address either
OFFLINE = ProfileBounds(reserved_scheduler_names=frozenset(), extender_tls_dir=None)
