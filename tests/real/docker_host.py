"""The console against the real Docker: a host reached over OpenSSH's sshd whose sessions find the
real docker CLI on PATH with DOCKER_HOST at the tests' own dockerd (tests/real/daemons.py), the
simulated SGLang server running inside real containers of the test image, and what the tests record
of the real CLI's output (tests/data/real/docker_*.json, with the versions and the exact command).

The container's SGLang is console/demo/hostsim/fake_sglang/launch_server.py (stdlib only): the checkout's
`console/` is bind-mounted read-only and put on PYTHONPATH; with `--network host` it listens on this
machine's loopback (a free port per container: tests/real/ports.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from console.demo.hostsim import HostSimulator
from console.demo.sshd import Sshd, find_sshd, start_sshd
from console.host.transport.ssh import SshOptions, SshTransport
from tests.real.daemons import IMAGE_TAG, Dockerd

CHECKOUT = Path(__file__).resolve().parents[2]
REAL_DATA = CHECKOUT / "tests" / "data" / "real"
# `python3 -m sglang.launch_server` as SGLang's image runs it: a one-line `sglang` package (shim_dir)
# that runs the simulated server, mounted beside the checkout's console/ on PYTHONPATH.
SGLANG = ("python3", "-m", "sglang.launch_server")
SHIM = "import sys\nfrom console.demo.hostsim.fake_sglang.launch_server import main\nmain(sys.argv[1:])\n"


def shim_dir(dockerd: Dockerd) -> Path:
    package = dockerd.root / "shim" / "sglang"
    shim = package / "launch_server.py"
    # Written again whenever it differs: the pooled root outlives a checkout (a shim of an older tree
    # named a module that moved, and every container's server died at its import).
    if not shim.exists() or shim.read_text() != SHIM:
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
        shim.write_text(SHIM)
    return package
# GPUCONSOLE_RECORD_REAL=1: the tests write what the real CLI printed into tests/data/real/.
RECORD = os.environ.get("GPUCONSOLE_RECORD_REAL") == "1"


def sglang_args(port: int, *, model: str = "/models/Qwen3-8B", extra: tuple[str, ...] = ()) -> list[str]:
    return [*SGLANG, "--model-path", model, "--port", str(port), *extra]


def run_sglang(dockerd: Dockerd, name: str, port: int, *, create: bool = False, restart: str | None = None,
               model: str = "/models/Qwen3-8B", extra: tuple[str, ...] = (), env: tuple[str, ...] = (),
               labels: tuple[str, ...] = (), models_dir: Path | None = None, speed: float = 8.0,
               command: list[str] | None = None, network: str = "host", publish: tuple[str, ...] = (),
               gpus: str | None = None) -> str:
    """`docker run -d` (or `create`) of the simulated SGLang in the test image; its id."""
    argv = ["create" if create else "run", *([] if create else ["-d"]), "--name", name, "--network", network,
            "-v", f"{CHECKOUT / 'console'}:/gc/console:ro", "-v", f"{shim_dir(dockerd)}:/gc/sglang:ro",
            "-e", "PYTHONPATH=/gc", "-e", "PYTHONUNBUFFERED=1",
            "-e", f"GPUSIM_SPEED={speed}"]
    if models_dir is not None:
        argv += ["-v", f"{models_dir}:/models:ro"]
    if restart:
        argv += ["--restart", restart]
    for e in env:
        argv += ["-e", e]
    for label in labels:
        argv += ["--label", label]
    for p in publish:
        argv += ["-p", p]
    if gpus is not None:  # Docker's DeviceRequests (a dockerd with the stand-in GPU hook starts them)
        argv += ["--gpus", gpus]
    argv += [IMAGE_TAG, *(command if command is not None else sglang_args(port, model=model, extra=extra))]
    return dockerd.docker(*argv).stdout.strip().splitlines()[-1]


def inspect(dockerd: Dockerd, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(dockerd.docker("inspect", "--type", "container", "--", name).stdout)[0]
    return obj


def until(predicate: Callable[[], object], timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


async def async_until(predicate: Callable[[], object], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def cli_version(dockerd: Dockerd, cli: str) -> str:
    return dockerd.docker("version", "--format", "{{.Client.Version}}", cli=cli).stdout.strip()


def record(dockerd: Dockerd, key: str, args: list[str], cli: str, *, note: str = "") -> dict[str, Any]:
    """Run `docker ARGS` with one CLI; with GPUCONSOLE_RECORD_REAL=1 write what it printed to
    tests/data/real/docker_KEY.json with the CLI's and the engine's versions and the exact command."""
    run = dockerd.docker(*args, cli=cli, check=False)
    entry = {"command": ["docker", *args], "cli": cli, "cli_version": cli_version(dockerd, cli),
             "engine_version": dockerd.docker("version", "--format", "{{.Server.Version}}").stdout.strip(),
             "rc": run.returncode, "stdout": run.stdout, "stderr": run.stderr, "note": note}
    if RECORD:
        REAL_DATA.mkdir(parents=True, exist_ok=True)
        (REAL_DATA / f"docker_{key}.json").write_text(json.dumps(entry, indent=1, sort_keys=True) + "\n")
    return entry


_ID = re.compile(r"\b[0-9a-f]{64}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
_AGO = re.compile(r"\b(?:Up|Exited \(\d+\)|Restarting \(\d+\)) (?:Less than a second|About a minute|an hour|\d+ \w+)"
                  r"(?: ago)?")


def normalise(text: str) -> str:
    """Only ids and times made equal (shape differences stay visible)."""
    text = _ID.sub("<id>", text)
    text = _TIME.sub("<time>", text)
    return _AGO.sub(lambda m: m.group().split(" ")[0] + " <ago>", text)


# -- the host over SSH ----------------------------------------------------------------------------------
class _RealToolsHost(HostSimulator):
    """The simulator's SSH server (asyncssh, a real /bin/sh per session) in front of this machine's
    own tools, with `env` as the sessions' environment: the real docker CLI first on PATH."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        super().__init__(root, simulate_tools=False)
        self._session_env = env

    def env(self) -> dict[str, str]:
        return {**os.environ, **self._session_env, "HOME": str(self.path("/root"))}


