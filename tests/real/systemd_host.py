"""A real systemd host for the tests: a container of the kit's image with systemd 252 as PID 1,
journald, and OpenSSH's sshd on a free loopback port, reached by the console's own SSH transport.

Run exactly as research/real_daemons.md found to work on this machine kind:
`docker run -d --network host --cap-add SYS_ADMIN --cgroupns=private --tmpfs /sys/fs/cgroup
--tmpfs /run --tmpfs /run/lock IMAGE /sbin/init` (never the machine's /sys/fs/cgroup bind-mounted;
`--privileged` fails here). Before the first boot the container gets (docker cp):

- sshd on 127.0.0.1:PORT, key auth only (a key this test run made), host keys made at boot by
  `ssh-keygen -A` (a drop-in of ssh.service), known_hosts written for the console's transport;
- the checkout's console/ bind-mounted read-only at /opt/gpuconsole/console: the simulated SGLang
  (console/demo/hostsim/fake_sglang/launch_server.py, stdlib only) runs from it;
- the two seed units of console/demo/hostsim/units/ with `{ROOT}` = / and the server's port a free one,
  each with a drop-in that sets the simulated SGLang's environment (PYTHONPATH, GPUSIM_*);
- a STAND-IN `nvidia-smi` (tests/real/standin_nvidia_smi.py; no GPUs here) whose memory follows the
  `sglang.launch_server` processes systemd really runs in the container;
- `curl` (the console's in-place update and the router's calls go through it; the image has none):
  this machine's own Debian bookworm binary and the libraries it links, under /usr/local/lib.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from console.host.transport.ssh import SshTransport
from tests.real.daemons import IMAGE_TAG, DaemonUnavailable, Dockerd
from tests.real.ports import free_port

CHECKOUT = Path(__file__).resolve().parents[2]
UNITS = ("sglang-qwen397b.service", "sglang-qwen122b.service")  # old, new (console/demo/hostsim/scenario.py)
OLD_UNIT, NEW_UNIT = UNITS
MOUNTED_CONSOLE = "/opt/gpuconsole"
SPEED = 10.0  # the simulated SGLang's clock: a 25 s boot in 2.5 s


def unit_text(name: str, server_port: int) -> str:
    """The seed unit as the simulator writes it (console/demo/hostsim/services.py), on this host's root."""
    text = (CHECKOUT / "console/demo/hostsim/units" / name).read_text().replace("{ROOT}", "")
    return text.replace("--port 30000", f"--port {server_port}")


def sim_dropin(name: str, speed: float = SPEED, **extra: str) -> str:
    """The simulated SGLang's environment, as the simulator gives it (services.UnitRunner._start)."""
    env = {"PYTHONPATH": f"/opt/sglang/pylib:{MOUNTED_CONSOLE}", "PYTHONUNBUFFERED": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "GPUSIM_ROOT": "/var/lib/gpusim", "GPUSIM_SPEED": f"{speed:g}",
           "GPUSIM_UNIT": name, **extra}
    return "[Service]\n" + "".join(f'Environment="{k}={v}"\n' for k, v in env.items())


CURL_DIR = "usr/local/lib/gpuconsole-curl"


def stage_curl(stage: Path) -> bool:
    """This machine's curl (Debian bookworm, as the image) and the libraries `ldd` names that the
    image may lack, with a wrapper at /usr/local/bin/curl; False when this machine has no curl."""
    curl = shutil.which("curl")
    if curl is None:
        return False
    ldd = subprocess.run(["ldd", curl], capture_output=True, text=True, timeout=30, check=False).stdout
    target = stage / CURL_DIR
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(curl, target / "curl")
    for line in ldd.splitlines():
        parts = line.split("=>")
        lib = parts[1].split()[0] if len(parts) == 2 and parts[1].split() else ""
        name = Path(lib).name
        if lib.startswith("/") and not name.startswith(("libc.so", "ld-linux", "libm.so")):
            shutil.copy2(lib, target / name)  # copy2 follows the versioned symlink to the library
    wrapper = stage / "usr/local/bin/curl"
    wrapper.parent.mkdir(parents=True, exist_ok=True)
    wrapper.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH=/{CURL_DIR} exec /{CURL_DIR}/curl "$@"\n')
    wrapper.chmod(0o755)
    return True


