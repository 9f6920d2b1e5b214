"""A real Milvus server on loopback for tests and benchmarks: the PyPI `milvus` 2.3.5 package.

`milvus-server` (a Python launcher) unpacks the standalone `milvus` binary into the data folder
and runs it with an in-process etcd. Every port is chosen here (free on 127.0.0.1); the embedded
etcd is moved off its fixed 2379/2380 through ETCD_CONFIG_PATH, and every component registers
itself as 127.0.0.1, so nothing is sent beyond loopback. (The binary still binds its gRPC ports on
all interfaces; only loopback clients are used.) Authorization is on when `auth` is set (the
server's `root` user, password `Milvus`).

The launcher and the binary share one process group, stopped by group: SIGTERM, then SIGKILL
after a few seconds (the binary takes > 10 s to stop on SIGTERM). `restart()` runs the binary
directly with the configuration the launcher wrote: the launcher's own port check binds without
SO_REUSEADDR and so refuses a port a killed server left in TIME_WAIT.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT_TOKEN = "root:Milvus"  # the default superuser of a fresh server with authorization on
PORT_OPTIONS = (
    "proxy-port", "etcd-port", "root-coord-port", "proxy-internal-port", "query-coord-port",
    "query-node-port", "index-coord-port", "index-node-port", "data-coord-port", "data-node-port",
)  # fmt: skip
COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")


class ServerFailed(RuntimeError):
    """The server did not start or answer; the message ends with its log tail."""


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


class MilvusServer:
    """One embedded Milvus standalone server in `data` (see the module docstring)."""

    def __init__(self, data: Path, *, auth: bool = False) -> None:
        self.data, self.auth = Path(data), auth
        self.data.mkdir(parents=True, exist_ok=True)
        ports = free_ports(len(PORT_OPTIONS) + 2)
        self.ports = dict(zip(PORT_OPTIONS, ports, strict=False))
        self.etcd_peer, self.metrics = ports[-2], ports[-1]
        self.uri = f"http://127.0.0.1:{self.ports['proxy-port']}"
        self.token = ROOT_TOKEN if auth else ""
        self.log = self.data / "server.log"
        self.proc: subprocess.Popen | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 240.0) -> None:
        """Start through `milvus-server` and wait until it answers (ServerFailed with the log tail)."""
        beside = Path(sys.executable).parent / "milvus-server"  # a virtual environment's, even if not on PATH
        launcher = str(beside) if beside.is_file() else shutil.which("milvus-server")
        if launcher is None:
            raise ServerFailed("milvus-server not found — python3 -m pip install milvus==2.3.5 (the dev extra)")
        cmd = [launcher, "--data", str(self.data)]
        for option, port in self.ports.items():
            cmd += [f"--{option}", str(port)]
        if self.auth:  # the launcher parses it with bool(): any value but an empty one turns it on
            cmd += ["--authorization-enabled", "true"]
        for component in COMPONENTS:
            cmd += ["--extra-config", f"{component}.ip=127.0.0.1"]
        self._spawn(cmd, cwd=None)
        self.wait_ready(timeout)

    def restart(self, timeout: float = 240.0) -> None:
        """Start the binary again on the same data and ports (after `kill` or `stop`)."""
        binary = self.data / "bin" / "milvus"
        env = {"DEPLOY_MODE": "STANDALONE", "MILVUS_RUN_DIR": str(self.data / "run")}
        env["LD_LIBRARY_PATH"] = f"{binary.parent}:{os.environ.get('LD_LIBRARY_PATH', '')}"
        self._spawn([str(binary), "run", "standalone"], cwd=self.data, extra_env=env)
        self.wait_ready(timeout)

    def _spawn(self, cmd: list[str], cwd: Path | None, extra_env: dict[str, str] | None = None) -> None:
        etcd = self.data / "embedEtcd.yaml"
        client, peer = f"http://127.0.0.1:{self.ports['etcd-port']}", f"http://127.0.0.1:{self.etcd_peer}"
        etcd.write_text(
            f"listen-client-urls: {client}\nadvertise-client-urls: {client}\n"
            f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n"
        )
        env = {**os.environ, "ETCD_CONFIG_PATH": str(etcd), "METRICS_PORT": str(self.metrics), **(extra_env or {})}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped as a whole
            )  # fmt: skip

    def wait_ready(self, timeout: float) -> None:
        """Until a client call answers; ServerFailed (with the log tail) if it exits or times out."""
        from pymilvus import MilvusClient

        deadline, last = time.monotonic() + timeout, "no answer"
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise ServerFailed(f"Milvus server exited (code {self.proc and self.proc.returncode})\n{self.tail()}")
            try:
                client = MilvusClient(uri=self.uri, token=self.token, timeout=3)
                try:
                    client.list_collections(timeout=3)
                    return
                finally:
                    client.close()
            except Exception as exc:  # not up yet: connection refused, unavailable, not ready
                last = f"{type(exc).__name__}: {exc}"
                time.sleep(1.0)
        raise ServerFailed(f"Milvus server did not answer within {timeout:.0f} s ({last})\n{self.tail()}")

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): it still accepts connections, and never answers."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """Crash the server: SIGKILL to its whole process group, no shutdown."""
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        self._reap(10.0)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM to the process group, SIGKILL after `grace` seconds; waits until all are gone."""
        if self.proc is None:
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        if not self._gone(grace):
            self._signal(signal.SIGKILL)
        self._reap(10.0)

    def _signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def _gone(self, seconds: float) -> bool:
        """True once no process of the group is left (zombies aside) within `seconds`."""
        assert self.proc is not None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.1)
            if not _group_alive(self.proc.pid):
                return True
            time.sleep(0.1)
        return False

    def _reap(self, seconds: float) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=seconds)
            self._gone(seconds)
            self.proc = None

    def tail(self, lines: int = 40) -> str:
        """The last lines of the launcher's output and of the server's own log."""
        out = []
        for path in (self.log, self.data / "logs" / "milvus-stdout.log", self.data / "logs" / "milvus-stderr.log"):
            if path.is_file():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path.name} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(out) or "(no server log written)"


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process of the group exists."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":  # state, ppid, pgrp
                return True
    return False
