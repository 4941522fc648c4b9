"""The whole unit compared (issue 20 item 6): EnvironmentFile=, drop-ins, User=, WorkingDirectory=,
Restart=, limits, ExecStartPre=... every directive that changes how the server runs, with reasons."""

from __future__ import annotations

import json
from pathlib import Path

from console.domain.analysis.service_diff import HostFacts, diff_units
from console.domain.analysis.service_report import build_report, report_json, side_from_text
from console.model import Reading
from console.host.parsers.systemd import parse_unit

UNITS = Path(__file__).resolve().parent.parent.parent / "console" / "demo" / "hostsim" / "units"
OLD = (UNITS / "sglang-qwen397b.service").read_text()
NEW = (UNITS / "sglang-qwen122b.service").read_text()


def _report(old: str, new: str, facts: HostFacts | None = None):  # type: ignore[no-untyped-def]
    return build_report(side_from_text("sglang-qwen397b.service", old), side_from_text("sglang-qwen122b.service", new),
                        facts or HostFacts())


def test_the_seeds_new_unit_dropping_the_old_environment_file_is_a_visible_change() -> None:
    from console.ui.panes.service import format_service

    r = _report(OLD, NEW)
    assert len(r.changes) == 9 and r.env_changes == ()  # the flags and Environment= alone saw nothing of it
    (lost,) = [u for u in r.unit_changes if u.directive == "EnvironmentFile"]
    assert lost.change == "removed" and lost.old == "-{ROOT}/etc/sglang/qwen397b.env" and lost.new is None
    assert "the new unit does not" in (lost.reason or "") and "missing when the new server starts" in lost.reason
    j = report_json(r)
    assert j["unit_changes"] == [{"directive": "EnvironmentFile", "section": "Service", "change": "removed",
                                  "old": "-{ROOT}/etc/sglang/qwen397b.env", "new": None, "reason": lost.reason}]
    text = format_service(Reading("service", r, 1.0), 100).plain
    assert "10 changes" in text and "− EnvironmentFile= -{ROOT}/etc/sglang/qwen397b.env" in text
    assert "whatever it set" in text


def _unit(service: str, *dropins: tuple[str, str], name: str = "x") -> str:
    text = f"# /etc/systemd/system/{name}.service\n[Unit]\nDescription={name}\n[Service]\n{service}\n"
    for path, body in dropins:
        text += f"\n# {path}\n{body}\n"
    return text


EXEC = "ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m --tp-size 4"


def test_every_directive_that_changes_how_the_server_runs_is_compared_with_a_reason() -> None:
    old = _unit(f"Type=simple\nUser=sglang\nWorkingDirectory=/opt/sglang\nEnvironmentFile=/etc/sglang/common.env\n"
                f"EnvironmentFile=-/etc/sglang/old.env\nExecStartPre=/usr/bin/nvidia-smi -pm 1\n{EXEC}\n"
                "Restart=on-failure\nRestartSec=10\nLimitNOFILE=65536\nLimitMEMLOCK=infinity\nTimeoutStopSec=60\n"
                "[Install]\nWantedBy=multi-user.target",
                ("/etc/systemd/system/x.service.d/gpu.conf", "[Service]\nEnvironment=NCCL_P2P_LEVEL=NVL"))
    new = _unit(f"Type=simple\nUser=root\nWorkingDirectory=/data/sglang\nEnvironmentFile=-/etc/sglang/common.env\n"
                f"EnvironmentFile=/etc/sglang/new.env\n{EXEC}\nRestart=no\nLimitNOFILE=1024\nTimeoutStartSec=90\n",
                name="y")
    changes = diff_units(parse_unit(old), parse_unit(new),
                         HostFacts(paths_exist={"/etc/sglang/new.env": False}, forbidden_prefixes=("/data",)))
    by = {(u.directive, u.change): u for u in changes}
    assert by[("EnvironmentFile", "removed")].old == "-/etc/sglang/old.env"
    added = by[("EnvironmentFile", "added")]
    assert added.new == "/etc/sglang/new.env" and "systemd refuses to start" in (added.reason or "")
    made_optional = by[("EnvironmentFile", "changed")]
    assert (made_optional.old, made_optional.new) == ("/etc/sglang/common.env", "-/etc/sglang/common.env")
    assert "ignored silently" in (made_optional.reason or "")
    assert by[("drop-in", "removed")].old == "/etc/systemd/system/x.service.d/gpu.conf"
    assert (by[("User", "changed")].old, by[("User", "changed")].new) == ("sglang", "root")
    assert "Hugging Face cache" in (by[("User", "changed")].reason or "")
    assert "forbids" in (by[("WorkingDirectory", "changed")].reason or "")
    assert "stays down" in (by[("Restart", "changed")].reason or "")
    assert by[("RestartSec", "removed")].old == "10"
    assert "Too many open files" in (by[("LimitNOFILE", "changed")].reason or "")
    assert "systemd's default" in (by[("LimitMEMLOCK", "removed")].reason or "")
    assert by[("ExecStartPre", "removed")].old == "/usr/bin/nvidia-smi -pm 1"
    assert "GPU memory frees" in (by[("TimeoutStopSec", "removed")].reason or "")
    assert "minutes" in (by[("TimeoutStartSec", "added")].reason or "")
    assert by[("WantedBy", "removed")].section == "Install"
    # Compared elsewhere, never twice: the command line, Environment= and the description.
    assert not {u.directive for u in changes} & {"ExecStart", "Environment", "Description", "Type"}
    # The report lints a required env file that is not on the host.
    r = build_report(side_from_text("x.service", old), side_from_text("y.service", new),
                     HostFacts(paths_exist={"/etc/sglang/new.env": False}))
    assert any(x.severity == "error" and "/etc/sglang/new.env does not exist" in x.message for x in r.lints)
    # The drop-in's Environment= is gone with it: an environment change, as before.
    assert [(e.name, e.change) for e in r.env_changes] == [("NCCL_P2P_LEVEL", "removed")]