@dataclass
class SystemdHost:
    dockerd: Dockerd
    container: str
    ssh_port: int
    server_port: int
    directory: Path
    client_key: Path
    known_hosts: Path
    versions: dict[str, str] = field(default_factory=dict)
    has_curl: bool = False

    # -- inside the container ---------------------------------------------------------------
    def sh(self, script: str, *, timeout_s: float = 60, check: bool = False) -> subprocess.CompletedProcess[str]:
        """`sh -c SCRIPT` in the container, as root (docker exec: the tests' side door, not the console's)."""
        run = self.dockerd.docker("exec", self.container, "sh", "-c", script, check=False, timeout_s=timeout_s)
        if check and run.returncode != 0:
            raise AssertionError(f"{script!r} -> rc {run.returncode}: {(run.stdout + run.stderr).strip()[-800:]}")
        return run

    def put(self, path: str, text: str, mode: str = "644") -> None:
        q = shlex.quote(path)
        run = self.dockerd.docker("exec", "-i", self.container, "sh", "-c",
                                  f"mkdir -p -- \"$(dirname -- {q})\" && cat > {q} && chmod {mode} -- {q}",
                                  check=False, input=text)
        assert run.returncode == 0, run.stderr

    def show(self, unit: str, *props: str) -> dict[str, str]:
        run = self.sh(f"systemctl show -p {','.join(props)} -- {shlex.quote(unit)}", check=True)
        return dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)

    def wait(self, predicate: object, timeout_s: float, what: str, interval_s: float = 0.2) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():  # type: ignore[operator]
                return
            time.sleep(interval_s)
        raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")

    def healthy(self, port: int) -> bool:
        """The server on PORT answers /health (asked from inside the host)."""
        return self.sh("python3 -c \"import urllib.request as u; "
                       f"u.urlopen('http://127.0.0.1:{port}/health', timeout=2)\"").returncode == 0

    def reset_units(self) -> None:
        """Both seed units stopped, their failure states cleared, the seed files and drop-ins back."""
        names = " ".join(UNITS)
        self.sh(f"systemctl stop {names} sglang-test-*.service 2>/dev/null; "
                f"systemctl reset-failed 2>/dev/null; rm -rf /etc/systemd/system/sglang-test-*", timeout_s=90)
        for name in UNITS:
            self.put(f"/etc/systemd/system/{name}", unit_text(name, self.server_port))
            self.sh(f"rm -rf /etc/systemd/system/{name}.d")
            self.put(f"/etc/systemd/system/{name}.d/50-gpusim.conf", sim_dropin(name))
        self.sh("systemctl daemon-reload", check=True)

    def account(self, *units: str, lines: int = 25) -> str:
        """What systemd and the units' own lines say of UNITS (`systemctl status`, the journal's last
        LINES): the real reason when a unit did not come up, for a fixture's failure message."""
        said = []
        for unit in units:
            q = shlex.quote(unit)
            run = self.sh(f"systemctl status --no-pager --lines=0 -- {q}; journalctl -u {q} --no-pager -n {lines}",
                          timeout_s=60)
            said.append(f"--- {unit}:\n{(run.stdout + run.stderr).strip()}")
        return "\n".join(said)

    # -- the console's side -----------------------------------------------------------------
    def ssh_options(self, **overrides: object) -> object:
        from console.host.transport.ssh import SshOptions

        values: dict[str, object] = dict(host="127.0.0.1", port=self.ssh_port, user="root",
                                         identity=str(self.client_key), known_hosts=str(self.known_hosts),
                                         ssh_config=(), connect_timeout_s=10)
        values.update(overrides)
        return SshOptions(**values)  # type: ignore[arg-type]

    def transport(self) -> object:
        from console.host.transport.ssh import SshTransport

        return SshTransport(self.ssh_options())  # type: ignore[arg-type]

    def drop_ssh_connections(self) -> None:
        """Cut every SSH connection from the host's side (the per-connection sshd processes)."""
        self.sh("for p in $(pgrep -f 'sshd: root'); do kill -9 $p; done")


_SSHD_DROPIN = """[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
"""


def require_curl(host: SystemdHost, what: str) -> None:
    """A test whose swap runs the host's curl (`what` says which call) needs this machine's curl
    staged into the container: skipped without one, failed on CI, where it must be there."""
    if host.has_curl:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} runs the host's curl: this machine has none to give the container")
    pytest.skip(f"this machine has no curl to give the container ({what} runs it)")


