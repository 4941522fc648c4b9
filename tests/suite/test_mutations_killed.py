"""Issue 27: the four one-line bugs no test caught on d2e6719, each killed here.

Each test names its mutation; `benchmarks/mutation.py` applies them (and more) to a copy of the
tree and checks that these tests fail under each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.parsers.sglang_log import batch_fields, parse_line
from console.share import protocol as p
from tests.kit.download import poll, write_safetensors
from tests.kit.hosts import DATA
from tests.kit.share import (  # noqa: F401 - `core` is the fixture
    Core,
    attached,
)

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


# -- the gate, as a pure function over the host's state (benchmarks/mutation.py's gate-*) -------
class _State:
    """Only what the gate reads: `data(name)` and `verify`."""

    def __init__(self, **data: object) -> None:
        self._data = data
        self.verify = None

    def data(self, name: str) -> object:
        return self._data.get(name)


def _download(**changes: object) -> object:
    from types import SimpleNamespace

    values: dict[str, object] = dict(shards_done=2, shards_total=2, problems=(), partial_files=(), complete=True,
                                     bytes_done=10, bytes_total=10, disk_free_bytes=500e9, fits_on_disk=True,
                                     expected_source="the Hub's file list")
    values.update(changes)
    return SimpleNamespace(**values)


def test_the_gate_refuses_a_download_with_wrong_sizes_or_partial_files() -> None:
    from console.swap import preflight

    assert preflight.check_download(_State(download=_download())).ok is True
    wrong = preflight.check_download(_State(download=_download(problems=("wrong size: a is truncated",))))
    assert wrong.ok is False and "truncated" in wrong.reason
    assert preflight.check_download(_State(download=_download(partial_files=("x",)))).ok is False
    assert preflight.check_download(_State(download=_download(complete=None))).ok is None
    assert preflight.check_download(_State()).ok is None


def test_the_gate_refuses_a_download_that_does_not_fit_on_the_disk() -> None:
    from console.swap import preflight

    assert preflight.check_disk(_State(download=_download())).ok is True
    assert preflight.check_disk(_State(download=_download(fits_on_disk=False, disk_free_bytes=3e9))).ok is False
    assert preflight.check_disk(_State(download=_download(fits_on_disk=None))).ok is True  # free space known
    assert preflight.check_disk(_State(download=_download(disk_free_bytes=None))).ok is None


def test_an_undecided_check_fails_the_gate_until_someone_overrides_it() -> None:
    from console.swap import preflight
    from console.swap.model import GateCheck

    checks = (GateCheck("download", True, "ok"), GateCheck("fit", None, "no GPU data yet"),
              GateCheck("paths", False, "under /data"))
    assert [c.name for c in preflight.failing(checks)] == ["fit", "paths"]
    overridden = (checks[0], GateCheck("fit", None, "no GPU data yet", overridden_by="ana"), checks[2])
    assert [c.name for c in preflight.failing(overridden)] == ["paths"]


# -- nvidia-smi (benchmarks/mutation.py's smi-*) ----------------------------------------------
def test_nvidia_smi_na_fields_are_unknown_and_infinite_readings_are_none() -> None:
    """Hand-made lines in nvidia-smi's documented shapes (tests/data/PROVENANCE.md: MIG mode's
    `[N/A]`, a uuid of N/A): not a value; `inf`/`nan` are no readings either."""
    from console.parsers.nvidia_smi import parse_gpu_line

    gpu = parse_gpu_line("0, NVIDIA H200, N/A, 41579, 143771, 87, 54, inf, nan")
    assert gpu is not None
    assert (gpu.uuid, gpu.power_w, gpu.power_limit_w) == (None, None, None)
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.utilization_pct) == (41579, 143771, 87)
    real = parse_gpu_line("0, NVIDIA H200, GPU-3f1c, 41579, 143771, 87, 54, 512.33, 700.00")
    assert real is not None and (real.uuid, real.power_w) == ("GPU-3f1c", 512.33)


# -- download truth: a damaged file outside the index keeps the directory from "complete" -------
async def test_a_truncated_safetensors_file_outside_the_index_keeps_the_download_incomplete(tmp_path: Path) -> None:
    from tests.kit.download import model_dir

    model, _ = model_dir(tmp_path)
    good = await poll(model)
    assert good.complete and good.expected_source == "index"
    stray = model / "extra.safetensors"  # not in the index's weight map (a leftover, a second format)
    write_safetensors(stray, {"x": 2048})
    stray.write_bytes(stray.read_bytes()[:-10])
    bad = await poll(model)
    assert any("extra.safetensors" in x and "truncated" in x for x in bad.problems), bad.problems
    assert not bad.complete
