"""Download progress from a listing and what the model should hold: bytes, shards, partial files,
rate, ETA, stalls, disk. Pure functions plus one small tracker of recent totals."""

from __future__ import annotations

import posixpath
from collections import deque
from dataclasses import dataclass, replace
from typing import Any

from console.host.parsers.hf_listing import (
    BLOB_PARTIAL,
    INDEX_NAME,
    LOCAL_PARTIAL,
    DirListing,
    SafetensorsIndex,
    TreeEntry,
    short_hash,
)

DOWNLOAD_DIR = ".cache/huggingface/download/"


@dataclass(frozen=True, slots=True)
class ExpectedFile:
    path: str
    size_bytes: int | None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class ExpectedFiles:
    """What a complete download holds: from the Hub (every file, exact sizes) or the index (shards)."""

    source: str  # "hub" or "index"
    files: tuple[ExpectedFile, ...]
    total_bytes: int | None
    note: str | None = None

    @property
    def shards(self) -> tuple[ExpectedFile, ...]:
        return tuple(f for f in self.files if f.path.endswith(".safetensors"))


def expected_from_tree(entries: tuple[TreeEntry, ...]) -> ExpectedFiles:
    """The commit's listing that `hf download --local-dir` keeps on the host: every file, exact sizes."""
    return ExpectedFiles("listing", tuple(ExpectedFile(e.path, e.size_bytes, e.sha256) for e in entries),
                         sum(e.size_bytes for e in entries), note="the commit's file listing kept by hf download")


def expected_from_index(index: SafetensorsIndex) -> ExpectedFiles:
    return ExpectedFiles(
        "index", tuple(ExpectedFile(s, None) for s in index.shards), index.total_size_bytes,
        note="weights only: index.json total_size (tensor bytes)",
    )


@dataclass(frozen=True, slots=True)
class PartialFile:
    path: str  # the target file when it could be matched, else the partial's own name
    bytes: int
    expected_bytes: int | None
    matched: bool


@dataclass(frozen=True, slots=True)
class DownloadProgress:
    model_dir: str
    repo_id: str | None
    expected_source: str | None
    bytes_done: int
    bytes_total: int | None
    shards_done: int
    shards_total: int | None
    files_done: int
    files_total: int | None
    partial_files: tuple[PartialFile, ...]
    rate_bytes_per_s: float | None
    eta_s: float | None
    stalled_since: float | None
    disk_free_bytes: int | None
    fits_on_disk: bool | None
    complete: bool | None
    problems: tuple[str, ...]
    sampled_at_s: float
    expected_note: str | None = None

    @property
    def fraction(self) -> float | None:
        if not self.bytes_total:
            return None
        return min(1.0, self.bytes_done / self.bytes_total)


def _partials(listing: DirListing, expected: ExpectedFiles | None,
              header_sizes: dict[str, int | None] | None = None) -> list[PartialFile]:
    by_short: dict[tuple[str, str], ExpectedFile] = {}
    by_etag: dict[str, ExpectedFile] = {}
    for f in (expected.files if expected else ()):
        by_short[(posixpath.dirname(f.path), short_hash(posixpath.basename(f.path)))] = f
        if f.sha256:
            by_etag[f.sha256] = f
    out: list[PartialFile] = []
    for item in listing.files:
        if item.kind != "f" or not item.rel_path.startswith(DOWNLOAD_DIR) or not item.rel_path.endswith(".incomplete"):
            continue
        rel = item.rel_path[len(DOWNLOAD_DIR):]
        folder, name = posixpath.split(rel)
        m = LOCAL_PARTIAL.match(name)
        target = None
        if m:
            target = by_short.get((folder, m.group("short"))) or by_etag.get(m.group("etag"))
        size = target.size_bytes if target else None
        if size is None and header_sizes:  # the safetensors header knows, once its first bytes are there
            size = header_sizes.get(item.rel_path)
        out.append(PartialFile(target.path if target else name, item.size_bytes, size, target is not None))
    for item in listing.blobs:
        m = BLOB_PARTIAL.match(item.rel_path)
        target = by_etag.get(m.group("etag")) if m else None
        out.append(PartialFile(target.path if target else item.rel_path, item.size_bytes,
                               target.size_bytes if target else None, target is not None))
    return sorted(out, key=lambda p: p.path)


