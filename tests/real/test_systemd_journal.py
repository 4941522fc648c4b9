"""The log pane against a real journald (systemd 252 as PID 1 in a container, reached over SSH):
SGLang's 16 KB launch line, systemd's own lines about the unit, and the follow's cursor across a
journal rotation + vacuum and a dropped SSH connection. Each real fact is recorded in
tests/data/real/ (tests/real/systemd_host.py: record)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from console.host.sources.log import LogFollower
from tests.real.systemd_host import SystemdHost, capture, connected, record

pytestmark = pytest.mark.real_systemd

# SGLang 0.5.23 logs every ServerArgs field on one line at launch: ~16 KB (research/real_daemons.md).
LONG_LAUNCH = "[2026-12-01 10:00:00] server_args=ServerArgs(model_path='/shared/models/Qwen3.5-122B-A10B', " + \
    ", ".join(f"field_{i}='{'v' * 40}'" for i in range(300)) + ")"


def transient(host: SystemdHost, unit: str, script: str, *props: str) -> None:
    """A transient unit (systemd-run) whose output goes to the journal as a server's does."""
    host.sh(f"systemctl stop {unit} 2>/dev/null; systemctl reset-failed {unit} 2>/dev/null", timeout_s=60)
    argv = " ".join(f"-p {p}" for p in props)
    run = host.sh(f"systemd-run --unit {unit} {argv} /bin/sh -c {json.dumps(script)}", timeout_s=60)
    assert run.returncode == 0, run.stderr


def journal_cat(host: SystemdHost, unit: str, *extra: str) -> list[str]:
    return host.sh(f"journalctl -u {unit} -o cat --no-pager {' '.join(extra)}").stdout.splitlines()


async def test_a_16_kb_launch_line_reaches_the_log_and_the_boot_timeline_starts_at_launch(
        real_host: SystemdHost) -> None:
    unit = "sglang-test-long.service"
    host = real_host
    host.put("/run/launch.txt", LONG_LAUNCH + "\n[2026-12-01 10:00:04 TP0] Load weight begin. avail mem=94.21 GB\n")
    transient(host, unit, "cat /run/launch.txt", "Type=exec")
    host.wait(lambda: any("Load weight begin" in ln for ln in journal_cat(host, unit)), 30, "the unit's lines")
    # The real fact: without --all, journalctl -o json drops a field over 4,096 bytes as null.
    plain = capture(host, f"journalctl -u {unit} -o json --output-fields=MESSAGE --no-pager")
    full = capture(host, f"journalctl -u {unit} -o json --all --output-fields=MESSAGE --no-pager")
    messages = [json.loads(line).get("MESSAGE") for line in str(plain["stdout"]).splitlines()]
    assert None in messages and LONG_LAUNCH not in messages
    assert LONG_LAUNCH in [json.loads(line).get("MESSAGE") for line in str(full["stdout"]).splitlines()]
    record(host, "journal_long_line.json", [plain, full])

    async with connected(host) as transport:
        follower = LogFollower(transport, units=(unit,))
        events = await follower.read_backlog()
    assert any(e.text == LONG_LAUNCH for e in events), "the 16 KB launch line is not in the log pane"
    boot = follower.tracker.summary().boot
    assert [b.phase for b in boot][:2] == ["launch", "weights loading"]


async def test_systemds_own_lines_about_a_crash_looping_unit_are_unit_transitions_in_the_log(
        real_host: SystemdHost) -> None:
    unit = "sglang-test-crash.service"
    host = real_host
    transient(host, unit, "echo 'RuntimeError: CUDA error: out of memory'; exit 1",
              "Restart=on-failure", "RestartSec=500ms")
    host.wait(lambda: int(host.show(unit, "NRestarts").get("NRestarts") or 0) >= 2, 60, "two restarts")
    host.sh(f"systemctl stop {unit}")
    lines = capture(host, f"journalctl -u {unit} -o json --all --output-fields=MESSAGE,_SYSTEMD_UNIT,UNIT --no-pager")
    record(host, "journal_pid1_lines.json", [lines, capture(host, f"journalctl -u {unit} -o cat --no-pager")])
    entries = [json.loads(line) for line in str(lines["stdout"]).splitlines()]
    assert {e.get("_SYSTEMD_UNIT") for e in entries} == {"init.scope", unit}  # -u UNIT includes PID 1's lines

    async with connected(host) as transport:
        events = await LogFollower(transport, units=(unit,)).read_backlog()
    transitions = [e.fields for e in events if e.kind == "unit"]
    kinds = [t["transition"] for t in transitions]
    assert {"started", "exited", "failed", "restart-scheduled", "stopped"} <= set(kinds), kinds
    exited = next(t for t in transitions if t["transition"] == "exited")
    assert (exited["code"], exited["status"], exited["unit"]) == ("exited", "1/FAILURE", unit)
    assert max(t["restart_counter"] or 0 for t in transitions) >= 2
    # The server's own line stays a log line (an error the pane colours), systemd's are not plain lines.
    assert any(e.kind != "unit" and "out of memory" in e.text for e in events)
    assert not any(e.kind == "line" and "Scheduled restart job" in e.text for e in events)