def test_a_drop_in_that_resets_a_directive_is_what_systemd_would_run() -> None:
    old = _unit(f"ExecStartPre=/bin/mkdir -p /run/sglang\nExecStartPre=/usr/bin/nvidia-smi -pm 1\n{EXEC}\n"
                "LimitNOFILE=65536")
    new = _unit(f"ExecStartPre=/bin/mkdir -p /run/sglang\nExecStartPre=/usr/bin/nvidia-smi -pm 1\n{EXEC}\n"
                "LimitNOFILE=65536",
                ("/etc/systemd/system/x.service.d/override.conf",
                 "[Service]\nExecStartPre=\nExecStartPre=-/bin/true\nLimitNOFILE=4096"))
    unit = parse_unit(new)
    assert unit.directive("ExecStartPre") == ("-/bin/true",)
    assert unit.directive("LimitNOFILE") == ("4096",)
    assert unit.dropins == ("/etc/systemd/system/x.service.d/override.conf",)
    changes = [(u.directive, u.change, u.old, u.new) for u in diff_units(parse_unit(old), unit)]
    assert ("drop-in", "added", None, "/etc/systemd/system/x.service.d/override.conf") in changes
    assert ("ExecStartPre", "removed", "/bin/mkdir -p /run/sglang", None) in changes
    assert ("ExecStartPre", "removed", "/usr/bin/nvidia-smi -pm 1", None) in changes
    assert ("ExecStartPre", "added", None, "-/bin/true") in changes
    assert ("LimitNOFILE", "changed", "65536", "4096") in changes


def test_the_same_unit_under_another_name_has_no_unit_changes() -> None:
    assert diff_units(parse_unit(OLD), parse_unit(OLD.replace("Description=SGLang", "Description=Other"))) == []


async def test_over_ssh_the_variables_of_the_lost_env_file_are_named_and_their_secrets_hidden(sim) -> None:  # type: ignore[no-untyped-def]
    from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, start_scenario
    from console.host.sources.service import ServiceWatcher
    from console.host.transport.ssh import SshTransport
    from tests.kit.hosts import sim_options

    await start_scenario(sim)
    env = sim.path("/etc/sglang/qwen397b.env")
    env.parent.mkdir(parents=True, exist_ok=True)
    env.write_text("# the old model's tuning\nSGLANG_ENABLE_JIT_DEEPGEMM=0\nexport NCCL_IB_DISABLE=1\n"
                   "SGLANG_API_KEY=sk-live-0123456789abcdef\n")
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        report = await ServiceWatcher(transport, NEW_UNIT, OLD_UNIT).poll()
        env.unlink()
        without = await ServiceWatcher(transport, NEW_UNIT, OLD_UNIT).poll()
    finally:
        await transport.close()
    assert [(e.name, e.change, e.old, e.new) for e in report.env_changes] == [
        ("NCCL_IB_DISABLE", "removed", "1", None), ("SGLANG_API_KEY", "removed", "‹redacted›", None),
        ("SGLANG_ENABLE_JIT_DEEPGEMM", "removed", "0", None)]
    (lost,) = [u for u in report.unit_changes if u.directive == "EnvironmentFile"]
    assert "NCCL_IB_DISABLE, SGLANG_API_KEY, SGLANG_ENABLE_JIT_DEEPGEMM" in (lost.reason or "")
    assert "sk-live" not in repr(report) and "sk-live" not in json.dumps(report_json(report))
    assert without.env_changes == ()
    (gone,) = [u for u in without.unit_changes if u.directive == "EnvironmentFile"]
    assert "not on the host" in (gone.reason or "")


def test_a_line_without_equals_is_named_by_the_file_and_line_systemd_names() -> None:
    """Recorded on systemd 252 (tests/data/real/systemd_syntax_error.json): a line without '=' at line
    27 of the unit is "FILE:27: Missing '=', ignoring line."; the console reads `systemctl cat`, whose
    "# /path" header comes first, and must name the same line (it said 28)."""
    import re

    root = Path(__file__).resolve().parents[2]
    rec = json.loads((root / "tests/data/real/systemd_syntax_error.json").read_text())
    said = next(c for c in rec["captures"] if "journalctl" in c["command"])["stdout"]
    path, line = re.search(r"^(\S+\.service):(\d+): Missing '=', ignoring line\.$", said, re.M).groups()  # type: ignore[union-attr]
    unit = (root / "console/demo/hostsim/units/sglang-qwen122b.service").read_text().replace("{ROOT}", "")
    broken = unit.replace("LimitNOFILE=65536", "LimitNOFILE=65536\nthis line has no equals sign\nRestartSecs=5")
    parsed = parse_unit(f"# {path}\n{broken}", path)
    assert [p for p in parsed.problems if "no equals sign" in p] == [
        f"{path}:{line}: not a key=value line, systemd ignores it: 'this line has no equals sign'"]
