"""Crafted recordings (issue 21, item 9): a `t` of 1e400 or NaN, inf/NaN throughputs and a gzip
bomb are skipped or stop the reading with one line; `report` and `replay` never trace back, and
reading never holds more than the caps."""

from __future__ import annotations

import gzip
import json
import tracemalloc
import zlib
from pathlib import Path

import pytest

from console.core import codec
from console.core import recording as r
from console.core.state import BenchChanged, Notice
from console.core.derive.swap_view import SwapSetup, SwapStep, SwapStepChanged
from tests.kit.figures import record

HEADER = json.dumps({"format": "gpuconsole-recording", "version": 1, "host": "h"}).encode() + b"\n"


def _entry(t: bytes, event: object) -> bytes:
    return b'{"t":' + t + b',"e":' + codec.encode_event(event) + b"}\n"  # type: ignore[arg-type]


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(gzip.compress(b"".join(lines)))
    return path


SETUP = SwapSetup("h", "old.service", "new.service", "Qwen/X", "/shared/m", False, False, False, None)
BAD_TIMES = [b"1e400", b"-1e400", b"NaN", b"Infinity", b"1e300", b"-5"]
BAD_NUMBERS = [b"1e400", b"-1e400", b"1E999"]


@pytest.mark.parametrize("t", BAD_TIMES)
def test_an_entry_whose_time_is_not_a_time_is_skipped(tmp_path: Path, t: bytes) -> None:
    path = _write(tmp_path / "r.jsonl.gz", [HEADER, _entry(b"1.0", Notice("h", "a", "b")),
                                            _entry(t, Notice("h", "a", "c")), _entry(b"2.0", SETUP)])
    rec = r.read_recording(path)
    assert (len(rec.entries), rec.skipped) == (2, 1)


@pytest.mark.parametrize("number", BAD_NUMBERS)
def test_a_throughput_that_is_not_finite_is_skipped_and_the_report_renders(tmp_path: Path, number: bytes,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli.main import main

    record = {"label": "x", "timestamp": 5.0, "output_throughput": 123.0, "concurrency": 4, "model": "m"}
    line = _entry(b"3.0", BenchChanged("h", "result", record=record)).replace(b"123.0", number)
    assert number in line
    stopped = SwapStepChanged("h", SwapStep("stop_old", "Stop the old service", "done", 1.5, 2.0))  # a swap happened
    path = _write(tmp_path / "r.jsonl.gz", [HEADER, _entry(b"1.0", SETUP), _entry(b"2.0", stopped), line])
    rec = r.read_recording(path)
    assert rec.skipped == 1
    for fmt in ("md", "html", "json"):
        assert main(["report", str(path), "--format", fmt]) == 0
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and captured.out


def _bomb(path: Path, mib: int) -> Path:
    """A line of `mib` MiB of zeros between two entries, gzip'd to ~1/1000 of that."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(comp.compress(HEADER + _entry(b"1.0", SETUP)))
        chunk = b"0" * (1 << 20)
        for _ in range(mib):
            fh.write(comp.compress(chunk))
        fh.write(comp.compress(b"\n" + _entry(b"2.0", Notice("h", "after", "the bomb"))))
        fh.write(comp.flush())
    return path


def _peak(path: Path) -> tuple[r.Recording, int]:
    tracemalloc.start()
    try:
        rec = r.read_recording(path)
        return rec, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_gzip_bomb_is_read_within_the_caps(tmp_path: Path) -> None:
    """1 MB of gzip that inflates to 1 GiB in one line (2.1 GB in memory before): reading stops
    at the total cap with one line, holding at most a line's cap at any time."""
    path = _bomb(tmp_path / "bomb.jsonl.gz", 1024)
    assert path.stat().st_size < 2 << 20
    rec, peak = _peak(path)
    record("1 MB gzip bomb (1 GiB line) in read_recording", tried=1, escaped=0, memory_mib=peak >> 20)
    assert peak < 3 * r.MAX_LINE_BYTES, f"peak {peak >> 20} MiB"
    assert rec.damage is not None and "reading limit" in rec.damage
    assert [type(e).__name__ for _, e in rec.entries] == ["SwapSetup"]


def test_a_line_over_the_line_cap_is_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    rec, peak = _peak(_bomb(tmp_path / "long.jsonl.gz", 64))
    assert peak < 3 * r.MAX_LINE_BYTES, f"peak {peak >> 20} MiB"
    assert rec.skipped == 1 and rec.damage is None
    assert [type(e).__name__ for _, e in rec.entries] == ["SwapSetup", "Notice"]


def test_reading_stops_at_the_total_cap_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "MAX_READ_BYTES", 50_000)
    lines = [HEADER] + [_entry(b"%d.0" % i, Notice("h", "t", "x" * 200)) for i in range(1, 1000)]
    path = _write(tmp_path / "big.jsonl.gz", lines)
    rec = r.read_recording(path)
    assert rec.damage is not None and "reading limit" in rec.damage
    assert 0 < len(rec.entries) < 999


def test_deeply_nested_json_in_an_entry_is_skipped_not_a_recursion_error(tmp_path: Path) -> None:
    deep = b'{"t":1.0,"e":' + b'{"a":' * 100_000 + b"1e400" + b"}" * 100_000 + b"}\n"
    path = _write(tmp_path / "deep.jsonl.gz", [HEADER, deep, _entry(b"2.0", SETUP)])
    rec = r.read_recording(path)
    assert rec.skipped == 1 and len(rec.entries) == 1