def _sshd_config(port: int) -> str:
    return (f"Port {port}\nListenAddress 127.0.0.1\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nUsePAM no\nUseDNS no\n")


@contextlib.contextmanager
def systemd_host(dockerd: Dockerd, timeout_s: float = 90) -> Iterator[SystemdHost]:
    """One booted container (about a second to `running` on a quiet machine), removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="gcs-", dir="/tmp"))
    key = directory / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuconsole-real-systemd", "-f", str(key)],
                   check=True, timeout=30)
    # The old unit's port, the next one (a beside plan's new unit takes it) and one after (a router):
    # ports nothing else on the machine takes meanwhile (tests/real/ports.py says why).
    ssh_port, server_port = free_port(), free_port(3)
    image = dockerd.ensure_image(IMAGE_TAG)
    run = dockerd.docker("create", "--network", "host", "--cap-add", "SYS_ADMIN", "--cgroupns=private",
                         "--tmpfs", "/sys/fs/cgroup", "--tmpfs", "/run", "--tmpfs", "/run/lock",
                         "-v", f"{CHECKOUT / 'console'}:{MOUNTED_CONSOLE}/console:ro",
                         image, "/sbin/init", check=False)
    if run.returncode != 0:
        raise DaemonUnavailable(f"docker create failed: {run.stderr.strip()[-300:]}")
    container = run.stdout.strip()
    host = SystemdHost(dockerd, container, ssh_port, server_port, directory, key, directory / "known_hosts")
    try:
        stage = directory / "stage"
        files = {
            "etc/ssh/sshd_config.d/gpuconsole-test.conf": _sshd_config(ssh_port),
            "etc/systemd/system/ssh.service.d/hostkeys.conf": _SSHD_DROPIN,
            "root/.ssh/authorized_keys": (key.with_suffix(".pub")).read_text(),
            "usr/local/bin/nvidia-smi": (Path(__file__).parent / "standin_nvidia_smi.py").read_text(),
        }
        for name in UNITS:
            files[f"etc/systemd/system/{name}"] = unit_text(name, server_port)
            files[f"etc/systemd/system/{name}.d/50-gpusim.conf"] = sim_dropin(name)
        for rel, text in files.items():
            path = stage / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (stage / "root/.ssh").chmod(0o700)
        (stage / "root/.ssh/authorized_keys").chmod(0o600)
        (stage / "usr/local/bin/nvidia-smi").chmod(0o755)
        host.has_curl = stage_curl(stage)
        # The simulated SGLang: `python -m sglang.launch_server` from the mounted checkout.
        (stage / "opt/sglang/.venv/bin").mkdir(parents=True)
        (stage / "opt/sglang/.venv/bin/python").symlink_to("/usr/bin/python3")
        (stage / "opt/sglang/pylib").mkdir(parents=True)
        (stage / "opt/sglang/pylib/sglang").symlink_to(f"{MOUNTED_CONSOLE}/console/demo/hostsim/fake_sglang")
        (stage / "var/lib/gpusim").mkdir(parents=True)
        (stage / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
        (stage / "etc/systemd/system/multi-user.target.wants/ssh.service").symlink_to(
            "/lib/systemd/system/ssh.service")
        tar = subprocess.run(["tar", "-C", str(stage), "--owner=0", "--group=0", "-cf", "-", "."],
                             capture_output=True, check=True, timeout=60).stdout
        cp = subprocess.run([dockerd.clis[0], "cp", "-", f"{container}:/"], input=tar, capture_output=True,
                            env=dockerd.env(), timeout=60, check=False)
        if cp.returncode != 0:
            raise DaemonUnavailable(f"docker cp failed: {cp.stderr.decode(errors='replace')[-300:]}")
        dockerd.docker("start", container)
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            state = host.sh("systemctl is-system-running 2>&1", timeout_s=20).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.2)
        else:
            logs = dockerd.docker("logs", "--tail", "20", container, check=False)
            raise DaemonUnavailable(f"systemd did not reach running within {timeout_s:.0f} s ({state}): "
                                    + (logs.stdout + logs.stderr)[-600:])
        host.wait(lambda: host.sh("test -s /etc/ssh/ssh_host_ed25519_key.pub && "
                                  f"ss -ltn | grep -q '127.0.0.1:{ssh_port} '").returncode == 0,
                  30, "sshd listening")
        pub = host.sh("cat /etc/ssh/ssh_host_ed25519_key.pub", check=True).stdout.split()
        host.known_hosts.write_text(f"[127.0.0.1]:{ssh_port} {pub[0]} {pub[1]}\n")
        host.versions = {
            "systemd": host.sh("systemctl --version | head -1").stdout.strip(),
            "journalctl": host.sh("journalctl --version | head -1").stdout.strip(),
            "image": IMAGE_TAG,
            "dockerd": dockerd.docker("version", "--format", "{{.Server.Version}}").stdout.strip(),
        }
        yield host
    finally:
        dockerd.docker("rm", "-f", container, check=False, timeout_s=120)
        subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], timeout=60, check=False)


@pytest.fixture(scope="module")
def real_host(dockerd: Dockerd) -> Iterator[SystemdHost]:
    """One systemd container per test module (boot is about a second); the units reset per test
    by the tests that change them (`SystemdHost.reset_units`)."""
    try:
        with systemd_host(dockerd) as host:
            yield host
    except DaemonUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


DATA = CHECKOUT / "tests" / "data" / "real"


def record(host: SystemdHost, name: str, captures: list[dict[str, object]]) -> Path:
    """Real output captured by a test, with the versions and the exact commands beside it
    (tests/data/PROVENANCE.md lists the files). Rewritten only when missing or when
    GPUCONSOLE_RECORD_REAL=1: ids and times differ each run, the shapes do not."""
    import json
    import os

    path = DATA / name
    if path.exists() and os.environ.get("GPUCONSOLE_RECORD_REAL") != "1":
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    body = {"_note": "Captured by tests/real (real systemd as PID 1 in a container: tests/real/systemd_host.py); "
                     "commands run as root inside it.",
            "versions": host.versions, "captures": captures}
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    return path


def capture(host: SystemdHost, command: str, timeout_s: float = 60) -> dict[str, object]:
    run = host.sh(command, timeout_s=timeout_s)
    return {"command": command, "rc": run.returncode, "stdout": run.stdout, "stderr": run.stderr}


@contextlib.asynccontextmanager
async def connected(host: SystemdHost) -> AsyncIterator[SshTransport]:
    """The console's SSH transport to the real systemd host, connected for the block."""
    transport = host.transport()
    assert isinstance(transport, SshTransport)
    await transport.connect()
    try:
        yield transport
    finally:
        await transport.close()


