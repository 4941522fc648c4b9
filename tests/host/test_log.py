"""The SGLang log: real lines from users' issues, the tracker, the stream with resume, status."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from console.domain.analysis.log_state import LogTracker
from console.domain.analysis.server_status import HttpFacts, combine, parse_prometheus
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.scenario import NEW_UNIT, OLD_UNIT, start_scenario
from console.demo.hostsim.services import Journal
from console.model import Reading
from console.ui.panes.log import display_text, format_status
from console.host.parsers.sglang_log import batch_fields, parse_line
from console.host.sources.log import LogFollower, read_log_file
from console.host.sources.server import ServerWatcher
from console.host.transport import LocalTransport
from console.host.transport.ssh import SshTransport
from tests.kit.hosts import DATA, sim_options
from tests.kit.log import collect as _collect

REAL = (DATA / "sglang_real_lines.txt").read_text().splitlines()
HYBRID = (DATA / "sglang_hybrid_lines.txt").read_text().splitlines()


def test_every_recorded_real_line_is_classified() -> None:
    kinds = [parse_line(line).kind for line in REAL]
    assert kinds == [
        "decode", "prefill", "prefill", "line", "boot", "boot", "line", "boot", "boot", "boot", "access", "error",
        "decode", "line", "line", "line", "boot", "boot", "line", "boot", "error", "decode", "traceback",
        "decode", "boot", "warning"]


def test_batch_fields_across_versions() -> None:
    old = batch_fields(parse_line(REAL[0]))
    assert old == {"#running-req": 1010, "#token": 55006, "token usage": 0.93, "gen throughput (token/s)": 1397.13,
                   "#queue-req": 12279}
    mtp = batch_fields(parse_line(REAL[23]))
    assert (mtp["accept len"], mtp["cuda graph"]) == (2.9, True)
    trailing = batch_fields(parse_line(REAL[21]))  # "…, #queue-req: 0, " with the trailing separator
    assert trailing["#queue-req"] == 0 and trailing["largest-len"] == 0
    # A hybrid (GDN) model's batch line, real: sgl-project/sglang PR #30047 (tests/data/sglang_hybrid_lines.txt)
    gdn = parse_line(HYBRID[0])
    assert (gdn.kind, gdn.ts, gdn.ranks) == ("prefill", "2026-07-04 04:31:24", "TP0")
    fields = batch_fields(gdn)
    assert (fields["mamba usage"], fields["full token usage"], fields["#new-token"]) == (0.20, 0.14, 43008)
    assert (fields["npu graph"], fields["input throughput (token/s)"]) == (False, 15734.14)
    # DP/TP/EP ranks and the trailing separator: PR #10622
    ranked = parse_line(HYBRID[1])
    assert (ranked.kind, ranked.ranks) == ("prefill", "DP1 TP1 EP1") and batch_fields(ranked)["#queue-req"] == 0
    # The decode line whose timestamp the old hand-made line borrowed: PR #22331
    decode = parse_line(HYBRID[2])
    assert (decode.kind, decode.ts, decode.ranks) == ("decode", "2026-04-08 14:05:21", "TP0")
    assert batch_fields(decode)["gen throughput (token/s)"] == 144.95 and batch_fields(decode)["#token"] == 20800


BEFORE_RESTART = REAL[:24]  # the file joins several servers' lines; line 25 is another server's boot


def test_boot_figures_from_real_lines() -> None:
    t = LogTracker("test")
    t.feed([parse_line(line) for line in BEFORE_RESTART])
    s = t.summary()
    assert s.capacity and s.capacity["max_total_num_tokens"] == 935444 and s.capacity["chunked_prefill_size"] == 8192
    assert [e.kind for e in s.errors][:2] == ["nan", "oom"]
    # Then another server's `Load weight end` (an earlier phase than serving): a restart.
    t.feed([parse_line(line) for line in REAL[24:]])
    s = t.summary()
    assert s.weights and s.weights["weights_gib"] == 166.59
    assert s.capacity is None and [b.phase for b in s.boot] == ["weights loaded"]
    assert [e.kind for e in s.errors][:2] == ["nan", "oom"], "errors outlive a restart"


def test_a_traceback_is_one_event_with_its_lines() -> None:
    lines = ["[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process',
             "    scheduler.event_loop_overlap()",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
             "[2025-03-29 18:18:35] Received sigquit from a child process. It usually means the child failed."]
    t = LogTracker("test")
    t.feed([parse_line(line) for line in lines])
    errors = t.summary().errors
    assert [e.kind for e in errors] == ["exception", "crash"]
    assert errors[0].message.startswith("torch.OutOfMemoryError") and len(errors[0].lines) == 4


def test_interleaved_ranks_give_one_step_per_phase_and_a_restart_starts_a_new_timeline() -> None:
    ranks = [f"[2026-01-01 10:00:{10 + i:02d} TP{r}] Load weight begin. avail mem=94.21 GB"
             for i in range(2) for r in range(4)]
    ready = ["[2026-01-01 10:00:30] The server is fired up and ready to roll!"]
    again = ["[2026-01-01 11:00:00 TP0] Load weight begin. avail mem=94.21 GB"]
    t = LogTracker("test")
    t.feed([parse_line(x) for x in ranks + ready])
    assert [b.phase for b in t.summary().boot] == ["weights loading", "ready"]
    t.feed([parse_line(x) for x in again])
    assert [b.phase for b in t.summary().boot] == ["weights loading"]


def test_garbage_huge_lines_and_clock_jumps_do_not_crash() -> None:
    t = LogTracker("test")
    junk = ["\x00\xff\xfe binary", "x" * (1 << 20), "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: x, ",
            "[2026-01-01 09:00:00 TP0] Load weight end. elapsed=1.00 s, type=X, avail mem=1.00 GB, mem usage=2.00 GB.",
            "[2026-01-01 08:00:00 TP0] KV Cache is allocated. #tokens: 10, K size: 1.00 GB, V size: 1.00 GB",
            "[99:99:99 TP0] Decode batch. #running-req: 3"]
    t.feed([parse_line(x) for x in junk])
    s = t.summary()
    assert s.lines_seen == 6 and s.kv_cache and s.kv_cache["tokens"] == 10
    assert len(t.series) <= 600


def test_the_tracker_is_bounded() -> None:
    t = LogTracker("test", series_len=100)
    line = parse_line("[2026-01-01 10:00:00 TP0] torch.OutOfMemoryError: CUDA out of memory.")
    for _ in range(1000):
        t.feed([line])
    assert len(t.summary().errors) == 50


def test_display_drops_the_date_only() -> None:
    assert display_text("[2026-04-08 14:05:21 TP0] hi") == "[14:05:21 TP0] hi"
    assert display_text("[16:43:29 TP0] hi") == "[16:43:29 TP0] hi"
    assert display_text("plain") == "plain"


@pytest.mark.parametrize("state, info, health, log_lines, expect", [
    ("active", None, None, ["[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=94.21 GB"], ("starting", "loading weights")),
    ("active", {"status": "ready"}, True, ["[2026-01-01 10:00:00] The server is fired up and ready to roll!"], ("ready", "serving")),
    ("active", {"status": "ready"}, False, ["[2026-01-01 10:00:00] The server is fired up and ready to roll!"], ("degraded", "/health_generate failed")),
    ("failed", None, None, ["[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=1 GB",
                             "[2026-01-01 10:00:05 TP0] torch.OutOfMemoryError: CUDA out of memory."], ("dead", "unit failed: ")),
    ("inactive", None, None, [], ("dead", "unit inactive")),
    ("active", {"status": "starting"}, False, ["[2026-01-01 10:00:00] INFO:     Uvicorn running on http://0.0.0.0:1"], ("starting", "warming up")),
])
def test_honest_status(state: str, info: dict | None, health: bool | None, log_lines: list[str],
                       expect: tuple[str, str]) -> None:
    t = LogTracker("t")
    t.feed([parse_line(x) for x in log_lines])
    st = combine("u.service", state, 1 if state == "active" else None, t.summary(), HttpFacts(info, None, {}, health), 0)
    assert st.status == expect[0] and st.reason.startswith(expect[1]), st


def test_prometheus_text() -> None:
    text = ('# HELP x\nsglang:gen_throughput{model_name="m",tp_rank="0"} 2210.5\n'
            'sglang:num_running_reqs{model_name="m"} 48.0\nbad line\n')
    assert parse_prometheus(text, ("sglang:gen_throughput", "sglang:num_running_reqs")) == {
        "sglang:gen_throughput": 2210.5, "sglang:num_running_reqs": 48.0}


async def test_journal_follow_resumes_after_a_drop_without_duplicates_or_losses(sim: HostSimulator) -> None:
    journal = Journal(sim)
    for i in range(50):
        journal.append("seq.service", 1, f"line {i}")
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        follower = LogFollower(transport, units=("seq.service",), backlog=20)
        first = await _collect(follower, lambda s: len(s) >= 20)
        assert first == [f"line {i}" for i in range(30, 50)]
        for conn in list(sim.open_connections):
            conn.close()  # the connection drops; lines keep coming meanwhile
        for i in range(50, 80):
            journal.append("seq.service", 1, f"line {i}")
        await asyncio.sleep(0.5)
        while transport.state.status != "connected":
            await asyncio.sleep(0.1)
        rest = await _collect(follower, lambda s: "line 79" in s, timeout=20)
        assert rest == [f"line {i}" for i in range(50, 80)], "resumed after the cursor: nothing lost, nothing twice"
    finally:
        await transport.close()


async def test_file_follow_resumes_at_the_offset_and_survives_truncation(tmp_path: Path) -> None:
    log = tmp_path / "sglang.log"
    log.write_text("".join(f"[2026-01-01 10:00:00 TP0] old {i}\n" for i in range(5)))
    transport = LocalTransport()
    try:
        follower = LogFollower(transport, log_file=str(log))
        assert [x.split()[-1] for x in await _collect(follower, lambda s: len(s) >= 5)] == ["0", "1", "2", "3", "4"]
        with open(log, "a") as fh:
            fh.write("[2026-01-01 10:00:01 TP0] new 5\n")
        more = await _collect(follower, lambda s: len(s) >= 1)
        assert more == ["[2026-01-01 10:00:01 TP0] new 5"], "resumed at the byte offset, not from the start"
        log.write_text("[2026-01-01 10:00:02 TP0] after truncation\n")
        after = await _collect(follower, lambda s: any("after truncation" in x for x in s))
        assert after[-1].endswith("after truncation")
    finally:
        await transport.close()


async def test_a_traceback_whose_lines_come_in_two_batches_is_one_error_named_by_its_last_line(
        tmp_path: Path) -> None:
    """journald hands a traceback over one entry per line: the header can end a batch. The error
    is the whole traceback, named by its exception (the OOM), never cut at its header."""
    log = tmp_path / "sglang.log"
    log.write_text("[2026-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n")
    transport = LocalTransport()
    errors: list[object] = []
    try:
        follower = LogFollower(transport, log_file=str(log))

        async def follow() -> None:
            wrote = False
            async for batch in follower.batches():
                if not wrote and any("Traceback" in e.text for e in batch.events):
                    wrote = True  # the header's batch is out: the rest arrives in a later one
                    with open(log, "a") as fh:
                        fh.write('  File "sglang/srt/managers/scheduler.py", line 3011, in run_scheduler_process\n'
                                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
                if batch.summary.errors:
                    errors.extend(batch.summary.errors)
                    return

        await asyncio.wait_for(follow(), 30)
    finally:
        await transport.close()
    (error,) = errors
    assert error.kind == "exception" and error.message.startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert len(error.lines) == 3


async def test_read_a_local_log_file_once(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(BEFORE_RESTART) + "\n")
    s = await read_log_file(str(log))
    assert s.lines_seen == len(BEFORE_RESTART) and s.capacity and s.capacity["max_total_num_tokens"] == 935444


async def test_the_old_service_is_ready_and_an_oom_at_boot_is_dead_with_its_reason(tmp_path: Path) -> None:
    # 4x: the old service serves until t=45 s (11 s here; at 8x a loaded CI machine read it stopped)
    sim = HostSimulator(tmp_path / "h", speed=4.0)
    await sim.start()
    try:
        await start_scenario(sim, oom=True)
        transport = SshTransport(sim_options(sim))
        await transport.connect()
        follower = LogFollower(transport, units=(NEW_UNIT, OLD_UNIT))
        task = asyncio.ensure_future(_collect(follower, lambda s: False, timeout=60))
        old = ServerWatcher(transport, OLD_UNIT, sim.server_port, None)
        for _ in range(50):  # the simulated host starts its old service's process first
            st = await old.snapshot_once()
            if st.status != "starting":
                break
            await asyncio.sleep(0.1)
        assert (st.status, st.http.health_ok) == ("ready", True)
        new = ServerWatcher(transport, NEW_UNIT, sim.server_port, follower.tracker)
        seen = set()
        for _ in range(600):  # the new unit starts at t=50 s (12.5 s at 4x), boots, and fails capturing graphs
            st = await new.poll()
            seen.add(st.status)
            if st.unit_state == "failed":
                break
            await asyncio.sleep(0.1)
        assert "starting" in seen, "it was seen booting before it died"
        # The unit can be seen failed a moment before its last log lines arrive: the next poll names the cause.
        for _ in range(50):
            if "OutOfMemoryError" in st.reason:
                break
            await asyncio.sleep(0.1)
            st = await new.poll()
        assert st.status == "dead", st
        assert "OutOfMemoryError" in st.reason and st.unit_state == "failed"
        assert "DEAD" in format_status(Reading("server", st, 0.0), None, 80).plain
        task.cancel()
        await transport.close()
    finally:
        await sim.stop()


def test_snapshot_log_file_without_host(tmp_path: Path) -> None:
    import subprocess
    import sys

    log = tmp_path / "x.log"
    log.write_text("\n".join(BEFORE_RESTART) + "\n")
    out = subprocess.run([sys.executable, "-m", "console", "snapshot", "--log-file", str(log), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)["log"]
    assert set(data) >= {"source", "phase", "boot", "last_prefill", "last_decode", "capacity", "kv_cache", "errors"}
    assert data["last_decode"]["accept_len"] == 2.9 and data["capacity"]["max_total_num_tokens"] == 935444


def test_a_new_boot_forgets_the_old_servers_figures() -> None:
    t = LogTracker("x")
    t.feed([parse_line(REAL[23]), parse_line(REAL[17])])  # a decode line, a capacity line
    assert t.summary().last_decode and t.summary().capacity
    t.feed([parse_line("[2026-01-01 10:00:00 TP0] server_args=ServerArgs(model_path='/m')")])
    s = t.summary()
    assert (s.last_decode, s.capacity, [b.phase for b in s.boot]) == (None, None, ["launch"])


def test_secrets_in_log_lines_and_launch_commands_are_redacted() -> None:
    from console.redact import redact_text

    line = ("[2026-01-01 10:00:00 TP0] server_args=ServerArgs(model_path='/m', api_key='sk-live-0123456789abcdef', "
            "admin_api_key=None, hf_token: hf_AbCdEfGhIjKlMnOpQrSt, tp_size=4)")
    out = redact_text(line)
    assert "sk-live-0123456789abcdef" not in out and "hf_AbCdEfGhIjKlMnOpQrSt" not in out
    assert "admin_api_key=None" in out and "tp_size=4" in out and "model_path='/m'" in out
    cmd = "python -m sglang.launch_server --model-path /m --api-key sk-abcdefghijkl123 --tp 4"
    assert redact_text(cmd) == "python -m sglang.launch_server --model-path /m --api-key ‹redacted› --tp 4"
    plain = "[2026-01-01 10:00:00 TP0] Decode batch, #running-req: 48, #full token: 412000"
    assert redact_text(plain) is plain, "ordinary lines are not rewritten"


# -- a batch line's percentages are fractions of the tokens -------------------------------------
def test_the_log_pane_shows_a_2_76_percent_cache_hit_rate_as_2_76_percent_not_276() -> None:
    """sgl-project/sglang #4339's prefill line (tests/data/sglang_real_lines.txt line 3) and PR
    #3699's (sglang_other_formats.txt line 2): "cache hit rate: 2.76%" is 0.0276 of the tokens;
    "token usage: 0.04" is printed as a fraction already and stays as it is."""
    other_formats = (DATA / "sglang_other_formats.txt").read_text().splitlines()
    assert "cache hit rate: 2.76%" in REAL[2] and "cache hit rate: 26.67%" in other_formats[1]
    fields = batch_fields(parse_line(REAL[2]))
    assert fields["cache hit rate"] == pytest.approx(0.0276)
    assert fields["token usage"] == pytest.approx(0.04)
    assert batch_fields(parse_line(other_formats[1]))["cache hit rate"] == pytest.approx(0.2667)
    assert batch_fields(parse_line(REAL[1]))["cache hit rate"] == 0.0
    tracker = LogTracker("test")
    tracker.feed([parse_line(line) for line in REAL[:3]])
    last = tracker.summary().last_prefill
    assert last is not None and last["cache hit rate"] == pytest.approx(0.0276)


# -- journald's byte-array MESSAGE ----------------------------------------------------------------
JOURNAL = json.loads((DATA / "journalctl_real.json").read_text())


def _journal_follower() -> LogFollower:
    return LogFollower(LocalTransport(), units=("sglang.service",))


@pytest.mark.parametrize("sample", JOURNAL["byte_array_messages"], ids=lambda s: s["source"])
def test_a_journal_line_sent_as_a_byte_array_is_shown_as_its_text(sample: dict[str, object]) -> None:
    """journalctl -o json prints a MESSAGE with control characters or invalid UTF-8 as an array of
    bytes (systemd's logs-show.c); these arrays are real ones (tests/data/journalctl_real.json),
    carried by the always-printed fields of a real entry (systemd PR #33021)."""
    entry = dict(JOURNAL["export_entry_systemd_pr_33021"], MESSAGE=sample["MESSAGE"])
    follower = _journal_follower()
    text = follower._decode(json.dumps(entry).encode())  # type: ignore[attr-defined]
    assert text == bytes(sample["MESSAGE"]).decode("utf-8", "replace")  # type: ignore[arg-type]
    assert follower.cursor == entry["__CURSOR"]  # type: ignore[attr-defined]
    if "short_output" in sample:
        assert text is not None and text.replace("\x1b[32m", "").replace("\x1b[39m", "") == sample["short_output"]


def test_invalid_utf8_in_a_journal_byte_array_is_shown_as_replacement_characters() -> None:
    """Hand-made (no public sample at hand had invalid UTF-8): bytes 0xff and a lone 0xc3."""
    entry = {"__CURSOR": "s=1;i=2", "MESSAGE": [0xFF, 65, 0xC3, 66], "_SYSTEMD_UNIT": "sglang.service"}
    assert _journal_follower()._decode(json.dumps(entry).encode()) == "\ufffdA\ufffdB"  # type: ignore[attr-defined]


def test_a_journal_byte_array_reaches_the_log_pane_as_clean_text() -> None:
    """Through the whole line path: the escape sequences of lnav #1087's message are cleaned."""
    from console.host.sources.log import parse_line as source_parse_line

    sample = JOURNAL["byte_array_messages"][0]
    entry = dict(JOURNAL["export_entry_systemd_pr_33021"], MESSAGE=sample["MESSAGE"])
    text = _journal_follower()._decode(json.dumps(entry).encode())  # type: ignore[attr-defined]
    assert text is not None
    event = source_parse_line(text)
    assert "bot-sdkAppservice" in event.text and "\x1b" not in event.text


def test_a_nan_or_infinite_metric_is_unknown_not_a_rate() -> None:
    """Found by the fuzz test's property (no inf/nan shown as a rate): `sglang:gen_throughput NaN`
    (a gauge Prometheus text may carry) was read as nan tok/s."""
    for bad in ("NaN", "+Inf", "1e999"):
        got = parse_prometheus(f'sglang:gen_throughput{{model="x"}} {bad}\nsglang:num_running_reqs 3\n',
                               ("sglang:gen_throughput", "sglang:num_running_reqs"))
        assert got == {"sglang:num_running_reqs": 3.0}, (bad, got)


def test_lines_journald_suppressed_past_a_rate_limit_are_a_marked_lost_line_not_a_plain_one() -> None:
    """Recorded on the real journald (systemd 252, tests/data/real/journal_rate_limited.json): a unit
    that logged 200 lines past LogRateLimitBurst=20; journald's own "Suppressed N messages from UNIT"
    is in `journalctl -u UNIT`. The log marks it as lost lines (a warning, counted), never a plain line."""
    rec = json.loads((DATA / "real" / "journal_rate_limited.json").read_text())
    raw = [line.encode() for line in rec["captures"][0]["stdout"].splitlines()]
    follower = LogFollower(LocalTransport(), units=("sglang-test-flood.service",))
    events = [e for e in (follower._parse(r) for r in raw) if e is not None]  # type: ignore[attr-defined]
    lost = [e for e in events if e.kind == "lost"]
    said = next(json.loads(r)["MESSAGE"] for r in raw if b"Suppressed" in r)
    dropped = int(said.split()[1])
    assert [(e.fields["dropped"], e.fields["unit"], e.severity) for e in lost] == [
        (dropped, "sglang-test-flood.service", "warning")]
    assert not any(e.kind != "lost" and "Suppressed" in e.text for e in events)
    kept = sum(1 for e in events if e.text.startswith("flood-"))
    assert kept + dropped == 200
    tracker = LogTracker("t")
    tracker.feed(events)
    assert [e.kind for e in tracker.summary().errors] == ["lines lost"]


def test_a_suppressed_line_from_the_server_itself_is_its_own_text() -> None:
    """Only journald's own line counts: a server that prints the same words is a plain log line."""
    entry = {"__CURSOR": "c", "MESSAGE": "Suppressed 5 messages from x.service", "_SYSTEMD_UNIT": "sglang.service"}
    event = _journal_follower()._parse(json.dumps(entry).encode())  # type: ignore[attr-defined]
    assert event is not None and event.kind != "lost"
