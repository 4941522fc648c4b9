"""Issue 27: the four one-line bugs no test caught on d2e6719, each killed here.

Each test names its mutation; `benchmarks/mutation.py` applies them (and more) to a copy of the
tree and checks that these tests fail under each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.parsers.sglang_log import batch_fields, parse_line
from console.share import protocol as p
from tests.conftest import DATA
from tests.test_download_truth import poll, write_safetensors
from tests.test_share import Core, attached, core  # noqa: F401 - `core` is the fixture

REAL_LINES = (DATA / "sglang_real_lines.txt").read_text().splitlines()
OTHER_FORMATS = (DATA / "sglang_other_formats.txt").read_text().splitlines()
JOURNAL = json.loads((DATA / "journalctl_real.json").read_text())


# -- 1. percentages in batch lines (mutation: `%` values no longer divided by 100) --------------
def test_a_batch_lines_percentages_are_fractions() -> None:
    """sgl-project/sglang #4339's prefill line (tests/data/sglang_real_lines.txt line 3) and PR
    #3699's (sglang_other_formats.txt line 2): "cache hit rate: 2.76%" is 0.0276 of the tokens."""
    line = REAL_LINES[2]
    assert "cache hit rate: 2.76%" in line
    fields = batch_fields(parse_line(line))
    assert fields["cache hit rate"] == pytest.approx(0.0276)
    assert fields["token usage"] == pytest.approx(0.04)  # printed as a fraction: left as it is
    other = batch_fields(parse_line(OTHER_FORMATS[1]))
    assert "cache hit rate: 26.67%" in OTHER_FORMATS[1]
    assert other["cache hit rate"] == pytest.approx(0.2667)
    zero = batch_fields(parse_line(REAL_LINES[1]))
    assert zero["cache hit rate"] == 0.0


def test_the_log_summary_keeps_the_hit_rate_as_a_fraction() -> None:
    from console.analysis.log_state import LogTracker

    tracker = LogTracker("test")
    tracker.feed([parse_line(line) for line in REAL_LINES[:3]])
    last = tracker.summary().last_prefill
    assert last is not None and last["cache hit rate"] == pytest.approx(0.0276)


# -- 2. a truncated shard with no index and no listing (mutation: header check `==` -> `<=`) ----
async def test_without_index_or_listing_a_truncated_shard_is_named_from_its_own_header(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    shard = model / "model.safetensors"  # one shard, no model.safetensors.index.json, no kept listing
    write_safetensors(shard, {"w.a": 4096, "w.b": 1001})
    good = await poll(model)
    assert good.problems == () and good.expected_source is None
    full = shard.read_bytes()
    shard.write_bytes(full[:-1])
    bad = await poll(model)
    truncated = [x for x in bad.problems if "model.safetensors" in x and "truncated" in x]
    assert truncated == [f"wrong size: model.safetensors is truncated: {len(full) - 1:,} bytes on disk, "
                         f"its safetensors header says {len(full):,}"], bad.problems
    assert not bad.complete
    shard.write_bytes(full + b"\0")
    long = await poll(model)
    assert any("model.safetensors" in x and "corrupt" in x for x in long.problems), long.problems


def test_header_problems_names_shorter_and_longer_files_and_passes_the_exact_size() -> None:
    from types import SimpleNamespace

    from console.analysis.download import header_problems

    finals = {"a.safetensors": SimpleNamespace(size_bytes=99), "b.safetensors": SimpleNamespace(size_bytes=101),
              "c.safetensors": SimpleNamespace(size_bytes=100), "d.safetensors": SimpleNamespace(size_bytes=5)}
    headers: dict[str, int | None] = {"a.safetensors": 100, "b.safetensors": 100, "c.safetensors": 100,
                                      "d.safetensors": None}
    problems = header_problems(finals, headers)
    assert [x.split(" is ")[0] for x in problems] == ["a.safetensors", "b.safetensors"]
    assert "truncated" in problems[0] and "corrupt" in problems[1]


# -- 3. an observer overriding a gate check (mutation: `swap_override` out of DRIVER_ONLY) -----
async def test_an_observers_gate_override_is_refused_and_changes_nothing(core: Core) -> None:  # noqa: F811
    from console.swap import preflight

    check = preflight.CHECKS[0]
    ana, ta = await attached(core.sock, "ana")
    ben, tb = await attached(core.sock, "ben")
    try:
        assert (ana.role, ben.role) == ("driver", "observer")
        reply = await ben.request(p.SwapOverride, check=check, typed=check)
        assert reply.error is not None and "ben observes" in reply.error and "ana drives" in reply.error
        assert core.runner.swap._overrides == {}
        # The same request from the driver is carried out: the refusal above was the role's.
        assert (await ana.request(p.SwapOverride, check=check, typed=check)).error is None
        assert core.runner.swap._overrides == {check: "ana"}
    finally:
        await ana.close()
        await ben.close()
        import asyncio

        await asyncio.gather(ta, tb)


def test_every_request_that_changes_the_host_is_driver_only() -> None:
    changing = {"verify", "swap", "pick", "bench", "stop_bench", "swap_preview", "swap_confirm", "swap_override"}
    assert changing <= p.DRIVER_ONLY


# -- 4. journald's byte-array MESSAGE (mutation: the decode branch returns None) ---------------
def _follower() -> object:
    from console.sources.log import LogFollower
    from console.transport import LocalTransport

    return LogFollower(LocalTransport(), units=("sglang.service",))


@pytest.mark.parametrize("sample", JOURNAL["byte_array_messages"], ids=lambda s: s["source"])
def test_a_journal_message_sent_as_a_byte_array_is_decoded(sample: dict[str, object]) -> None:
    """journalctl -o json prints a MESSAGE with control characters or invalid UTF-8 as an array of
    bytes (systemd's logs-show.c); these arrays are real ones (tests/data/journalctl_real.json),
    carried by the always-printed fields of a real entry (systemd PR #33021)."""
    entry = {k: v for k, v in JOURNAL["export_entry_systemd_pr_33021"].items()}
    entry["MESSAGE"] = sample["MESSAGE"]
    follower = _follower()
    text = follower._decode(json.dumps(entry).encode())  # type: ignore[attr-defined]
    assert text == bytes(sample["MESSAGE"]).decode("utf-8", "replace")  # type: ignore[arg-type]
    assert follower.cursor == entry["__CURSOR"]  # type: ignore[attr-defined]
    if "short_output" in sample:
        assert text is not None and text.replace("\x1b[32m", "").replace("\x1b[39m", "") == sample["short_output"]


def test_invalid_utf8_in_a_byte_array_becomes_replacement_characters() -> None:
    """Hand-made (no public sample at hand had invalid UTF-8): bytes 0xff and a lone 0xc3."""
    entry = {"__CURSOR": "s=1;i=2", "MESSAGE": [0xFF, 65, 0xC3, 66], "_SYSTEMD_UNIT": "sglang.service"}
    assert _follower()._decode(json.dumps(entry).encode()) == "\ufffdA\ufffdB"  # type: ignore[attr-defined]


def test_a_byte_array_message_reaches_the_log_as_clean_text() -> None:
    """Through the whole line path: the escape sequences of lnav #1087's message are cleaned."""
    from console.sources.log import parse_line as source_parse_line

    sample = JOURNAL["byte_array_messages"][0]
    entry = dict(JOURNAL["export_entry_systemd_pr_33021"], MESSAGE=sample["MESSAGE"])
    text = _follower()._decode(json.dumps(entry).encode())  # type: ignore[attr-defined]
    assert text is not None
    event = source_parse_line(text)
    assert "bot-sdkAppservice" in event.text