def with_header_sizes(expected: ExpectedFiles, header_sizes: dict[str, int | None]) -> ExpectedFiles:
    """The index names the shards but not their sizes: the safetensors headers give them."""
    if expected.source != "index":
        return expected
    files = tuple(f if f.size_bytes is not None or header_sizes.get(f.path) is None
                  else ExpectedFile(f.path, header_sizes[f.path], f.sha256) for f in expected.files)
    return ExpectedFiles(expected.source, files, expected.total_bytes, expected.note)


def header_problems(finals: dict[str, Any], header_sizes: dict[str, int | None]) -> list[str]:
    """A finished shard shorter or longer than its own header says: named, without hashing it."""
    out = []
    for path, f in finals.items():
        want = header_sizes.get(path)
        if want is None or f.size_bytes == want:
            continue
        what = "truncated" if f.size_bytes < want else "corrupt (longer than its header says)"
        out.append(f"{path} is {what}: {f.size_bytes:,} bytes on disk, its safetensors header says {want:,}")
    return out


@dataclass(frozen=True, slots=True)
class FinalsStats:
    """What the finished files say against what is expected: the part of a summary that changes
    only when a finished file does (a 100k-file directory need not be walked again per poll)."""

    files_done: int
    bytes_done: int
    shards_done: int
    counted: int
    wrong: tuple[str, ...]
    complete_finals: bool


def finals_stats(finals: dict[str, Any], expected: ExpectedFiles | None,
                 header_sizes: dict[str, int | None]) -> FinalsStats:
    if expected is None:
        shards = sum(1 for p in finals if p.endswith(".safetensors"))
        wrong = tuple(f"wrong size: {w}" for w in header_problems(finals, header_sizes))
        return FinalsStats(len(finals), sum(f.size_bytes for f in finals.values()), shards, 0, wrong, False)
    expected = with_header_sizes(expected, header_sizes)
    weights_only = expected.source == "index"
    counted = expected.shards if weights_only else expected.files
    files_done = 0
    done = 0
    wrong: list[str] = []
    for f in counted:
        on_disk = finals.get(f.path)
        if on_disk is None:
            continue
        if f.size_bytes is not None and on_disk.size_bytes != f.size_bytes:
            what = "truncated" if on_disk.size_bytes < f.size_bytes else "corrupt: longer than expected"
            wrong.append(f"{f.path}: {on_disk.size_bytes:,} bytes on disk, {f.size_bytes:,} expected ({what})")
            done += min(on_disk.size_bytes, f.size_bytes)
            continue
        files_done += 1
        done += on_disk.size_bytes
    shards_done = sum(1 for sh in expected.shards if sh.path in finals and
                      (sh.size_bytes is None or finals[sh.path].size_bytes == sh.size_bytes))
    by_header = [w for w in header_problems(finals, header_sizes)
                 if not any(w.startswith(x.split(":")[0] + " ") for x in wrong)]
    problems = tuple(f"wrong size: {w}" for w in wrong + by_header)
    complete = files_done == len(counted) and not problems and not (weights_only and INDEX_NAME not in finals)
    return FinalsStats(files_done, done, shards_done, len(counted), problems, complete)