# -- the host's own records, for the tests that read a swap's report against them -----------------------
def journal_at_s(entry: dict[str, object]) -> float:
    return int(str(entry["__REALTIME_TIMESTAMP"])) / 1e6


def unit_lines(host: SystemdHost, unit: str, since_s: float) -> list[tuple[float, int, str]]:
    """The unit's own lines (its server's, not systemd's): (the host's time, _PID, MESSAGE), oldest first."""
    out = host.sh(f"journalctl -u {shlex.quote(unit)} -o json --all --no-pager "
                  f"--output-fields=MESSAGE,_PID,_SYSTEMD_UNIT --since=@{int(since_s)}", timeout_s=60, check=True).stdout
    return [(journal_at_s(e), int(e["_PID"]), str(e.get("MESSAGE"))) for e in map(json.loads, out.splitlines())
            if e.get("_SYSTEMD_UNIT") == unit]


def systemd_lines(host: SystemdHost, since_s: float, *units: str) -> list[tuple[float, str]]:
    """systemd's own journal lines about the units (PID 1's: Started, Stopping, Stopped ...): (time, MESSAGE)."""
    args = " ".join(f"-u {shlex.quote(u)}" for u in units)
    out = host.sh(f"journalctl {args} -o json --all --no-pager --output-fields=MESSAGE,_SYSTEMD_UNIT "
                  f"--since=@{int(since_s)}", timeout_s=60, check=True).stdout
    return [(journal_at_s(e), str(e.get("MESSAGE"))) for e in map(json.loads, out.splitlines())
            if e.get("_SYSTEMD_UNIT") == "init.scope"]


def said_by_systemd(lines: list[tuple[float, str]], pattern: str, after_s: float = 0.0) -> float:
    """The host's time of systemd's first line (of `systemd_lines`) matching PATTERN at or after a time."""
    found = [at for at, message in lines if re.match(pattern, message) and at >= after_s]
    assert found, f"systemd logged no {pattern!r} after {after_s:.3f}: {[m for _, m in lines]}"
    return found[0]
