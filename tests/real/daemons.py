"""Real witnesses: a real `dockerd` started by the tests, and the root filesystem its images come from.

Nothing here touches the machine's own Docker (if any), its network or its cgroup tree:

- `dockerd` runs with its own `--data-root`, `--exec-root`, `--pidfile` and socket under a directory of
  the test run, with `--bridge=none --iptables=false --ip6tables=false` (no network is created or
  changed); containers use `--network host` or none, so a server inside listens on this machine's
  loopback like the simulator does.
- No registry is reachable: images are `docker import`ed from a root filesystem built once with
  `debootstrap --variant=minbase` from the Debian mirror this machine's apt already uses (read from
  /etc/apt/sources.list.d or /etc/apt/sources.list at run time) and cached as a tarball under
  `GPUCONSOLE_TEST_CACHE` (default /var/tmp/gpuconsole-test-cache): one image serves the containers
  (python3 runs the simulated SGLang server) and systemd as PID 1 (systemd, journald, dbus, sshd).
- `require_dockerd()` skips without Debian's docker.io, and fails under CI=true: the CI must test
  against the real daemon (research/real_daemons.md).

Facts measured on this machine kind are in ../shared/docs/research/real_daemons.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# The packages of the one test image: the simulated SGLang needs python3 (stdlib only), systemd as
# PID 1 needs the rest. Part of the cache key: a change rebuilds the root filesystem.
IMAGE_PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "procps", "iproute2")
SUITE = "bookworm"
IMAGE_TAG = "gpuconsole-test/bookworm:1"

CACHE = Path(os.environ.get("GPUCONSOLE_TEST_CACHE", "/var/tmp/gpuconsole-test-cache"))

# Debian's CLI (20.10) and a newer static CLI (28.x, often first on PATH) print differently
# (research/real_daemons.md): the tests can run a command with both.
DEBIAN_DOCKER_CLI = "/usr/bin/docker"


class DaemonUnavailable(RuntimeError):
    """The real daemon cannot run here (not installed, not root, failed to start)."""


def find_dockerd() -> str | None:
    return shutil.which("dockerd") or ("/usr/sbin/dockerd" if os.access("/usr/sbin/dockerd", os.X_OK) else None)


def docker_clis() -> list[str]:
    """Every distinct Docker CLI on this machine, PATH's first: the tests compare their outputs."""
    found: list[str] = []
    first = shutil.which("docker")
    for cli in (first, DEBIAN_DOCKER_CLI):
        if cli and os.access(cli, os.X_OK) and os.path.realpath(cli) not in {os.path.realpath(c) for c in found}:
            found.append(cli)
    return found


def require_dockerd() -> str:
    """dockerd can run here, else skip (fail under CI=true: CI must test against the real daemon)."""
    why = None
    dockerd = find_dockerd()
    if dockerd is None:
        why = "dockerd is missing (apt-get install docker.io)"
    elif os.geteuid() != 0:
        why = "the real-daemon tests run dockerd as root (CI does)"
    elif not docker_clis():
        why = "no docker CLI on PATH (apt-get install docker.io)"
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}: CI must test against the real Docker daemon", pytrace=False)
        pytest.skip(why)
    assert dockerd is not None
    return dockerd


