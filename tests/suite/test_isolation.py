"""Issue 22 items 21-22: tests never write into the real user's data, and leave no demo caches.

The conftest fixtures give every test its own HOME, XDG dirs and TMPDIR; these tests check that
the product's default paths land there, that the checks the conftest makes at teardown see what
they are meant to see, and that a demo keeps its actions and caches to itself."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tests.conftest import REAL_DIRS, REAL_HOME  # the real user's dirs as the suite found them at its start
from tests.kit.isolation import describe_changes, leftovers, snapshot_user_dirs, user_dirs


def test_each_test_has_its_own_home_and_xdg_dirs(_test_home: Path) -> None:
    home = Path(os.environ["HOME"])
    assert home != REAL_HOME and home.is_relative_to(_test_home)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"):
        assert Path(os.environ[var]).is_dir() and Path(os.environ[var]).is_relative_to(_test_home), var
    assert Path(tempfile.gettempdir()).is_relative_to(_test_home)
    assert Path(os.path.expanduser("~")) == home
    # No dir of the real user's is among this test's.
    assert not any(d.is_relative_to(_test_home) for d in REAL_DIRS)


def test_the_products_default_paths_are_the_tests_own(_test_home: Path) -> None:
    from console.domain.bench.store import default_path
    from console.config import config_search_paths
    from console.core.recording import default_dir
    from console.host.hub import cache_dir
    from console.share.server import runtime_dir
    from console.domain.swap.controller import audit_path

    paths = [audit_path(), audit_path(demo=True), default_dir(), default_path(), default_path(demo=True),
             cache_dir(), runtime_dir(), *config_search_paths()]
    for path in paths:
        assert path.is_relative_to(_test_home), path


def test_the_session_check_sees_a_file_written_into_the_user_dirs(tmp_path: Path) -> None:
    """What the conftest compares at the end of the run: an added or rewritten file is named."""
    home = tmp_path / "someone"
    dirs = user_dirs({}, home)
    data = home / ".local/share/gpuconsole"
    (data / "recordings").mkdir(parents=True)
    (data / "audit.jsonl").write_text("{}\n")
    before = snapshot_user_dirs(dirs)
    assert before == snapshot_user_dirs(dirs)
    assert describe_changes(before, snapshot_user_dirs(dirs)) == []
    (data / "bench.jsonl").write_text('{"mock": 1}\n')
    (data / "audit.jsonl").write_text("{}\n{}\n")
    changes = describe_changes(before, snapshot_user_dirs(dirs))
    assert changes == [f"added: {data / 'bench.jsonl'}", f"changed: {data / 'audit.jsonl'}"]


def test_the_leftover_check_names_a_demo_cache_and_a_sandbox(tmp_path: Path) -> None:
    (tmp_path / "gpuconsole-demo-cache-abc").mkdir()
    (tmp_path / "gpusim-xyz").mkdir()
    (tmp_path / "unrelated").mkdir()
    assert [p.name for p in leftovers(tmp_path)] == ["gpuconsole-demo-cache-abc", "gpusim-xyz"]


def test_a_demos_actions_go_to_the_demos_own_audit_file() -> None:
    from console.domain.swap.controller import SwapController, audit_path

    def controller(demo: bool) -> SwapController:
        session = SimpleNamespace(demo=demo, profile=SimpleNamespace())
        from console.core.state import HostState

        return SwapController(SimpleNamespace(state=HostState("h"), host="h", session=session))

    assert controller(demo=True).audit_file == audit_path(demo=True)
    assert controller(demo=False).audit_file == audit_path()
    assert audit_path(demo=True) != audit_path()
    assert audit_path(demo=True).parent == audit_path().parent


def test_the_fleet_demo_removes_its_hub_cache() -> None:
    """A fleet demo once left one /tmp/gpuconsole-demo-cache-* per run (issue 22 item 22)."""
    from console.demo.fleet_demo import FleetSimulator

    tmp = Path(tempfile.gettempdir())
    sim = FleetSimulator(1, speed=0.2, exporters=False)
    try:
        sim.start()
        assert [p.name.startswith("gpuconsole-demo-cache-") for p in tmp.iterdir()].count(True) == 1
    finally:
        sim.stop()
    assert not [p for p in leftovers(tmp) if p.name.startswith("gpuconsole-demo-cache-")]


def test_a_recording_a_console_outside_the_tests_writes_is_not_blamed_on_the_tests(tmp_path: Path) -> None:
    """Issue 35 item 12: a `serve --demo` the user runs during the suite writes its recording under
    the real data dir; the guard blamed "the test run". A file held open by a process outside the
    tests' own (here a double-forked one, reparented away from pytest) is said as that process's."""
    import subprocess
    import sys
    import time

    from tests.kit.isolation import split_changes

    dirs = [tmp_path / "data" / "gpuconsole"]
    (dirs[0] / "recordings").mkdir(parents=True)
    before = snapshot_user_dirs(dirs)
    theirs = dirs[0] / "recordings" / "demo-outside.jsonl.gz"
    script = ("import os,sys,time\n"
              "if os.fork(): sys.exit(0)\n"
              "os.setsid()\n"
              "open(sys.argv[2], 'w').write(str(os.getpid()))\n"
              "f = open(sys.argv[1], 'w'); f.write('x'); f.flush()\n"
              "time.sleep(60)\n")
    pid_file = tmp_path / "outside.pid"
    subprocess.run([sys.executable, "-c", script, str(theirs), str(pid_file)], check=True, timeout=30)
    ours = dirs[0] / "recordings" / "from-a-test.jsonl.gz"
    ours.write_text("y")
    deadline = time.monotonic() + 30
    outside: list[str] = []
    try:
        while time.monotonic() < deadline:
            mine, outside = split_changes(before, snapshot_user_dirs(dirs), os.getpid())
            if outside:
                break
            time.sleep(0.1)
        assert [line for line in mine if "from-a-test" in line] and not [line for line in mine if "outside" in line]
        assert len(outside) == 1 and "demo-outside" in outside[0] and "not a test's process" in outside[0]
    finally:
        import signal

        for _ in range(100):  # the one process this test started outside its tree, by its id
            if pid_file.exists() and pid_file.read_text():
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
                break
            time.sleep(0.1)


def test_a_serve_outside_the_tests_is_not_blamed_for_its_socket_token_or_new_directories(tmp_path: Path) -> None:
    """Issue 35 item 12, walked: a `gpuconsole --demo serve` run beside the suite made its socket, the
    socket's token file and recordings/demo/ (its recording, held open, was already said as its);
    the guard still blamed "the test run" for the other three. A socket is its listener's (the
    kernel's table of Unix sockets), a file named after a socket is that socket's owner's, and a
    directory is theirs when everything that changed beneath it is."""
    import signal
    import subprocess
    import sys
    import time

    from tests.kit.isolation import split_changes

    data, run = tmp_path / "data" / "gpuconsole", tmp_path / "run" / "gpuconsole"
    data.mkdir(parents=True)
    (data / "recordings").mkdir()
    before = snapshot_user_dirs([data, run])
    script = ("import os,sys,time,socket,pathlib\n"
              "if os.fork(): sys.exit(0)\n"
              "os.setsid()\n"
              "data, run, pid_file = map(pathlib.Path, sys.argv[1:4])\n"
              "run.mkdir(parents=True)\n"
              "s = socket.socket(socket.AF_UNIX); s.bind(str(run / 'h-1.sock')); s.listen()\n"
              "(run / 'h-1.sock.token').write_text('t')\n"
              "(data / 'recordings' / 'demo').mkdir()\n"
              "f = open(data / 'recordings' / 'demo' / 'h-1.jsonl.gz', 'w'); f.write('x'); f.flush()\n"
              "pid_file.write_text(str(os.getpid()))\n"
              "time.sleep(60)\n")
    pid_file = tmp_path / "outside.pid"
    subprocess.run([sys.executable, "-c", script, str(data), str(run), str(pid_file)], check=True, timeout=30)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (pid_file.exists() and pid_file.read_text()):
            time.sleep(0.1)
        mine, outside = split_changes(before, snapshot_user_dirs([data, run]), os.getpid())
        assert mine == [], mine
        said = "\n".join(outside)
        for name in ("h-1.sock ", "h-1.sock.token", "recordings/demo ", "h-1.jsonl.gz"):
            assert name in said + " ", (name, said)
        # a file a test wrote beside them is still the test run's
        (run / "from-a-test").write_text("y")
        mine, _ = split_changes(before, snapshot_user_dirs([data, run]), os.getpid())
        assert f"added: {run / 'from-a-test'}" in mine and not [m for m in mine if "h-1" in m], mine
    finally:
        if pid_file.exists() and pid_file.read_text():  # the one process this test started outside its tree
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