@dataclass
class RealDockerHost:
    dockerd: Dockerd
    transport: SshTransport
    bin_dir: Path
    sshd: Sshd | None = None
    sim: HostSimulator | None = None

    async def sh(self, script: str, timeout_s: float = 60) -> tuple[int | None, str]:
        r = await self.transport.run(script, timeout=timeout_s)
        return r.exit_status, r.text


async def open_host(dockerd: Dockerd, directory: Path, cli: str | None = None,
                    docker_host: str | None = None) -> RealDockerHost:
    """A host over SSH whose sessions run the real docker CLI (PATH's first, or `cli`) against the
    tests' dockerd: OpenSSH's sshd on 127.0.0.1 where it is installed, else the simulator's SSH
    server with this machine's own tools. Every docker command of the console goes through SSH and
    a shell."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    real = cli or dockerd.clis[0]
    link = bin_dir / "docker"
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(real)
    env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "DOCKER_HOST": docker_host or dockerd.host,
           "DOCKER_CONFIG": str(dockerd.root / "cli-config")}
    if find_sshd() is not None:
        sshd = start_sshd(directory / "sshd",
                          extra_config="SetEnv " + " ".join(f"{k}={v}" for k, v in env.items()) + "\n")
        transport = SshTransport(sshd.options())
        await transport.connect()
        return RealDockerHost(dockerd, transport, bin_dir, sshd=sshd)
    sim = _RealToolsHost(directory / "sim", env)
    await sim.start()
    transport = SshTransport(SshOptions(host="127.0.0.1", port=sim.port, user="root",
                                        identity=str(sim.client_key_path), known_hosts=str(sim.known_hosts_path),
                                        ssh_config=(), connect_timeout_s=5))
    await transport.connect()
    return RealDockerHost(dockerd, transport, bin_dir, sim=sim)


async def close_host(host: RealDockerHost) -> None:
    await host.transport.close()
    if host.sshd is not None:
        host.sshd.stop()
    if host.sim is not None:
        await host.sim.stop()
    shutil.rmtree(host.bin_dir, ignore_errors=True)


# -- the container swap plan with a stand-in controller -------------------------------------------------
class PlanCtl:
    """What console/domain/swap/container_steps.py's steps use of the SwapController, around a real
    transport: its commands run for real through SSH on the real daemon; the service reading is
    the console's ContainerWatcher's, the server reading its ServerWatcher's (polled on `repoll`).
    No GPUs here: the drain answers at once (said as such)."""

    def __init__(self, transport: SshTransport, *, new: str | None, old: str | None, port: int,
                 compose: str | None = None, compose_service: str | None = None, ready_timeout_s: float = 90) -> None:
        from console.domain.swap.container_plan import ContainerPlan
        from console.host.sources.container import ContainerWatcher
        from console.host.sources.server import ServerWatcher

        self.profile = SimpleNamespace(container=new, compare_container=old, compose=compose,
                                       compose_service=compose_service, require_approval=False,
                                       ready_timeout_s=ready_timeout_s, server_port=port)
        self.session = SimpleNamespace(transport=transport)
        self.watcher = ContainerWatcher(transport, compose_service if compose else new or "", old,
                                        compose_file=compose, compose_service=compose_service)
        self.server = ServerWatcher(transport, None, port, None)
        self.poll_s = 0.3
        self.fast = SimpleNamespace(chosen=None, _beside_old_serving=lambda: False)  # the restart path
        self.busy = None
        self.details: list[tuple[str, dict[str, Any]]] = []
        self.service_report: Any = None
        self.server_reading: Any = None
        self.runner = SimpleNamespace(repoll=self._repoll)
        self.state = SimpleNamespace(data=self._data, reading=self._reading, apply=lambda *_: None,
                                     swap=SimpleNamespace(downtime=None, steps={}), log_lines=())
        self._tasks: set[asyncio.Task[None]] = set()
        self.containers = ContainerPlan(self)  # type: ignore[arg-type]

    def _clock(self) -> float:
        return time.monotonic()

    def _data(self, name: str) -> Any:
        return self.service_report if name == "service" else None

    def _reading(self, name: str) -> Any:
        return self.server_reading if name == "server" else None

    def _repoll(self, name: str) -> None:
        async def server() -> None:
            try:
                status = await self.server.poll()
            except Exception:  # noqa: BLE001 - not up yet: no reading
                return
            self.server_reading = SimpleNamespace(data=status, ok_at_s=time.monotonic())

        async def service() -> None:
            self.service_report = await self.watcher.poll()

        task = asyncio.get_running_loop().create_task(server() if name == "server" else service())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def read_service(self) -> Any:
        self.service_report = await self.watcher.poll()
        return self.service_report

    def _set(self, key: str, **changes: Any) -> None:
        self.details.append((key, changes))

    async def _run(self, who: str, key: str, cmd: Any) -> Any:
        return await self.session.transport.run(cmd.script, timeout=cmd.timeout_s)

    async def _reconnected(self, key: str, why: str) -> None:
        raise AssertionError(f"the connection dropped in a real-daemon test: {why}")

    async def gate_then_approval(self, who: str, serving: str | None) -> None:
        return None

    async def _approval(self, key: str, who: str) -> None:
        return None

    def _downtime_start(self, issued: float) -> None:
        return None

    async def drain(self, key: str, since: float) -> str:
        return "no GPUs on this machine: nothing to drain"

    async def death_cause(self, reason: str, wait_s: float = 5.0) -> str:
        return reason

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


# -- what Docker recorded, for the tests that read a swap's report against it -----------------------------
def standin_gpus(host: RealDockerHost, tag: str) -> None:
    """`nvidia-smi` first on the host's PATH: the stand-in, counting only servers tagged `tag`."""
    wrapper = host.bin_dir / "nvidia-smi"
    wrapper.write_text(f"#!/bin/sh\nSTANDIN_NVIDIA_SMI_TAG={tag} PYTHONPATH={CHECKOUT} exec /usr/bin/python3 "
                       f"{CHECKOUT / 'tests/real/standin_nvidia_smi.py'} \"$@\"\n")
    wrapper.chmod(0o755)


