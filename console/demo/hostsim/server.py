"""The simulator's SSH side: exec, shell, SFTP and local port forwarding on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from console.demo.hostsim import simstate
from console.demo.hostsim.downloader import REPO_ID, DownloadPlan
from console.demo.hostsim.fake_hub import FakeHub
from console.demo.hostsim.ports import server_ports
from console.locations import PACKAGE_PARENT as _PACKAGE_PARENT

PACKAGE_PARENT = str(_PACKAGE_PARENT)


@dataclass
class HostIdentity:
    """Who the simulated host says it is."""

    hostname: str = "gpu-sim-01"
    # mount point (inside the sandbox) -> (size bytes, bytes used by things other than our files)
    disks: dict[str, tuple[int, int]] = field(default_factory=lambda: {
        "/": (1_000 * 10**9, 260 * 10**9),
        "/shared": (1_800 * 10**9, 905 * 10**9),
        "/data": (3_600 * 10**9, 1_400 * 10**9),
    })


class _SimServer(asyncssh.SSHServer):
    def __init__(self, sim: HostSimulator) -> None:
        self._sim = sim

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._sim.connections += 1
        self._sim.open_connections.add(conn)
        self._conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        self._sim.open_connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool:
        return True

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # Local port forwarding reaches only the simulated host's own loopback services.
        return dest_host in ("127.0.0.1", "localhost", "::1")


class HostSimulator:
    """Start with `await sim.start()`; connect to `sim.port` with `sim.client_key_path` and `sim.known_hosts_path`."""

    def __init__(self, root: str | Path | None = None, *, identity: HostIdentity | None = None,
                 speed: float = 1.0, scenario: str = "swap", simulate_tools: bool = True,
                 loop_s: float | None = None) -> None:
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="gpusim-")).resolve()
        self.identity = identity or HostIdentity()
        self.speed = speed
        self.scenario = scenario
        # The story again from its start every `loop_s` scenario seconds (the soak, issue 36 item 6):
        # the clock goes back to 0, so the new service stops and the old one serves again, then the
        # swap plays once more. `loops`: how many times it went back.
        self.loop_s = loop_s
        self.loops = 0
        # False: a plain SSH server in front of this machine's own tools (used to validate the
        # GPU source against a real nvidia-smi and NVML on a GPU host).
        self.simulate_tools = simulate_tools
        self.port = 0
        # where the simulated SGLang listens (127.0.0.1); the next port is free too, for the beside path's
        # new server (console/demo/hostsim/ports.py: both below the kernel's ephemeral range)
        self._held_ports: list[socket.socket] = []  # closed at stop(), when its servers are gone
        self.server_port = server_ports(2, held=self._held_ports)
        self.connections = 0
        self.open_connections: set[asyncssh.SSHServerConnection] = set()
        self.unit_pids: set[int] = set()  # the simulated services' processes (their own sessions)
        self._server: asyncssh.SSHAcceptor | None = None
        self._children: set[asyncio.subprocess.Process] = set()
        self._tasks: list[asyncio.Task[Any]] = []
        self.client_key_path = self.root / ".sim" / "client_key"
        self.known_hosts_path = self.root / ".sim" / "known_hosts"
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")

        # The simulated host's Hub on loopback: the demo's download total never asks huggingface.co
        self.hub = FakeHub()

    # -- sandbox -------------------------------------------------------------------------
    @property
    def bin_dir(self) -> Path:
        return self.root / ".sim" / "bin"

    def path(self, host_path: str) -> Path:
        """Where a host path (`/shared/models/x`) lives inside the sandbox."""
        return self.root / host_path.lstrip("/")

    def host_path(self, host_path: str) -> str:
        """The path that commands on the simulated host use for `host_path`."""
        return str(self.path(host_path))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "TZ")}
        if not self.simulate_tools:
            return {**os.environ, "HOME": str(self.path("/root"))}
        env.update({
            "PATH": f"{self.bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(self.path("/root")),
            "GPUSIM_ROOT": str(self.root),
            "PYTHONPATH": f"{self.root / '.sim' / 'pylib'}:{PACKAGE_PARENT}",
            "PYTHONDONTWRITEBYTECODE": "1",
        })
        return env

    def _write_state(self) -> None:
        sim_dir = self.root / ".sim"
        state = {
            "start_s": self.start_s, "speed": self.speed, "scenario": self.scenario, "loops": self.loops,
            "hostname": self.identity.hostname,
            "disks": {k: list(v) for k, v in self.identity.disks.items()},
        }
        tmp = sim_dir / "state.json.tmp"
        tmp.write_text(json.dumps(state))
        tmp.replace(sim_dir / "state.json")

    def _install_tools(self) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        (self.root / ".sim" / "pylib").mkdir(parents=True, exist_ok=True)
        for name in simstate.TOOLS:
            script = self.bin_dir / name
            script.write_text(
                f"#!{sys.executable}\n"
                "import sys\n"
                "from console.demo.hostsim.tools import main\n"
                f"raise SystemExit(main({name!r}, sys.argv[1:]))\n"
            )
            script.chmod(0o755)
        simstate.install_pylib(self.root / ".sim" / "pylib")

    def elapsed_s(self) -> float:
        """Scenario seconds since the start (the scenario clock)."""
        return (time.time() - self.start_s) * self.speed

    def rewind(self) -> None:
        """The scenario clock back to 0: every tool reads the new start from .sim/state.json."""
        self.start_s = time.time()
        self.loops += 1
        self._write_state()

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        self.start_s = time.time()
        self.hub.repos[REPO_ID] = DownloadPlan().hub_siblings()  # the story's files (every plan has the same)
        await self.hub.start()
        sim_dir = self.root / ".sim"
        sim_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for mount in self.identity.disks:
            self.path(mount).mkdir(parents=True, exist_ok=True)
        self.path("/root").mkdir(parents=True, exist_ok=True)
        self._install_tools()
        self._write_state()

        client_key = asyncssh.generate_private_key("ssh-ed25519")
        client_key.write_private_key(str(self.client_key_path))
        self.client_key_path.chmod(0o600)
        authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())

        self._server = await asyncssh.listen(
            "127.0.0.1", 0,
            server_factory=lambda: _SimServer(self),
            server_host_keys=[self.host_key],
            authorized_client_keys=authorized,
            process_factory=self._handle_process,
            sftp_factory=True,
            allow_scp=False,
            encoding=None,
            keepalive_interval=15,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.known_hosts_path.write_text(
            f"[127.0.0.1]:{self.port} {self.host_key.export_public_key().decode().strip()}\n"
        )

    def add_task(self, coro: Any) -> None:
        """Run a scenario driver for as long as the simulator runs."""
        self._tasks.append(asyncio.ensure_future(coro))

    async def _handle_process(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command
        argv = ["/bin/sh", "-c", command] if command is not None else ["/bin/sh"]
        try:
            child = await asyncio.create_subprocess_exec(
                *argv, cwd=str(self.path("/root")), env=self.env(),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            process.stderr.write(f"gpusim: cannot start {argv[0]}: {exc}\n".encode())
            process.exit(127)
            return
        self._children.add(child)
        assert child.stdout is not None and child.stderr is not None
        pumps = [
            asyncio.ensure_future(self._pump_stdin(process, child)),
            asyncio.ensure_future(self._pump_out(child.stdout, process.stdout)),
            asyncio.ensure_future(self._pump_out(child.stderr, process.stderr)),
        ]
        try:
            status = await child.wait()
            await asyncio.gather(*pumps[1:], return_exceptions=True)
            process.exit(status if status >= 0 else 128 - status)
        except (asyncssh.Error, ConnectionError, BrokenPipeError, OSError):
            pass
        finally:
            for pump in pumps:
                pump.cancel()
            # The channel is gone: like sshd closing the pipes, the child sees EOF on stdin.
            if child.stdin and not child.stdin.is_closing():
                child.stdin.close()
            self._children.discard(child)

    @staticmethod
    async def _pump_out(source: asyncio.StreamReader, target: asyncssh.SSHWriter[bytes]) -> None:
        """Copy a child's output to the channel; a closed channel just ends the copy (as with sshd,
        the child then gets SIGPIPE on its next write)."""
        try:
            while True:
                data = await source.read(1 << 16)
                if not data:
                    return
                target.write(data)
                await target.drain()
        except (asyncssh.Error, ConnectionError, BrokenPipeError, OSError):
            return

    @staticmethod
    async def _pump_stdin(process: asyncssh.SSHServerProcess[bytes], child: asyncio.subprocess.Process) -> None:
        assert child.stdin is not None
        try:
            while True:
                data = await process.stdin.read(1 << 16)
                if not data:
                    break
                child.stdin.write(data)
                await child.stdin.drain()
        except (asyncssh.Error, ConnectionError, BrokenPipeError, OSError):
            pass
        finally:
            if not child.stdin.is_closing():
                child.stdin.close()

    async def stop(self) -> None:
        await self.hub.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        children = list(self._children)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
        if children:
            # Reap what was killed while the loop still runs: a subprocess transport collected after
            # the loop closed warns "Event loop is closed" (issue 22 item 23: close what is opened).
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*(c.wait() for c in children), return_exceptions=True), 3)
        for pid in self._transient_pids():  # detached downloads (systemd-run) of the driven scenario
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for pid in self.unit_pids:  # whatever a cancelled runner could not stop in time
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        for held in self._held_ports:
            held.close()
        for conn in list(self.open_connections):
            conn.close()
        for conn in list(self.open_connections):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)
        # Let the connections' own tasks see the close before the loop goes away.
        await asyncio.sleep(0.05)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _transient_pids(self) -> list[int]:
        try:
            data = json.loads((self.root / ".sim" / "transient.json").read_text())
        except (OSError, ValueError):
            return []
        return [int(v.get("pid", 0)) for v in data.values() if int(v.get("pid", 0)) > 0]

    async def __aenter__(self) -> HostSimulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