def apt_mirror() -> str:
    """The Debian mirror this machine's apt already uses (deb822 `URIs:` or one-line `deb URL SUITE`)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for match in re.finditer(r"^URIs:\s*(\S+)", text, re.M):
            if "security" not in match.group(1):
                return match.group(1)
        for match in re.finditer(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", text, re.M):
            if "security" not in match.group(1):
                return match.group(1)
    raise DaemonUnavailable("no Debian mirror found in /etc/apt (debootstrap needs one)")


def _cache_key() -> str:
    return f"{SUITE}-" + "-".join(IMAGE_PACKAGES)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time across xdist workers and concurrent runs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def rootfs_tarball(timeout_s: float = 900) -> Path:
    """The cached root filesystem tarball, built with debootstrap the first time (about a minute on
    a quiet 2-core machine, ~320 MB unpacked). Safe to call from several processes at once."""
    tar = CACHE / f"rootfs-{_cache_key()}.tar"
    if tar.exists():
        return tar
    if shutil.which("debootstrap") is None:
        raise DaemonUnavailable("debootstrap is missing (apt-get install debootstrap)")
    with _locked(CACHE / "rootfs.lock"):
        if tar.exists():
            return tar
        build = Path(tempfile.mkdtemp(prefix="rootfs-", dir=CACHE))
        try:
            target = build / "root"
            cmd = ["debootstrap", "--variant=minbase", "--include=" + ",".join(IMAGE_PACKAGES), SUITE,
                   str(target), apt_mirror()]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            if run.returncode != 0:
                tail = (run.stdout + run.stderr).strip().splitlines()[-5:]
                raise DaemonUnavailable("debootstrap failed: " + " | ".join(tail))
            # No apt caches in the image; sshd's host keys are made per container at start.
            shutil.rmtree(target / "var/cache/apt/archives", ignore_errors=True)
            for key in (target / "etc/ssh").glob("ssh_host_*"):
                key.unlink()
            partial = build / "rootfs.tar"
            subprocess.run(["tar", "-C", str(target), "--numeric-owner", "-cf", str(partial), "."],
                           check=True, timeout=300)
            partial.rename(tar)
        finally:
            subprocess.run(["rm", "-rf", "--one-file-system", str(build)], timeout=300, check=False)
    return tar


@dataclass
class Dockerd:
    """A running dockerd of the test run's own: its socket, where it keeps everything, how to stop it."""

    root: Path
    process: subprocess.Popen[bytes]
    socket: Path
    log_path: Path
    clis: list[str] = field(default_factory=docker_clis)

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a docker CLI (or the console's docker source) talking to this daemon."""
        env = dict(os.environ)
        env["DOCKER_HOST"] = self.host
        env.pop("DOCKER_CONTEXT", None)
        env["DOCKER_CONFIG"] = str(self.root / "cli-config")
        env.update(extra)
        return env

    def docker(self, *args: str, cli: str | None = None, timeout_s: float = 120, check: bool = True,
               input: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run `docker ARGS` against this daemon (PATH's CLI unless `cli` names another)."""
        argv = [cli or self.clis[0], *args]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=self.env(), input=input)
        if check and run.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} -> rc {run.returncode}: {run.stderr.strip()[-500:]}")
        return run

    def ensure_image(self, tag: str = IMAGE_TAG) -> str:
        """The test image, `docker import`ed from the cached root filesystem if this daemon lacks it."""
        if self.docker("image", "inspect", tag, check=False).returncode == 0:
            return tag
        tar = rootfs_tarball()
        self.docker("import", "--change", "CMD [\"/bin/bash\"]", str(tar), tag, timeout_s=600)
        return tag

    def remove_all_containers(self) -> None:
        ids = self.docker("ps", "-aq", check=False).stdout.split()
        if ids:
            self.docker("rm", "-f", *ids, check=False, timeout_s=120)

    def stop(self, *, keep_data: bool = False) -> None:
        """Stop the daemon; `keep_data` keeps its data root (a pooled root keeps the imported image)."""
        with contextlib.suppress(Exception):
            self.remove_all_containers()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        # Overlay mounts of containers that were still up are gone with the daemon, but its exec
        # root's netns/default bind mount stays: unmount what is left under the root (deepest first),
        # then remove it unless it is kept (--one-file-system: never follow into a mount that survived).
        unmount_under(self.root)
        if keep_data:
            return
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.root)], timeout=300, check=False)


