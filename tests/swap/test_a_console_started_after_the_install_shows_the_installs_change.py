"""In place on one unit the install rewrites the file of the unit that serves, so a reading after it
compares that file with itself. A console that saw the unit before the install keeps that reading;
a console started after the install (fresh, or reconnecting after an install done while it was away)
never saw it: it read "0 changes" in the diff pane, the gate and the report. The install keeps the
unit before it on the host (`UNIT.bak-STAMP`, console/domain/swap/actions.py's install_unit): the
service source reads the newest such backup, the observer records it (the swap's `unit_backup` fact)
and writes the install's change from it, with when it was installed and by whom; where the host keeps
no backup the change is unknown, said so, never "0 changes"."""

from __future__ import annotations

import asyncio
import calendar
import os
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from console.core.derive.swap_observer import SwapObserver
from console.core.derive.swap_view import AuditAppended, AuditEntry, SwapSetup, SwapStep, SwapStepChanged
from console.core.state import HostState, ReadingChanged
from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import UnitBackup, build_report, side_from_text
from console.domain.swap.preflight import check_diff
from console.domain.swap.report import ReportBuilder, render_markdown
from console.host.sources.service import ServiceWatcher, newest_backup
from console.host.transport.local import LocalTransport
from console.model import Reading
from console.ui.panes.service import format_service, install_change_words, units_read_at, with_install_change

T0 = calendar.timegm((2026, 12, 4, 10, 0, 0, 0, 0, 0))
STAMP = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(T0 - 600))  # the install, ten minutes before
UNIT = "sglang.service"
PATH = f"/etc/systemd/system/{UNIT}"
BEFORE = """[Service]
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/old --tp 4 --port 30000
"""
AFTER = """[Service]
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m/new --tp 4 --port 30000 \
 --served-model-name new
"""


class Console:
    """A fresh console's state and observer on a host where the install already ran: every event
    goes through both, as the live core does, and is kept (the recording the report reads)."""

    def __init__(self) -> None:
        self.state = HostState("h", clock=lambda: T0 + 1000)
        self.observer = SwapObserver(self.state)
        self.recorded: list[Any] = []
        self.feed(SwapSetup("h", UNIT, UNIT, "o/new", "/m/new"))

    def feed(self, event: Any) -> None:
        self.state.apply(event)
        self.recorded.append(event)
        for derived in self.observer.see(event):
            if self.observer.still_valid(derived):
                self.state.apply(derived)
                self.recorded.append(derived)

    def reading(self, at: float, text: str, backup: UnitBackup | None) -> None:
        side = side_from_text(UNIT, text)
        report = build_report(side, side, HostFacts())
        self.feed(ReadingChanged("h", "service", Reading("service", report if backup is None else
                                                          _with_backup(report, backup), ok_at_s=at)))

    def report(self) -> dict[str, Any]:
        builder = ReportBuilder("h", "h")
        for event in self.recorded:
            builder.feed(T0 + 30, event)
        return builder.build()


def _with_backup(report: Any, backup: UnitBackup) -> Any:
    return replace(report, unit_backup=backup)


def _diff_section(r: dict[str, Any]) -> str:
    return render_markdown(r).split("## Diff")[1].split("\n## ")[0]


