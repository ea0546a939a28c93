"""Kopf's login, in both processes of ``kopf-scheduler run`` and in ``kopf run -m kopf_scheduler.handlers``:
the credentials ``k8s.load_connection`` resolves (the loader the scheduler's own client uses, with the same
kubeconfig: ``ServiceConfig.kubeconfig``), so watches and bindings act as one identity, through one proxy.

Kopf logs in again after a 401; that reads everything afresh (a rotated token file included). Kopf's
connection has no ``tls-server-name``: the watches verify the server under its URL's host, and a warning
says so when the kubeconfig sets one.
"""

from __future__ import annotations

from typing import Any

import kopf

from kopf_scheduler.k8s import ConfigError, ConnectionInfo, load_connection
from kopf_scheduler.service.config import ServiceConfig


def kopf_connection(info: ConnectionInfo) -> kopf.ConnectionInfo:
    """``info`` as Kopf's connection: the current token, the proxy given explicitly (the environment is
    not read again by aiohttp: ``trust_env`` stays off, so ``NO_PROXY`` is judged once, as Go judges it)."""
    token = (info.token.token() or None) if info.token is not None else None
    basic = token is None and info.username is not None and info.password is not None
    return kopf.ConnectionInfo(
        server=info.server,
        ca_data=info.ca_data,
        insecure=info.insecure or None,
        username=info.username if basic else None,
        password=info.password if basic else None,
        token=token,
        certificate_data=info.client_cert,
        private_key_data=info.client_key,
        default_namespace=info.default_namespace,
        proxy_url=info.proxy.url if info.proxy is not None else None,
        trust_env=False,
    )


def login(logger: Any, **_: Any) -> kopf.ConnectionInfo:
    try:
        info = load_connection(ServiceConfig.from_env().kubeconfig)
        connection = kopf_connection(info)
    except ConfigError as e:  # a user's mistake: one line, no traceback
        raise kopf.PermanentError(f"cannot log in: {e}") from None
    via = f" through proxy {info.proxy.address} ({info.proxy.source})" if info.proxy is not None else ""
    logger.info("Logging in to %s as %s%s", info.server, info.source, via)
    if info.tls_server_name:
        logger.warning(
            "%s: tls-server-name %r is not used by Kopf's connections: they verify the server as %s",
            info.source,
            info.tls_server_name,
            info.server,
        )
    return connection


def register(registry: kopf.OperatorRegistry | None = None) -> None:
    """``login`` as the only login handler of ``registry`` (default: Kopf's default registry)."""
    kopf.on.login(registry=registry, errors=kopf.ErrorsMode.IGNORED)(login)
