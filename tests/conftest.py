"""Shared fixtures: the in-process host simulator, and OpenSSH's sshd on 127.0.0.1.

With CI=true a missing sshd fails the run instead of skipping (the CI must test real OpenSSH).

Every test has its own HOME, XDG dirs and TMPDIR (tests/kit/isolation.py): nothing reaches the real
user's data, and the run fails when the real user's gpuconsole dirs change while it runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import hypothesis  # noqa: F401 - imported first: a late import (the plugin's summary) hits CPython 3.11.7's "AST constructor recursion depth mismatch"
import pytest

from console.demo.hostsim import HostSimulator
from console.demo.sshd import Sshd
from console.host.transport import LocalTransport, Transport
from console.host.transport.ssh import SshTransport
from tests.kit import netguard
from tests.kit.hosts import DATA, require_sshd, sim_options, wait_for  # noqa: F401 - also for older imports
from tests.kit.isolation import XDG_DEFAULTS, leftovers, snapshot_user_dirs, split_changes, user_dirs

# The real user's dirs, read when the suite is imported: before any test changes the environment.
REAL_HOME = Path(os.path.expanduser("~"))
REAL_DIRS = user_dirs(os.environ, REAL_HOME)
REAL_BEFORE = snapshot_user_dirs(REAL_DIRS)

# Loopback only: a test (or a fixture, a thread, a demo it started in this process) that resolves
# or connects anywhere else is refused at the call and fails at teardown (tests/kit/netguard.py).
netguard.install()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    netguard.begin(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)  # every fixture's teardown first: a violation there counts too
    finally:
        netguard.begin(None)
        found = netguard.take(item.nodeid) + netguard.take(None)
        if found:
            pytest.fail("the test reached beyond loopback (tests may talk to 127.0.0.0/8 and ::1 only): "
                        + netguard.describe(found), pytrace=False)


def _isolate(mp: pytest.MonkeyPatch, base: Path) -> None:
    """HOME, XDG_{CONFIG,DATA,STATE,CACHE}_HOME, XDG_RUNTIME_DIR and TMPDIR under `base` (short:
    AF_UNIX socket paths must stay under 108 bytes). Child processes inherit them."""
    home = base / "home"
    home.mkdir()
    mp.setenv("HOME", str(home))
    for var, default in XDG_DEFAULTS.items():
        (home / default).mkdir(parents=True)
        mp.setenv(var, str(home / default))
    (base / "run").mkdir(mode=0o700)
    mp.setenv("XDG_RUNTIME_DIR", str(base / "run"))
    (base / "tmp").mkdir()
    mp.setenv("TMPDIR", str(base / "tmp"))
    mp.setattr(tempfile, "tempdir", str(base / "tmp"))
    # Set by a demo in this process (the Hub cache it writes): never seen by the next test.
    mp.delenv("GPUCONSOLE_CACHE_DIR", raising=False)


def _fail_on_leftovers(tmp: Path, when: str) -> None:
    left = leftovers(tmp)
    if left:
        names = ", ".join(p.name for p in left)
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"{when} left temporary directories behind (demo caches or sandboxes): {names}")


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Session- and module-scoped fixtures get an isolated HOME too; at the end, the real user's
    gpuconsole dirs must be as they were (issue 22 item 21: tests once wrote bench runs and
    recordings there)."""
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where it is
    base = Path(tempfile.mkdtemp(prefix="gcs-"))
    with pytest.MonkeyPatch.context() as mp:
        _isolate(mp, base)
        yield base
    try:
        _fail_on_leftovers(base / "tmp", "session- or module-scoped fixtures")
        changes, outside = split_changes(REAL_BEFORE, snapshot_user_dirs(REAL_DIRS), os.getpid())
        if outside:  # a console the user runs beside the tests: its files, not the tests'
            print("\nthe real user's gpuconsole dirs changed by processes outside the tests:\n  "
                  + "\n  ".join(outside[:20]))
        if changes:
            pytest.fail("the test run changed the real user's gpuconsole dirs (no process outside the tests "
                        "holds these open; a console run beside the tests and since closed would also show "
                        "here):\n  " + "\n  ".join(changes[:20]))
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _test_home(_session_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's own HOME, XDG dirs and TMPDIR; what the test leaves in its TMPDIR is checked."""
    base = Path(tempfile.mkdtemp(prefix="t", dir=_session_home))
    _isolate(monkeypatch, base)
    yield base
    try:
        _fail_on_leftovers(base / "tmp", "this test")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def sim(tmp_path: Path) -> AsyncIterator[HostSimulator]:
    simulator = HostSimulator(tmp_path / "host")
    await simulator.start()
    try:
        yield simulator
    finally:
        await simulator.stop()


@pytest.fixture
async def sim_transport(sim: HostSimulator) -> AsyncIterator[SshTransport]:
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        yield transport
    finally:
        await transport.close()


@pytest.fixture(params=["sim", "sshd", "local"])
async def transport(request: pytest.FixtureRequest, sim: HostSimulator) -> AsyncIterator[Transport]:
    """One transport of each kind (the simulator's SSH, OpenSSH's sshd, a local shell), connected:
    the transport tests (test_transport.py, test_poll_watchdog.py) hold for all three."""
    if request.param == "local":
        t: Transport = LocalTransport()
    elif request.param == "sim":
        t = SshTransport(sim_options(sim))
    else:
        server: Sshd = request.getfixturevalue("sshd")
        t = SshTransport(server.options())
    await t.connect()
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    """OpenSSH's sshd on 127.0.0.1 with temporary keys, for this test session only."""
    from console.demo.sshd import SshdError, start_sshd

    require_sshd()
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SshdError as exc:
        pytest.fail(str(exc))
    try:
        yield server
    finally:
        server.stop()


