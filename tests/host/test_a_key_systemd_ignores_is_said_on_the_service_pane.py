"""systemd loads a unit with a misspelt directive (`RestartSecs=5`) and says only in its journal, at
the reload, "Unknown key 'RestartSecs' in section [Service], ignoring.": the log pane showed that
line as a systemd line, and the service pane said nothing (0 warnings), so the operator reading the
unit's diff took the restart delay for set. The service source reads PID 1's lines about the unit
(`journalctl _PID=1 UNIT=…`), and the pane says the unit has a directive systemd ignores, while the
file still holds it at that line. The journal's words are systemd 252's, recorded on a real one
(tests/data/real/systemd_syntax_error.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.domain.analysis.service_diff import HostFacts
from console.domain.analysis.service_report import build_report
from console.host.parsers.systemd import ignored_directives
from console.host.sources.service import ServiceWatcher
from console.host.transport import LocalTransport
from console.model import Reading
from console.ui.panes.service import format_service

CHECKOUT = Path(__file__).resolve().parents[2]
UNIT = "sglang-qwen122b.service"
FILE = f"/etc/systemd/system/{UNIT}"


def _recorded_journal() -> str:
    data = json.loads((CHECKOUT / "tests/data/real/systemd_syntax_error.json").read_text())
    return str(data["captures"][2]["stdout"])


def _cat(broken: bool = True) -> str:
    """`systemctl cat` of the seed unit as tests/real broke it: line 27 without '=', 28 RestartSecs=5."""
    text = (CHECKOUT / "console/demo/hostsim/units" / UNIT).read_text().replace("{ROOT}", "")
    extra = "\nthis line has no equals sign\nRestartSecs=5" if broken else "\nRestartSec=5"
    return f"# {FILE}\n" + text.replace("LimitNOFILE=65536", "LimitNOFILE=65536" + extra)


def test_the_recorded_warning_names_the_key_its_line_and_its_section() -> None:
    said = ignored_directives(_recorded_journal(), _cat())
    assert said == (f"{FILE}:28: systemd ignores RestartSecs=: its journal says it does not know that key in "
                    "[Service]",)


def test_a_line_fixed_since_the_reload_is_no_warning() -> None:
    assert ignored_directives(_recorded_journal(), _cat(broken=False)) == ()


def test_each_reload_says_it_again_and_the_pane_says_it_once() -> None:
    journal = _recorded_journal() * 3
    assert len(ignored_directives(journal, _cat())) == 1


def test_newer_and_older_systemds_words_are_read_too() -> None:
    for line in (f"{FILE}:28: Unknown key name 'RestartSecs' in section 'Service', ignoring.",
                 f"{FILE}:28: Unknown lvalue 'RestartSecs' in section 'Service', ignoring"):
        assert len(ignored_directives(line, _cat())) == 1, line


def test_a_whole_section_systemd_does_not_know_is_said() -> None:
    text = _cat().replace("[Install]", "[Instal]")
    no = next(i for i, line in enumerate(text.splitlines()) if line == "[Instal]")  # the header is line 0
    said = ignored_directives(f"{FILE}:{no}: Unknown section 'Instal'. Ignoring.", text)
    assert said == (f"{FILE}:{no}: systemd ignores the whole [Instal] section: its journal says it does not "
                    "know that section",)


def test_a_line_naming_another_file_or_key_is_not_taken() -> None:
    assert ignored_directives("/etc/systemd/system/other.service:28: Unknown key 'RestartSecs' in section "
                              "[Service], ignoring.", _cat()) == ()
    assert ignored_directives(f"{FILE}:28: Unknown key 'User' in section [Service], ignoring.", _cat()) == ()
    assert ignored_directives(f"{FILE}:28: Unknown key 'RestartSecs' in section [Unit], ignoring.", _cat()) == ()


def _fake_host(tmp_path: Path) -> Path:
    """`systemctl` and `journalctl` as the real host answered (the unit, PID 1's lines); the
    journal also holds a server line, which the service source must not take."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "cat.txt").write_text(_cat())
    (tmp_path / "journal.txt").write_text("Started sglang-qwen122b.service.\n" + _recorded_journal())
    (bin_dir / "systemctl").write_text(
        f"#!/bin/sh\ncase \"$1\" in cat) cat {tmp_path}/cat.txt;; "
        "show) echo ActiveState=inactive; echo SubState=dead; echo MainPID=0;; esac\n")
    (bin_dir / "journalctl").write_text(f"#!/bin/sh\necho \"$*\" >> {tmp_path}/journal-args.txt\n"
                                        f"cat {tmp_path}/journal.txt\n")
    for tool in ("systemctl", "journalctl"):
        (bin_dir / tool).chmod(0o755)
    return bin_dir


async def test_the_service_pane_says_the_unit_has_a_directive_systemd_ignores(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _fake_host(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    transport = LocalTransport()
    try:
        (side,), _, _ = await ServiceWatcher(transport, UNIT, None).read_sides([UNIT])
    finally:
        await transport.close()
    assert f"_PID=1 UNIT={UNIT} -o cat" in (tmp_path / "journal-args.txt").read_text()
    report = build_report(None, side, HostFacts())
    text = " ".join(format_service(Reading("service", report, 0.0), width=120).plain.split())
    assert "2 warnings" in text, text  # the line without '=' (read from the file) and the unknown key
    assert f"{FILE}:28: systemd ignores RestartSecs=" in text, text
    assert "Started" not in text
