"""Connections to the API server through an HTTP CONNECT proxy, against the dev cluster.

The kubeconfigs here name the API server ``kubernetes.default.svc`` (a name of its serving certificate
that resolves nowhere on this machine); only the in-test proxy knows it is the loopback address. So a
command or a process that answers right has made every connection through the proxy, and one that went
around it fails. ``kopf-scheduler explain`` goes through a cluster's ``proxy-url`` and, for a kubeconfig
context given with ``--context``, takes the pod's namespace from the context; through ``HTTPS_PROXY``
unless ``NO_PROXY`` names the host. ``kopf-scheduler run`` with ``HTTPS_PROXY``: both processes (the
scheduler's own client and the intake's Kopf watches) connect through the proxy and pods bind.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from operator_harness import Operators, Scope
from tunnel import splice

from kopf_scheduler.devcluster.harness import ClusterHarness

pytestmark = pytest.mark.e2e

NODE_SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
#: what the kubeconfigs here call the API server: in its certificate, resolvable by the proxy only
HIDDEN_HOST = "kubernetes.default.svc"


@dataclass(frozen=True)
class Connect:
    target: str
    #: the process that opened the tunnel (by its socket), and its command line
    pid: int | None
    cmdline: str


@dataclass
class ConnectProxy:
    """An HTTP CONNECT proxy on a loopback port, in a thread of its own: records each CONNECT with the
    process that sent it, resolves the names of ``hosts`` itself, and relays bytes both ways."""

    hosts: Mapping[str, str]
    connects: list[Connect] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            server.close()
            tunnels = asyncio.all_tasks(loop)  # the tunnels still open: closed, not dropped
            for task in tunnels:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tunnels, return_exceptions=True))
            loop.run_until_complete(server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=serve, name="connect-proxy", daemon=True)
        self._thread.start()
        assert ready.wait(10), "the proxy did not start"

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def targets(self) -> list[str]:
        return [c.target for c in list(self.connects)]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        method, target, _ = head.split(" ", 2)
        # found off the loop: a walk through /proc must not hold up the tunnels already open
        pid = await asyncio.to_thread(_socket_owner, writer.get_extra_info("peername")[1], self.port)
        self.connects.append(Connect(target, pid, _cmdline(pid)))
        host, _, port = target.rpartition(":")
        try:
            assert method == "CONNECT"
            up_reader, up_writer = await asyncio.open_connection(self.hosts.get(host, host), int(port))
        except (AssertionError, OSError, ValueError):
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            writer.close()
            return
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await splice((reader, writer), (up_reader, up_writer))


def _socket_owner(local_port: int, remote_port: int) -> int | None:
    """The process holding the loopback TCP socket ``local_port`` -> ``remote_port`` (from /proc)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(f.rsplit(":", 1)[1], 16) for f in fields[1:3])
            if (local, remote) == (local_port, remote_port):
                inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    return None


def _cmdline(pid: int | None) -> str:
    if pid is None:
        return ""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    p = ConnectProxy(hosts={HIDDEN_HOST: "127.0.0.1"})
    p.start()
    try:
        yield p
    finally:
        p.stop()


def hidden_kubeconfig(
    cp: ClusterHarness, path: Path, *, proxy_url: str | None = None, namespace: str | None = None
) -> tuple[Path, str]:
    """The session's kubeconfig with a second context, ``hidden``, whose cluster is the same API server
    under ``HIDDEN_HOST`` (with ``proxy_url`` as its ``proxy-url``, and ``namespace`` as the context's);
    the current context is left as it is. Returns the file and the hidden server's host:port."""
    config = yaml.safe_load(cp.kubeconfig.read_text())
    [cluster] = config["clusters"]
    [context] = config["contexts"]
    server = urllib.parse.urlsplit(cluster["cluster"]["server"])
    hidden = copy.deepcopy(cluster)
    hidden["name"] = "hidden"
    hidden["cluster"]["server"] = f"https://{HIDDEN_HOST}:{server.port}"
    if proxy_url is not None:
        hidden["cluster"]["proxy-url"] = proxy_url
    config["clusters"].append(hidden)
    hidden_context = {"name": "hidden", "context": {**context["context"], "cluster": "hidden"}}
    if namespace is not None:
        hidden_context["context"]["namespace"] = namespace
    config["contexts"].append(hidden_context)
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return path, f"{HIDDEN_HOST}:{server.port}"