def test_a_fresh_console_shows_the_installs_change_from_its_backup_with_when_and_who() -> None:
    c = Console()
    c.feed(AuditAppended("h", AuditEntry("ana", T0 - 600, "install", f"cp -p -- {PATH} {PATH}.bak-{STAMP}", 0,
                                         f"kept {PATH}.bak-{STAMP}", 0.4)))  # a killed console's, read back
    c.reading(T0 + 5, AFTER, UnitBackup(f"{PATH}.bak-{STAMP}", STAMP, BEFORE))
    backup = c.state.swap.unit_backup()
    assert backup["found"] and backup["path"] == f"{PATH}.bak-{STAMP}" and backup["installed_at"] == T0 - 600
    fact = c.state.swap.install_diff()
    assert fact["from"] == "backup" and fact["by"] == "ana" and fact["installed_at"] == T0 - 600, fact
    changes = {x["flag"]: x for x in fact["changes"]}
    assert changes["--model-path"]["old"] == "/m/old" and changes["--model-path"]["new"] == "/m/new", changes
    assert "--served-model-name" in changes and fact["count"] >= 2
    # the diff pane
    reading = c.state.reading("service")
    assert reading.data.change_count == 0  # the unit read against itself, as the host has it now
    shown = with_install_change(reading, fact)
    text = format_service(shown, 120).plain
    assert f"{fact['count']} changes" in text and "no differences" not in text, text
    words = install_change_words(fact)
    assert f"from the backup {PATH}.bak-{STAMP}" in words and "by ana" in words \
        and f"installed {units_read_at(T0 - 600)}" in words, words
    # the gate
    check = check_diff(c.state)
    assert check.ok is True and check.reason.startswith(f"{fact['count']} change"), check
    # the report
    r = c.report()
    assert r["diff"]["from"] == "the backup" and r["diff"]["installed_by"] == "ana", r["diff"]
    section = _diff_section(r)
    assert "--model-path" in section and f"from the backup {PATH}.bak-{STAMP}" in section and "by ana" in section


def test_with_no_backup_on_the_host_the_installs_change_is_unknown_never_zero() -> None:
    c = Console()
    c.feed(AuditAppended("h", AuditEntry("ana", T0 - 600, "install", f"mv -f -- {PATH}.new {PATH}", 0, "", 0.4)))
    c.reading(T0 + 5, AFTER, UnitBackup(None))
    assert c.state.swap.install_diff() == {}
    unknown = c.state.swap.install_change_unknown()
    assert unknown is not None and "unknown" in unknown and f"{UNIT}.bak-*" in unknown
    text = format_service(c.state.reading("service"), 120, unknown=unknown).plain
    assert "changes unknown" in text and "0 changes" not in text and "no differences" not in text, text
    raw = format_service(c.state.reading("service"), 120, raw=True, unknown=unknown).plain
    assert "(no differences)" not in raw, raw
    check = check_diff(c.state)
    assert check.ok is None and "unknown" in check.reason and "0 change" not in check.reason, check
    r = c.report()
    assert r["diff"]["from"] == "unknown" and r["diff"]["changes"] == [], r["diff"]
    section = _diff_section(r)
    assert "unknown" in section and "0 change" not in section, section


def test_a_console_that_saw_the_install_keeps_its_own_reading_of_it() -> None:
    """The backup is of the same install the console saw: its change, from the reading before the
    install, stays; only a later install (a newer backup) is read from its backup."""
    c = Console()
    c.reading(T0, BEFORE, UnitBackup(None))
    title = "Install the new unit"
    c.feed(SwapStepChanged("h", SwapStep("install", title, "running", T0 + 12, None, "", who="ana")))
    c.feed(SwapStepChanged("h", SwapStep("install", title, "done", T0 + 12, T0 + 13, "installed", who="ana")))
    own = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(T0 + 12))
    c.reading(T0 + 14, AFTER, UnitBackup(f"{PATH}.bak-{own}", own, BEFORE))
    fact = c.state.swap.install_diff()
    assert fact["from"] == "reading" and fact["before_at"] == T0 and fact["by"] == "ana", fact
    c.reading(T0 + 29, AFTER, UnitBackup(f"{PATH}.bak-{own}", own, BEFORE))
    assert c.state.swap.install_diff() == fact
    later = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(T0 + 100))  # someone installed again, on the host
    third = AFTER.replace("--tp 4", "--tp 8")
    c.reading(T0 + 120, third, UnitBackup(f"{PATH}.bak-{later}", later, AFTER))
    fact = c.state.swap.install_diff()
    assert fact["from"] == "backup" and fact["by"] is None, fact
    assert [x["flag"] for x in fact["changes"]] == ["--tp-size"]
    assert "by an unknown author" in install_change_words(fact)


