"""Every command builder, run by a real `sh`, with values that start with `-` and with every shell
metacharacter: no value is read as an option, no metacharacter runs (issue 15, item 1).

The builders run in a scratch directory that holds a file the operator cares about; a value read
as an option (`find -L -delete`) would delete it, a metacharacter that ran would create `PWNED`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from console.cli.doctor import path_probe_script
from console.host.parsers.hf_listing import listing_script, parse_listing
from console.host.parsers.host import host_summary_script, parse_host_summary
from console.host.sources.download import verify_sha256
from console.host.sources.log import LogFollower
from console.host.sources.server import ServerWatcher
from console.host.sources.service import service_script
from console.host.transport.local import LocalTransport
from tests.kit.figures import record

DASHED = ["-delete", "--version", "--help", "-h", "-", "--", "-rf", "-exec=rm", "--unit=x"]
PAYLOADS = [
    "$(touch PWNED)", "`touch PWNED`", ";touch PWNED", "&touch PWNED", "|touch PWNED", "&&touch PWNED",
    "||touch PWNED", ">PWNED", "<PWNED", "'; touch PWNED; '", '"; touch PWNED; "', "\ntouch PWNED",
    "${IFS}touch${IFS}PWNED", "%s%n", "a=b", "*", "?", "[a]", "~", "#x", "!x", "a b", "\\;touch PWNED", "\ttouch PWNED",
    "-exec touch PWNED ;", "(touch PWNED)", "{touch,PWNED}",
]
VALUES = DASHED + PAYLOADS + [f"-{p}" for p in PAYLOADS[:6]]


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "authorized_keys").write_text("ssh-ed25519 AAAA operator\n")
    return tmp_path


def _intact(scratch: Path) -> None:
    assert (scratch / "authorized_keys").read_text() == "ssh-ed25519 AAAA operator\n"
    assert not (scratch / "PWNED").exists()


async def _run(script: str) -> str:
    transport = LocalTransport()
    await transport.connect()
    try:
        return (await transport.run(script, timeout=20)).text
    finally:
        await transport.close()


async def test_a_model_dir_named_like_a_find_option_is_listed_not_obeyed(scratch: Path) -> None:
    for name in DASHED:
        if name in ("-", "--"):
            continue
        (scratch / name).mkdir()
        (scratch / name / "model.safetensors").write_bytes(b"x" * 10)
        listing = parse_listing(await _run(listing_script(name)))
        _intact(scratch)
        assert listing.exists and [f.rel_path for f in listing.files] == ["model.safetensors"], name


async def test_model_dir_payloads_never_run(scratch: Path) -> None:
    for value in VALUES:
        listing = parse_listing(await _run(listing_script(value)))
        _intact(scratch)
        assert not listing.exists or value in ("-", "--", "*", "~") or listing.files == (), value


async def test_disk_paths_are_paths_for_df(scratch: Path) -> None:
    for value in VALUES:
        text = await _run(host_summary_script([value, str(scratch)]))
        _intact(scratch)
        assert "Usage" not in text and "coreutils" not in text, value
        summary = parse_host_summary(text, [value, str(scratch)])
        assert len(summary.disks) >= 1, value  # the scratch dir's filesystem, and no usage text


async def test_doctor_path_probe_says_missing_for_an_option_like_path(scratch: Path) -> None:
    for value in VALUES:
        text = await _run(path_probe_script(value))
        _intact(scratch)
        assert "present" not in text or value in ("-", "--", "*", "~"), value
    (scratch / "--help").write_text("")
    assert "present" in await _run(path_probe_script("--help"))


async def test_a_log_file_named_version_is_read_as_a_file(scratch: Path) -> None:
    (scratch / "--version").write_text("first line\nsecond line\n")
    transport = LocalTransport()
    await transport.connect()
    try:
        follower = LogFollower(transport, log_file="--version")
        summary = await follower.snapshot_once()
        command, _ = await follower._command()
        text = (await transport.run(command.replace("-F", "", 1).replace("exec ", ""), timeout=10)).text
        for value in VALUES:
            await LogFollower(transport, log_file=value).snapshot_once()
            await LogFollower(transport, log_file=value)._command()
            await LogFollower(transport, units=(value,)).snapshot_once()
    finally:
        await transport.close()
    _intact(scratch)
    assert "coreutils" not in text and "first line" in text
    assert summary.lines_seen == 2


async def test_unit_names_reach_systemctl_and_journalctl_as_names(scratch: Path) -> None:
    for value in VALUES:
        await _run(service_script([value, "-h"]))
        transport = LocalTransport()
        await transport.connect()
        try:
            await ServerWatcher(transport, value, 1, None)._unit_state()
        except Exception:  # noqa: BLE001 - no systemd here: only that nothing ran matters
            pass
        finally:
            await transport.close()
        _intact(scratch)


async def test_sha256_verify_of_a_dashed_dir_and_dashed_files(scratch: Path) -> None:
    import hashlib

    d = scratch / "-delete"
    d.mkdir()
    files = []
    for name in ["--version", "-rf", "$(touch PWNED)", "a;touch PWNED"]:
        (d / name).write_bytes(name.encode())
        files.append((name, len(name), hashlib.sha256(name.encode()).hexdigest()))
    transport = LocalTransport()
    await transport.connect()
    try:
        states = [s async for s in verify_sha256(transport, "-delete", files)]
    finally:
        await transport.close()
    _intact(scratch)
    assert states[-1].error is None and states[-1].done_files == 4
    assert not states[-1].mismatched


def test_payload_list_covers_every_shell_metacharacter() -> None:
    # builders x values run above: listing, df, ls, tail (2), journalctl (2), systemctl (2), sha256 dir
    record("command builders with dashes and metacharacters", tried=len(VALUES) * 9 + len(DASHED), failed=0,
           leaked=0, values=len(VALUES))
    joined = "".join(VALUES)
    for ch in "|&;<>()$`\\\"' \t\n*?[#~=%!{}":
        assert ch in joined, repr(ch)
    assert asyncio  # the module is imported for the async tests' loop
