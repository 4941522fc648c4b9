"""A second demo started within half an hour of the first listed the first one's commands (its sha256,
its stop and start of the old and new units, its benchmark) as its plan's last commands: both demos'
hosts are 127.0.0.1, and the demo's audit log was one file for every run, read back as a console
that ended mid-swap. The simulated host is born with its run, so the run's audit log is its own
(in the demo's directory, removed with it); the user's audit log and the demos' file are not read."""

from __future__ import annotations

import json
import time
from pathlib import Path

from console.config import HostProfile
from console.demo.hostsim.process import SimulatorThread
from console.domain.swap.controller import audit_path
from console.host.session import HostSession, make_transport
from console.ui.app import ConsoleApp


def _earlier_demos_commands(path: Path, now: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    rows = [{"host": "127.0.0.1", "who": "zoe", "at_s": now - 120 + i, "action": action, "command": command,
             "exit_status": 0, "duration_s": 1.0, "output_tail": ""}
            for i, (action, command) in enumerate([("stop", "timeout -k 5 90 systemctl stop -- old.service"),
                                                   ("start", "timeout -k 5 90 systemctl start -- new.service")])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path.chmod(0o600)


def test_a_demo_console_with_its_runs_audit_log_reads_no_earlier_demos(tmp_path: Path) -> None:
    now = time.time()
    for earlier in (audit_path(demo=True), audit_path()):
        _earlier_demos_commands(earlier, now)
    profile = HostProfile(name="demo", host="127.0.0.1", port=1, unit="new.service", compare_unit="old.service")
    own = tmp_path / "run" / "audit.jsonl"
    app = ConsoleApp.for_session(HostSession(profile, make_transport(profile), demo=True, audit_file=own))
    assert app.runner.swap.audit_file == own
    assert [e.who for e in app.state.swap.audit] == []


def test_the_cli_demos_audit_log_is_its_runs_own_and_goes_with_it() -> None:
    sim = SimulatorThread(speed=4.0)
    try:
        sim.start()
        own = sim.audit_file
        assert own is not None and sim.cache_root is not None and own.parent == sim.cache_root
        assert own != audit_path(demo=True) and own != audit_path()
    finally:
        sim.stop()
    assert not own.parent.exists()