def test_the_newest_install_backup_beside_the_units_file_is_the_one_read() -> None:
    listing = "\n".join([f"F {PATH}", f"B {PATH}.bak-20261204T090000Z", f"B {PATH}.bak-20261204T093000Z",
                         f"B {PATH}.bak-zzz", f"B {PATH}.bak-20991204T093000Z.swp", "B /tmp/x.bak-20991204T093000Z"])
    assert newest_backup(listing) == (f"{PATH}.bak-20261204T093000Z", "20261204T093000Z")
    assert newest_backup(f"F {PATH}") is None and newest_backup("") is None


@pytest.fixture
def host_with_systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shell host whose `systemctl` answers for one unit file in `tmp_path/units`."""
    units, bin_dir = tmp_path / "units", tmp_path / "bin"
    units.mkdir()
    bin_dir.mkdir()
    (units / UNIT).write_text(AFTER)
    tool = bin_dir / "systemctl"
    tool.write_text(f"""#!/bin/sh
case "$*" in
  cat*) cat '{units}/{UNIT}' ;;
  *FragmentPath*) echo '{units}/{UNIT}' ;;
  *MainPID\\ --value*) echo 0 ;;
  show*) printf 'ActiveState=active\\nSubState=running\\nMainPID=0\\n' ;;
esac
""")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return units


def _poll(old: str | None) -> Any:
    """One reading of the service source on this machine's shell (its `systemctl` the fixture's)."""
    async def poll() -> Any:
        transport = LocalTransport()
        await transport.connect()
        try:
            return await ServiceWatcher(transport, UNIT, old).poll()
        finally:
            await transport.close()

    return asyncio.run(poll())


def test_the_service_source_reads_the_backup_the_install_kept(host_with_systemctl: Path) -> None:
    units = host_with_systemctl
    older = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(T0 - 7200))
    (units / f"{UNIT}.bak-{older}").write_text("[Service]\nExecStart=/bin/false\n")
    (units / f"{UNIT}.bak-{STAMP}").write_text(BEFORE.replace("/m/old", "/m/old HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrSt"))

    report = _poll(UNIT)
    backup = report.unit_backup
    assert backup is not None and backup.path == f"{units}/{UNIT}.bak-{STAMP}" and backup.stamp == STAMP
    assert backup.text is not None and "--model-path /m/old" in backup.text and not backup.truncated
    assert "hf_AbCdEfGhIjKlMnOpQrSt" not in backup.text  # redacted at the source: the reading is recorded
    for path in units.glob("*.bak-*"):
        path.unlink()
    assert _poll(UNIT).unit_backup == UnitBackup(None)
    assert _poll("other.service").unit_backup is None  # two units: nothing to read


@pytest.mark.parametrize(("after_token", "said"), [("hf_SameSameSameSameSame1", None),
                                                   ("hf_OtherOtherOtherOther2", "changed")])
def test_a_secret_kept_or_changed_since_the_backup_reads_as_it_is(host_with_systemctl: Path, after_token: str,
                                                                  said: str | None) -> None:
    """The backup and the unit are both redacted where they are read: compared as texts, every secret
    read as changed, the same one too (the backup kept no digest of what it hid). Each now keeps the
    keyed digests the unit side keeps: a token kept is no change, a token rotated is one, shown
    without its values."""
    units = host_with_systemctl
    line = "Environment=HF_TOKEN={}\n"
    (units / UNIT).write_text(AFTER.replace("[Service]\n", "[Service]\n" + line.format(after_token)))
    (units / f"{UNIT}.bak-{STAMP}").write_text(
        BEFORE.replace("[Service]\n", "[Service]\n" + line.format("hf_SameSameSameSameSame1")))

    report = _poll(UNIT)
    assert "hf_SameSameSameSameSame1" not in (report.unit_backup.text or "")
    c = Console()
    c.feed(ReadingChanged("h", "service", Reading("service", report, ok_at_s=T0 + 5)))
    fact = c.state.swap.install_diff()
    env = {e["name"]: e for e in fact["env_changes"]}
    assert "--model-path" in {x["flag"] for x in fact["changes"]}, fact
    if said is None:
        assert "HF_TOKEN" not in env, env
    else:
        assert env["HF_TOKEN"]["change"] == said and after_token not in str(fact), env
        assert "hf_SameSameSameSameSame1" not in str(fact)