def _stop_leftover_daemon(root: Path) -> None:
    """Stop a dockerd still running in `root` (its pid file names it and its command line names the
    root), then unmount what it left."""
    try:
        pid = int((root / "dockerd.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if not cmdline or not cmdline[0].endswith(b"dockerd") or str(root).encode() not in b" ".join(cmdline):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    unmount_under(root)


@contextlib.contextmanager
def pooled_root(slots: int = 8) -> Iterator[Path]:
    """A daemon root of the cache's pool, held (flock) for as long as the caller runs a dockerd in it:
    the image imported there once is found again by the next run, and two runs at the same time
    (xdist workers, two checkouts) never share one root."""
    pool = CACHE / "daemons"
    pool.mkdir(parents=True, exist_ok=True)
    for slot in range(slots):
        fh = open(pool / f"{slot}.lock", "a+")  # noqa: SIM115 - held until the caller is done
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        try:
            root = pool / str(slot)
            root.mkdir(exist_ok=True)
            # A run that was killed leaves its pid file and sockets, and maybe its daemon (started in
            # a session of its own): we hold the root's lock, so that daemon is a leftover of ours.
            _stop_leftover_daemon(root)
            for stale in ("dockerd.pid", "docker.sock"):
                with contextlib.suppress(FileNotFoundError):
                    (root / stale).unlink()
            yield root
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
        return
    raise DaemonUnavailable(f"all {slots} dockerd roots under {pool} are in use")


def unmount_under(root: Path) -> None:
    """Unmount every mount point under `root` (a dead dockerd's leftovers), deepest first."""
    prefix = str(root).rstrip("/") + "/"
    try:
        points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    for point in sorted((p for p in points if p.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, timeout=30, check=False)


# A STAND-IN of the NVIDIA container toolkit's OCI hook: dockerd registers its "nvidia" device driver
# (`--gpus`) only when `nvidia-container-runtime-hook` is on its PATH (moby daemon/nvidia_linux.go),
# and runs it as each such container's prestart hook. This one does nothing (no GPUs here), so a
# container created with `--gpus '"device=4,5,6,7"'` starts, with Docker's own DeviceRequests and
# NVIDIA_VISIBLE_DEVICES=4,5,6,7 in its environment (what tests/real/standin_nvidia_smi.py reads).
GPU_HOOK = "#!/bin/sh\n# gpuconsole tests: a stand-in nvidia-container-runtime-hook (no GPUs here)\ncat >/dev/null\nexit 0\n"


def start_dockerd(root: Path | None = None, timeout_s: float = 60, *, gpu_hook: bool = False) -> Dockerd:
    """Start a dockerd of our own and wait until it answers. Its paths are short (the exec root holds
    containerd's sockets, which must stay under 108 bytes). `gpu_hook`: with the stand-in GPU hook
    on its PATH (`--gpus` containers start; GPU_HOOK)."""
    dockerd = find_dockerd()
    if dockerd is None:
        raise DaemonUnavailable("dockerd is missing (apt-get install docker.io)")
    root = root or Path(tempfile.mkdtemp(prefix="gcd-", dir="/tmp"))
    root.mkdir(parents=True, exist_ok=True)
    (root / "cli-config").mkdir(exist_ok=True)
    socket = root / "docker.sock"
    log_path = root / "dockerd.log"
    argv = [
        dockerd,
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "x"),
        "--pidfile", str(root / "dockerd.pid"),
        "-H", f"unix://{socket}",
        "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
        "--userland-proxy=false",
    ]
    env = dict(os.environ)
    if gpu_hook:
        hook_dir = root / "gpu-hook"
        hook_dir.mkdir(exist_ok=True)
        hook = hook_dir / "nvidia-container-runtime-hook"
        hook.write_text(GPU_HOOK)
        hook.chmod(0o755)
        env["PATH"] = f"{hook_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
    log = open(log_path, "wb")  # noqa: SIM115 - the daemon's own log, kept with it
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, env=env)
    log.close()
    daemon = Dockerd(root=root, process=process, socket=socket, log_path=log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
            raise DaemonUnavailable(f"dockerd exited rc {process.returncode}: " + " | ".join(tail))
        try:
            if socket.exists() and daemon.docker("version", "--format", "{{.Server.Version}}",
                                                 check=False, timeout_s=10).returncode == 0:
                return daemon
        except subprocess.TimeoutExpired:
            pass  # the daemon is still starting (or stuck: the deadline ends it)
        time.sleep(0.2)
    daemon.stop()
    raise DaemonUnavailable(f"dockerd did not answer within {timeout_s:.0f} s (log: {log_path})")


if __name__ == "__main__":  # scripts/test.sh: build the root filesystem before the suite, once
    import sys

    try:
        print(rootfs_tarball())
    except DaemonUnavailable as exc:
        print(f"real-daemon image: {exc}", file=sys.stderr)
        sys.exit(1)
