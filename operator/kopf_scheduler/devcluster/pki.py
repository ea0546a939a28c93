"""Credentials for a throw-away local API server, made with the ``openssl`` command line.

One CA signs the serving certificate (valid for 127.0.0.1 / localhost and the in-cluster service names);
a separate EC key signs service-account tokens; a random bearer token in ``system:masters`` is the admin
user, and a few more tokens name ordinary users (``DEV_USERS``, in ``DEV_USERS_GROUP`` only) whom a test
grants exactly the RBAC it wants, so the audit log tells their requests apart. EC P-256 keys are used
throughout because they are generated instantly.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kopf_scheduler.api.errors import UsageError

ADMIN_USER = "kopf-scheduler-admin"
ADMIN_GROUP = "system:masters"
DEV_USERS = ("dev-user-a", "dev-user-b", "dev-user-c")
DEV_USERS_GROUP = "kopf-scheduler-dev-users"
SERVING_SANS = (
    "IP:127.0.0.1",
    "IP:10.0.0.1",
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
)
_KEY_ARGS = ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    sa_key: Path
    sa_pub: Path
    token_file: Path
    token: str
    user_tokens: dict[str, str]


def token_file_line(token: str, user: str = ADMIN_USER, group: str = ADMIN_GROUP) -> str:
    """One line of a kube-apiserver ``--token-auth-file``: token,user,uid,"group1,group2"."""
    return f'{token},{user},{user},"{group}"\n'


def create(directory: Path) -> Pki:
    """Create every file in ``directory`` (made private) and return their paths plus the token."""
    if shutil.which("openssl") is None:
        raise UsageError("the `openssl` command is needed to create the dev cluster's certificates")
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    d = directory
    pki = Pki(
        ca_cert=d / "ca.crt",
        ca_key=d / "ca.key",
        serving_cert=d / "apiserver.crt",
        serving_key=d / "apiserver.key",
        sa_key=d / "sa.key",
        sa_pub=d / "sa.pub",
        token_file=d / "tokens.csv",
        token=secrets.token_hex(32),
        user_tokens={user: secrets.token_hex(32) for user in DEV_USERS},
    )
    for key in (pki.ca_key, pki.serving_key, pki.sa_key):
        _openssl(*_KEY_ARGS, "-out", str(key))
    _openssl(
        "req", "-x509", "-new", "-key", str(pki.ca_key), "-subj", "/CN=kopf-scheduler-dev-ca",
        "-days", "3650", "-out", str(pki.ca_cert),
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "subjectKeyIdentifier=hash",
    )  # fmt: skip
    csr = d / "apiserver.csr"
    ext = d / "apiserver.ext"
    _openssl("req", "-new", "-key", str(pki.serving_key), "-subj", "/CN=kube-apiserver", "-out", str(csr))
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid:always\n"
        f"subjectAltName={','.join(SERVING_SANS)}\n"
    )
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki.ca_cert), "-CAkey", str(pki.ca_key),
        "-CAcreateserial", "-days", "3650", "-extfile", str(ext), "-out", str(pki.serving_cert),
    )  # fmt: skip
    _openssl("pkey", "-in", str(pki.sa_key), "-pubout", "-out", str(pki.sa_pub))
    lines = [token_file_line(pki.token)]
    lines += [token_file_line(tok, user, DEV_USERS_GROUP) for user, tok in pki.user_tokens.items()]
    pki.token_file.write_text("".join(lines))
    for path in d.iterdir():
        path.chmod(0o600)
    return pki


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")
