"""The command line as an operator runs it: real processes, real SSH, exit codes and stderr."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from console import __version__
from console.demo.sshd import Sshd
from tests.kit.cli import gpuconsole


def test_version() -> None:
    out = gpuconsole("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"gpuconsole {__version__}"


def test_doctor_against_openssh_meets_the_round_trip_targets(sshd: Sshd) -> None:
    out = gpuconsole("doctor", "--host", "127.0.0.1", "--port", str(sshd.port), "--user", sshd.user,
                     "--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts), "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"host", "checks", "rtt_ms"}
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["ssh"]["ok"] and checks["shell"]["ok"] and checks["sftp"]["ok"]
    assert all(set(c) == {"name", "ok", "detail"} for c in report["checks"])
    rtt = report["rtt_ms"]
    assert set(rtt) == {"persistent", "exec_channel"} and set(rtt["persistent"]) == {"p50", "p95"}
    # Behaviour, not a benchmark: the persistent shell must beat a new exec channel by far.
    assert rtt["exec_channel"]["p50"] > 5 * rtt["persistent"]["p50"]


def test_unknown_host_key_is_refused_in_one_line_with_the_fingerprint(sshd: Sshd, tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    args = ["doctor", "--host", "127.0.0.1", "--port", str(sshd.port), "--user", sshd.user,
            "--identity", str(sshd.client_key), "--known-hosts", str(known), "--runs", "2"]
    out = gpuconsole(*args)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "unknown host key" in lines[0] and "SHA256:" in lines[0] and "--accept-new-host-key" in lines[0]
    out = gpuconsole(*args, "--accept-new-host-key")
    assert out.returncode == 0, out.stderr
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519" in known.read_text()


@pytest.mark.parametrize("args, expect", [
    (["--host", "127.0.0.1", "--port", "1"], "127.0.0.1:1"),
    (["--host", "no-such-host.invalid"], "no-such-host.invalid"),
])
def test_unreachable_hosts_are_one_line_and_exit_1(args: list[str], expect: str) -> None:
    out = gpuconsole("snapshot", "--json", *args, "--connect-timeout", "3", timeout=30)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert expect in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_bad_config_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "c.toml"
    bad.write_text("[[[")
    out = gpuconsole("snapshot", "--config", str(bad))
    assert out.returncode == 2 and "not valid TOML" in out.stderr and "Traceback" not in out.stderr


def test_demo_snapshot_reports_the_simulated_host(tmp_path: Path) -> None:
    out = gpuconsole("snapshot", "--demo", "--json")
    assert out.returncode == 0, out.stderr
    snap = json.loads(out.stdout)
    assert snap["connection"]["status"] == "connected"
    assert snap["host_summary"]["hostname"] == "gpu-sim-01"
    assert {d["mount"].rsplit("/", 1)[-1] for d in snap["host_summary"]["disks"]} >= {"shared"}


def test_screenshot_after_seconds_writes_an_svg_and_exits_0(tmp_path: Path) -> None:
    shot = tmp_path / "demo.svg"
    out = gpuconsole("--demo", "--screenshot", str(shot), "--screenshot-after", "6")  # a loaded machine is slow
    assert out.returncode == 0, out.stderr
    svg = shot.read_text()
    assert svg.startswith("<svg") and "DEMO" in svg and "gpu-sim-01" in svg


def test_every_option_has_help_and_subcommands_list_only_what_they_use() -> None:
    import argparse

    from console.cli.main import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    missing = [(name, a.option_strings or a.dest) for name, p in [("gpuconsole", parser), *subs.items()]
               for a in p._actions if a.help is None]
    assert missing == []
    options = {name: {o for a in p._actions for o in a.option_strings} for name, p in subs.items()}
    for name in ("fit", "diff"):
        assert not options[name] & {"--unit", "--compare-unit", "--log-file", "--model-dir", "--repo",
                                    "--server-port"}, name
    assert "--server-port" in options["bench"] and "--unit" not in options["bench"]
    assert "--model-dir" in options["doctor"] and "--server-port" not in options["doctor"]
    assert "--unit" in options["snapshot"] and "--model-dir" in options["snapshot"]
    # --read-only is offered where the swap's actions exist (the console, serve), and the core
    # enforces it (tests/swap/test_swap.py: test_read_only_refuses_every_action_in_the_core)
    assert "--read-only" in {o for a in parser._actions for o in a.option_strings}
    assert "--read-only" in options["serve"] and "--read-only" not in options["fit"]


def test_a_closed_port_says_connection_refused() -> None:
    from console.demo.sshd import free_port

    out = gpuconsole("snapshot", "--json", "--host", "127.0.0.1", "--port", str(free_port()), "--user", "root",
                     "--connect-timeout", "3", timeout=30)
    assert out.returncode == 1 and "connection refused" in out.stderr and "Connect call failed" not in out.stderr


def test_the_snapshot_names_the_connection_time_for_what_it_is() -> None:
    before = time.time()
    out = gpuconsole("snapshot", "--demo", "--json")
    after = time.time()
    assert out.returncode == 0, out.stderr
    connection = json.loads(out.stdout)["connection"]
    assert set(connection) == {"host", "status", "status_since", "detail"}
    assert before <= connection["status_since"] <= after  # an epoch time of this run, and its name says so