async def test_the_follow_loses_no_line_across_a_rotation_a_vacuum_and_a_dropped_connection(
        real_host: SystemdHost) -> None:
    unit = "sglang-test-follow.service"
    host = real_host
    host.sh("rm -f /run/say; touch /run/say")
    transient(host, unit, "exec tail -n0 -F /run/say")
    host.wait(lambda: host.show(unit, "SubState").get("SubState") == "running", 30, "the unit running")

    def say(*lines: str) -> None:
        host.sh("printf '%s\\n' " + " ".join(lines) + " >> /run/say")

    seen: list[str] = []
    notes: list[str] = []
    async with connected(host) as transport:
        follower = LogFollower(transport, units=(unit,))

        async def follow() -> None:
            async for batch in follower.batches():
                seen.extend(e.text for e in batch.events if e.kind != "unit")
                notes.extend(n for n in (batch.note, batch.error) if n)

        task = asyncio.ensure_future(follow())
        try:
            await asyncio.sleep(0)
            loop = asyncio.get_running_loop()

            async def until(pred: object, what: str, timeout: float = 60) -> None:
                deadline = loop.time() + timeout
                while loop.time() < deadline:
                    if pred():  # type: ignore[operator]
                        return
                    await asyncio.sleep(0.1)
                raise AssertionError(f"timed out waiting for {what}; seen {seen}, notes {notes}")

            await until(lambda: follower.cursor is not None, "the backlog")
            say("line-1", "line-2", "line-3")
            await until(lambda: "line-3" in seen, "line-3")
            cursor = follower.cursor
            # The host side: sshd stops listening and the console's connection is cut; meanwhile
            # journald rotates and vacuums every archived file, and the server logs three more lines.
            host.sh("systemctl stop ssh")
            host.drop_ssh_connections()
            await until(lambda: any("ended" in n or "log stream" in n for n in notes), "the stream to end")
            host.sh("journalctl --rotate && sleep 1.2 && journalctl --vacuum-time=1s", timeout_s=60)
            say("line-4", "line-5", "line-6")
            host.wait(lambda: "line-6" in journal_cat(host, unit), 30, "line-6 in the journal")
            assert "line-3" not in journal_cat(host, unit)  # vacuumed
            # The real fact: --after-cursor of the vacuumed entry skips the first one that survived.
            after = capture(host, f"journalctl -u {unit} -o cat --no-pager --after-cursor='{cursor}'")
            at = capture(host, f"journalctl -u {unit} -o cat --no-pager --cursor='{cursor}'")
            assert "line-4" not in str(after["stdout"]) and "line-5" in str(after["stdout"])
            assert "line-4" in str(at["stdout"])
            record(host, "journal_vacuumed_cursor.json", [after, at])
            host.sh("systemctl start ssh")
            await until(lambda: "line-6" in seen, "line-6 after the reconnect", timeout=120)
        finally:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            host.sh("systemctl start ssh")
    assert [s for s in seen if s.startswith("line-")] == [f"line-{i}" for i in range(1, 7)]
    assert any("no longer holds the last entry read" in n for n in notes), notes


async def test_an_empty_journal_says_no_entries_only_in_text_modes(real_host: SystemdHost) -> None:
    host = real_host
    outs = {mode: capture(host, f"journalctl -u sglang-never-ran.service -o {mode} --no-pager")
            for mode in ("json", "short", "short-iso", "cat")}
    record(host, "journal_no_entries.json", list(outs.values()))
    assert outs["json"]["stdout"] == "" and outs["json"]["rc"] == 0
    assert outs["short"]["stdout"] == "-- No entries --\n"
    async with connected(host) as transport:
        follower = LogFollower(transport, units=("sglang-never-ran.service",))
        assert await follower.read_backlog() == ()


async def test_lines_journald_drops_past_its_rate_limit_are_said_lost_never_silently(real_host: SystemdHost) -> None:
    """A unit that floods past its rate limit (here LogRateLimitBurst=20 per 2 s): journald drops
    the rest and later writes "Suppressed N messages from UNIT"; the log says N lines are lost."""
    unit = "sglang-test-flood.service"
    host = real_host
    host.put("/run/flood.sh", "for i in $(seq 1 200); do echo flood-$i; done; sleep 3; echo after-the-flood\n")
    transient(host, unit, "exec /bin/sh /run/flood.sh", "LogRateLimitIntervalSec=2s", "LogRateLimitBurst=20")
    host.wait(lambda: any(ln.startswith("Suppressed") for ln in journal_cat(host, unit)), 60,
              "journald's suppression line")
    lines = capture(host, f"journalctl -u {unit} -o json --all --output-fields=MESSAGE,_SYSTEMD_UNIT,UNIT --no-pager")
    record(host, "journal_rate_limited.json", [lines])
    entries = [json.loads(line) for line in str(lines["stdout"]).splitlines()]
    said = [e for e in entries if str(e.get("MESSAGE", "")).startswith("Suppressed")]
    assert [e["_SYSTEMD_UNIT"] for e in said] == ["systemd-journald.service"], said
    kept = [e for e in entries if str(e.get("MESSAGE", "")).startswith("flood-")]
    dropped = int(str(said[0]["MESSAGE"]).split()[1])
    assert len(kept) + dropped == 200, (len(kept), dropped)  # every line is either in the journal or counted

    async with connected(host) as transport:
        follower = LogFollower(transport, units=(unit,))
        events = await follower.read_backlog()
        lost = [e for e in events if e.kind == "lost"]
        assert [(e.fields["dropped"], e.fields["unit"], e.severity) for e in lost] == [(dropped, unit, "warning")]
        assert f"journald dropped {dropped:,} lines of {unit}" in lost[0].text
        assert any(err.kind == "lines lost" for err in follower.tracker.summary().errors)
        # Followed: the same, and a note for the pane's toast.
        notes: list[str] = []

        async def follow() -> None:
            async for batch in LogFollower(transport, units=(unit,)).batches():
                notes.extend(n for n in (batch.note,) if n)
                if any("dropped" in n for n in notes):
                    return

        await asyncio.wait_for(follow(), 60)
    assert any(n.startswith(f"journald dropped {dropped:,} lines of {unit}") for n in notes), notes
