"""`--demo-deployment` shared one audit log across runs: every node of every demo is 127.0.0.1, so a
second demo's nodes read the first one's stops and starts back from the demos' file as their own last
commands (a node's host in the file is its key, node0 in every demo), and its swap appended to it. A demo run's audit log is its own (in the run's directory,
removed with it): every node's session and the deployment swap write and read that file only."""

from __future__ import annotations

import json
import time
from pathlib import Path

from console.config import HostProfile
from console.demo.hostsim.deployment import DeploymentSimThread
from console.domain.deploy.profile import Deployment, DeploymentNode
from console.domain.deploy.watch import DeploymentWatch
from console.domain.swap.controller import audit_path


def _earlier_demos_commands(path: Path, now: float) -> None:
    """An earlier demo's node 0 commands, as a node's own executor writes them (its host: the node's key)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    rows = [{"host": "node0", "who": "zoe", "at_s": now - 120 + i, "action": action, "command": command,
             "exit_status": 0, "duration_s": 1.0, "output_tail": ""}
            for i, (action, command) in enumerate([("stop_old", "timeout -k 5 120 systemctl stop -- old.service"),
                                                   ("start_new", "timeout -k 5 90 systemctl start -- new.service")])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path.chmod(0o600)


def test_a_deployment_demos_nodes_read_and_write_only_the_runs_own_audit_log(tmp_path: Path) -> None:
    now = time.time()
    for earlier in (audit_path(demo=True), audit_path()):
        _earlier_demos_commands(earlier, now)
    d = Deployment("demo", "multinode", tuple(
        DeploymentNode(HostProfile(f"n{i}", "127.0.0.1", port=1, unit="new.service", compare_unit="old.service"),
                       "rank", i) for i in range(2)))
    own = tmp_path / "run" / "audit.jsonl"
    watch = DeploymentWatch(d, demo=True, audit_file=own)
    assert watch.audit_file == own
    for host in watch.fleet.hosts.values():
        assert host.runner.swap.audit_file == own
        assert [e.who for e in host.state.swap.audit] == []  # no earlier demo's commands are this node's


def test_the_cli_deployment_demos_audit_log_is_its_runs_own_and_goes_with_it() -> None:
    sim = DeploymentSimThread("multinode", speed=4.0)
    try:
        sim.start()
        own = sim.audit_file
        assert own is not None and sim.cache_root is not None and own.parent == sim.cache_root
        assert own != audit_path(demo=True) and own != audit_path()
    finally:
        sim.stop()
    assert not own.parent.exists()