def summarize(listing: DirListing, expected: ExpectedFiles | None, *, model_dir: str, repo_id: str | None,
              now_s: float, problems: tuple[str, ...] = (),
              header_sizes: dict[str, int | None] | None = None,
              finals: dict[str, Any] | None = None, stats: FinalsStats | None = None) -> DownloadProgress:
    """Everything but rate/ETA/stall, which need history (see `ProgressTracker`). `header_sizes`:
    relative path -> final size from the file's safetensors header (finished and partial files).
    `finals` and `stats`: the finished files and their `finals_stats`, when the caller keeps them
    (then `listing` need only hold the partial files and the broken links)."""
    if finals is None:
        finals = {f.rel_path: f for f in listing.files if f.kind == "f" and not f.rel_path.startswith(".cache/")}
    header_sizes = header_sizes or {}
    if stats is None:
        stats = finals_stats(finals, expected, header_sizes)
    partials = _partials(listing, expected, header_sizes)
    notes = list(problems)
    for f in listing.files:
        if f.kind == "l":
            notes.append(f"broken symlink: {f.rel_path}")
    partial_bytes = sum(p.bytes for p in partials)
    done = stats.bytes_done + partial_bytes
    if expected is None:
        notes.extend(stats.wrong)
        return DownloadProgress(model_dir, repo_id, None, done, None, stats.shards_done, None, stats.files_done,
                                None, tuple(partials), None, None, None, listing.disk_free_bytes, None, None,
                                tuple(notes), now_s, "total unknown: no Hub file list and no index.json yet")
    total = expected.total_bytes
    remaining = None if total is None else max(0, total - done)
    fits = None if remaining is None or listing.disk_free_bytes is None else listing.disk_free_bytes >= remaining
    if fits is False:
        notes.append(f"disk: {remaining:,} bytes still to come, {listing.disk_free_bytes:,} free")
    notes.extend(stats.wrong)
    complete = stats.complete_finals and not partials
    return DownloadProgress(
        model_dir, repo_id, expected.source, done, total, stats.shards_done, len(expected.shards),
        stats.files_done, stats.counted, tuple(partials), None, None, None, listing.disk_free_bytes, fits, complete,
        tuple(notes), now_s, expected.note,
    )


class ProgressTracker:
    """Rate over a sliding window, ETA, and when the bytes last grew (stall detection)."""

    def __init__(self, window_s: float = 20.0, stall_after_s: float = 60.0) -> None:
        self.window_s = window_s
        self.stall_after_s = stall_after_s
        self._samples: deque[tuple[float, int]] = deque()
        self._last_growth_s: float | None = None
        self._last_bytes: int | None = None
        self._begun = False

    def update(self, p: DownloadProgress) -> DownloadProgress:
        now, done = p.sampled_at_s, p.bytes_done
        notes = list(p.problems)
        shrank = self._last_bytes is not None and done < self._last_bytes
        if shrank:
            notes.append(f"download restarted: {self._last_bytes - done:,} bytes fewer than before")
            self._samples.clear()
        if shrank or self._last_bytes is None or done > self._last_bytes:
            self._last_growth_s = now
        self._last_bytes = done
        self._samples.append((now, done))
        # Keep two samples at least: after a long stall the rate is a known 0, not unknown.
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()
        rate = None
        if len(self._samples) >= 2:
            (t0, b0), (t1, b1) = self._samples[0], self._samples[-1]
            if t1 > t0:
                rate = max(0.0, (b1 - b0) / (t1 - t0))
        if p.complete:  # rate and ETA end with the download
            rate = None
        eta = None
        if p.bytes_total is not None and rate and not p.complete:
            eta = max(0.0, p.bytes_total - done) / rate
        stalled = None
        begun = done > 0 or bool(p.partial_files)  # 0 bytes and no partial file: not begun, so waiting
        if begun and not self._begun:  # the stall clock starts when the download does
            self._last_growth_s, self._begun = now, True
        if (not p.complete and begun and self._last_growth_s is not None
                and now - self._last_growth_s >= self.stall_after_s):
            stalled = self._last_growth_s
        return replace(p, rate_bytes_per_s=rate, eta_s=eta, stalled_since=stalled, problems=tuple(notes))