def cli(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in ("KUBECONFIG", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")
    }
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kopf_scheduler", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def test_explain_through_a_kubeconfig_proxy_url(
    control_plane: ClusterHarness, scope: Scope, proxy: ConnectProxy, tmp_path: Path
) -> None:
    [gold] = scope.nodes(1, "gold", labels={"tier": "gold"}, cpu="2", memory="8Gi", pods="110")
    plain = scope.nodes(2, "plain", cpu="2", memory="8Gi", pods="110")
    # served by no scheduler: it stays pending
    scope.create_pod("waiting", scheduler_name=scope.name("nobody"), selector={**scope.label, "tier": "gold"})
    kubeconfig, hidden = hidden_kubeconfig(
        control_plane, tmp_path / "kubeconfig", proxy_url=proxy.url, namespace=scope.namespace
    )

    # no -n: the namespace of the context given
    done = cli("explain", "pod/waiting", "--kubeconfig", str(kubeconfig), "--context", "hidden", "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["pod"], report["boundTo"], report["node"]) == (f"{scope.namespace}/waiting", None, gold)
    for node in plain:
        assert report["nodes"][node]["filter"] == {"plugin": "NodeAffinity", "reason": NODE_SELECTOR_MISMATCH}
    assert proxy.targets() and set(proxy.targets()) == {hidden}

    # the same pod read directly (the current context, -n given) explains the same way
    direct = cli(
        "explain", "waiting", "-n", scope.namespace, "-o", "json", env={"KUBECONFIG": str(kubeconfig)}
    )
    assert direct.returncode == 0, direct.stderr
    assert json.loads(direct.stdout)["nodes"] == report["nodes"]

    # $KUBECONFIG as a list (a missing file skipped), the context's namespace again
    listed = cli(
        "explain", "waiting", "--context", "hidden", "-o", "json",
        env={"KUBECONFIG": f"{tmp_path / 'none'}:{kubeconfig}"},
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["pod"] == f"{scope.namespace}/waiting"

    # the current context has no namespace: -n's default is then "default", as in kubectl
    elsewhere = cli("explain", "waiting", "--kubeconfig", str(kubeconfig))
    assert elsewhere.returncode == 2
    assert elsewhere.stderr.strip() == "kopf-scheduler explain: error: pod default/waiting not found"


def test_cli_through_https_proxy_unless_no_proxy(
    control_plane: ClusterHarness, scope: Scope, proxy: ConnectProxy, tmp_path: Path
) -> None:
    [node] = scope.nodes(1, "only", cpu="2", memory="8Gi", pods="110")
    scope.create_pod("waiting", scheduler_name=scope.name("nobody"))
    kubeconfig, hidden = hidden_kubeconfig(control_plane, tmp_path / "kubeconfig", namespace=scope.namespace)
    env = {"KUBECONFIG": str(kubeconfig), "HTTPS_PROXY": f"127.0.0.1:{proxy.port}"}  # no scheme: http://

    done = cli("explain", "waiting", "--context", "hidden", "-o", "json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["node"] == node
    assert set(proxy.targets()) == {hidden}

    seen = len(proxy.connects)
    bypassed = cli("explain", "waiting", "--context", "hidden", env={**env, "NO_PROXY": "example.org,.svc"})
    assert bypassed.returncode != 0
    [line] = bypassed.stderr.strip().splitlines()
    assert line.startswith(f"kopf-scheduler explain: error: cannot read the cluster at https://{hidden}: ")
    assert len(proxy.connects) == seen  # went around the proxy, and could not resolve the name


def test_both_operator_processes_through_https_proxy(
    control_plane: ClusterHarness, operators: Operators, scope: Scope, proxy: ConnectProxy, tmp_path: Path
) -> None:
    scope.nodes(2, "node", cpu="4", memory="8Gi", pods="110")
    config, hidden = hidden_kubeconfig(control_plane, tmp_path / "kubeconfig")
    data = yaml.safe_load(config.read_text())
    data["current-context"] = "hidden"
    config.write_text(yaml.safe_dump(data))
    operator = operators.start(
        "op-proxy",
        lease_namespace=scope.namespace,
        kubeconfig=config,
        env={"HTTPS_PROXY": proxy.url, "https_proxy": "", "NO_PROXY": "", "no_proxy": ""},
    )
    operator.wait_leading()
    for i in range(3):
        scope.create_pod(f"p{i}")
    for i in range(3):
        scope.wait_bound(f"p{i}", timeout=30)

    assert set(proxy.targets()) == {hidden}
    scheduling = operator.popen.pid
    by_process: dict[str, int] = {}
    for connect in list(proxy.connects):
        if connect.pid == scheduling:
            by_process["scheduling"] = by_process.get("scheduling", 0) + 1
        elif "kopf_scheduler.handlers.intake" in connect.cmdline:
            by_process["intake"] = by_process.get("intake", 0) + 1
    assert set(by_process) == {"scheduling", "intake"}, proxy.connects