def docker_time(stamp: str) -> float:
    """Docker's RFC 3339 time with nanoseconds ("2026-12-03T17:09:15.123456789Z") as epoch seconds."""
    head, _, rest = stamp.partition(".")
    frac = rest.rstrip("Z").split("+")[0].split("-")[0] if rest else ""
    base = dt.datetime.fromisoformat(head).replace(tzinfo=dt.timezone.utc).timestamp()
    return base + (float(f"0.{frac}") if frac else 0.0)


def docker_logs(dockerd: Dockerd, name: str) -> list[tuple[float, str]]:
    """`docker logs -t NAME`: (Docker's time of the line, the line), oldest first."""
    run = dockerd.docker("logs", "-t", name)
    out = []
    for line in (run.stdout + run.stderr).splitlines():
        stamp, _, text = line.partition(" ")
        out.append((docker_time(stamp), text))
    return sorted(out, key=lambda x: x[0])


def docker_events(dockerd: Dockerd, since_s: float, until_s: float, *names: str) -> list[tuple[float, str, str]]:
    """`docker events` for the containers between two times: (Docker's time, action, container name)."""
    filters = [a for n in names for a in ("--filter", f"container={n}")]
    run = dockerd.docker("events", "--since", f"{since_s:.3f}", "--until", f"{until_s:.3f}", *filters,
                         "--format", "{{json .}}")
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    return [(int(e["timeNano"]) / 1e9, e["Action"], e["Actor"]["Attributes"]["name"]) for e in events
            if e.get("Type") == "container"]


def docker_event(events: list[tuple[float, str, str]], action: str, name: str, after_s: float = 0.0) -> float:
    """Docker's own time of the first ACTION event of container NAME at or after a time (of `docker_events`)."""
    found = [at for at, act, who in events if act == action and who == name and at >= after_s]
    assert found, f"no docker event {action} of {name} after {after_s:.3f}: {events}"
    return found[0]


def require_sshd() -> None:
    if find_sshd() is None or os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the container swap must be tested over OpenSSH's sshd in CI")
        pytest.skip("needs OpenSSH's sshd, as root")
