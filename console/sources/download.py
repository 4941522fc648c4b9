"""The download source: one listing round-trip per poll; the expected file list from the Hub
(once, on a thread, cached) or from model.safetensors.index.json (re-read only when it changes)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from console.analysis.download import (
    DownloadProgress,
    ExpectedFiles,
    ProgressTracker,
    expected_from_index,
    expected_from_tree,
    summarize,
)
from console.parsers import ParseError
from console.parsers.hf_listing import (
    INDEX_NAME,
    TREES_DIR,
    header_script,
    listing_script,
    parse_headers,
    parse_index,
    parse_listing,
    parse_tree_listing,
)
from console.sources.base import PolledSource, describe_error
from console.transport.base import Transport, quote
from console.transport.errors import TransportError

HUB_RETRY_S = 600.0


class DirectoryProblem(Exception):
    """The model directory cannot be read (missing, permission denied): a state, shown plainly."""


@dataclass
class DownloadState:
    index_key: tuple[int, float] | None = None
    index_expected: ExpectedFiles | None = None
    index_problem: str | None = None
    hub_expected: ExpectedFiles | None = None
    hub_problem: str | None = None
    hub_tried_at: float = -1e9
    hub_task: asyncio.Task[ExpectedFiles] | None = field(default=None, repr=False)
    tree_key: tuple[str, int, float] | None = None
    tree_expected: ExpectedFiles | None = None
    tree_problem: str | None = None
    # relative path -> final size from its safetensors header (None: not readable yet); read once each
    header_sizes: dict[str, int | None] = field(default_factory=dict)
    header_pending: list[str] = field(default_factory=list)


class DownloadWatcher:
    def __init__(self, transport: Transport, model_dir: str, repo_id: str | None, *,
                 stall_after_s: float = 60.0, revision: str = "main", wait_for_hub_s: float = 0.0) -> None:
        self.transport = transport
        self.model_dir = model_dir
        self.repo_id = repo_id
        self.revision = revision
        self.state = DownloadState()
        self.tracker = ProgressTracker(stall_after_s=stall_after_s)
        self._script = listing_script(model_dir)
        self.finished_files: dict[str, int] = {}  # path -> size, from the last listing
        # The app never waits for the Hub (the pane fills in when it answers); a one-shot
        # `snapshot` does, within this bound.
        self.wait_for_hub_s = wait_for_hub_s

    def _hub_expected(self) -> ExpectedFiles | None:
        """Start (or collect) the Hub lookup without ever blocking a poll on it."""
        s = self.state
        if not self.repo_id:
            return None
        task = s.hub_task
        if task is not None and task.done():
            s.hub_task = None
            exc = task.exception()
            if exc is None:
                s.hub_expected, s.hub_problem = task.result(), None
            else:
                from console.hub import HubError

                s.hub_problem = str(exc) if isinstance(exc, HubError) else describe_error(exc)
        if s.hub_expected is None and s.hub_task is None and time.monotonic() - s.hub_tried_at > HUB_RETRY_S:
            from console.hub import fetch_expected

            s.hub_tried_at = time.monotonic()
            s.hub_task = asyncio.ensure_future(asyncio.to_thread(fetch_expected, self.repo_id, self.revision))
        return s.hub_expected

    async def poll(self) -> DownloadProgress:
        s = self.state
        asked = s.header_pending[:64]
        script = self._script
        if asked:  # the headers of files seen last poll ride along: still one round-trip per poll
            script = header_script(self.model_dir, asked) + "echo @@headers; " + script
        result = await self.transport.run(script, timeout=15)
        text = result.text
        if asked:
            head, sep, text = text.partition("@@headers\n")
            for path, size in parse_headers(head).items():
                if size is not None:
                    s.header_sizes[path] = size
        listing = parse_listing(text)
        if not listing.exists:
            raise DirectoryProblem(f"{self.model_dir} does not exist (yet)")
        if not listing.readable:
            raise DirectoryProblem(f"{self.model_dir}: permission denied")
        self.finished_files = {f.rel_path: f.size_bytes for f in listing.files
                               if f.kind == "f" and not f.rel_path.startswith(".cache/")}
        self._note_headers(listing)
        await self._read_tree_listing(listing)
        index = next((f for f in listing.files if f.rel_path == INDEX_NAME and f.kind == "f"), None)
        if index is not None and (index.size_bytes, index.mtime_s) != s.index_key:
            s.index_key = (index.size_bytes, index.mtime_s)
            try:
                raw = await self.transport.read_file(f"{self.model_dir.rstrip('/')}/{INDEX_NAME}",
                                                     max_bytes=64 << 20, timeout=15)
                index_data = parse_index(raw.decode("utf-8", "replace"))
                s.index_expected, s.index_problem = expected_from_index(index_data), None
            except (ParseError, OSError, TransportError) as exc:
                s.index_expected, s.index_problem = None, describe_error(exc)
        hub = self._hub_expected()
        if hub is None and s.hub_task is not None and self.wait_for_hub_s > 0:
            await asyncio.wait({s.hub_task}, timeout=self.wait_for_hub_s)
            hub = self._hub_expected()
        expected = s.tree_expected or hub or s.index_expected
        notes = tuple(p for p in (
            f"Hub: {s.hub_problem}" if s.hub_problem and hub is None and s.tree_expected is None else None,
            s.index_problem, s.tree_problem,
        ) if p)
        progress = summarize(listing, expected, model_dir=self.model_dir, repo_id=self.repo_id,
                             now_s=time.time(), problems=notes, header_sizes=s.header_sizes)
        return self.tracker.update(progress)

    def _note_headers(self, listing: Any) -> None:
        """Which safetensors files (finished or partial) still need their header read."""
        s = self.state
        present = set()
        pending = []
        for f in listing.files:
            if f.kind != "f" or f.size_bytes < 8:
                continue
            rel = f.rel_path
            if rel.endswith(".safetensors") and not rel.startswith(".cache/") or (
                    rel.startswith(".cache/huggingface/download/") and rel.endswith(".incomplete")):
                present.add(rel)
                if s.header_sizes.get(rel) is None:
                    pending.append(rel)
        for gone in [p for p in s.header_sizes if p not in present]:  # renamed or deleted: forget
            del s.header_sizes[gone]
        s.header_pending = pending

    async def _read_tree_listing(self, listing: Any) -> None:
        s = self.state
        trees = [f for f in listing.files if f.kind == "f" and f.rel_path.startswith(TREES_DIR)
                 and f.rel_path.endswith(".json") and "/" not in f.rel_path[len(TREES_DIR):]]
        if not trees:
            s.tree_key, s.tree_expected, s.tree_problem = None, None, None
            return
        newest = max(trees, key=lambda f: f.mtime_s)  # the commit downloaded last
        key = (newest.rel_path, newest.size_bytes, newest.mtime_s)
        if key == s.tree_key:
            return
        s.tree_key = key
        try:
            raw = await self.transport.read_file(f"{self.model_dir.rstrip('/')}/{newest.rel_path}",
                                                 max_bytes=256 << 20, timeout=15)
            s.tree_expected = expected_from_tree(parse_tree_listing(raw.decode("utf-8", "replace")))
            s.tree_problem = None
        except (ParseError, OSError, TransportError) as exc:
            s.tree_expected, s.tree_problem = None, f"{newest.rel_path}: {describe_error(exc)}"


def download_source(watcher: DownloadWatcher, interval_s: float = 2.0) -> PolledSource[DownloadProgress]:
    async def poll() -> DownloadProgress:
        progress = await watcher.poll()
        # A finished download changes rarely (a file removed, the disk filling): look every 10 s.
        source.interval_s = 10.0 if progress.complete else interval_s
        return progress

    source: PolledSource[DownloadProgress] = PolledSource("download", poll, interval_s, max_backoff_s=10.0)
    return source


@dataclass(frozen=True, slots=True)
class VerifyProgress:
    """sha256 of the finished LFS files, computed on the host, against the Hub's values."""

    total_files: int
    total_bytes: int
    done_files: int = 0
    done_bytes: int = 0
    matched: int = 0
    mismatched: tuple[str, ...] = ()
    current: str | None = None
    finished: bool = False
    error: str | None = None


async def verify_sha256(transport: Transport, model_dir: str, files: list[tuple[str, int, str]]
                        ) -> AsyncIterator[VerifyProgress]:
    """`files`: (relative path, size, expected sha256). One stream, one file at a time, so each
    result arrives as soon as its file is hashed; never raises."""
    total_bytes = sum(size for _, size, _ in files)
    state = VerifyProgress(len(files), total_bytes, current=files[0][0] if files else None)
    yield state
    if not files:
        yield replace(state, finished=True)
        return
    expected = {path: (size, sha) for path, size, sha in files}
    names = " ".join(quote(p) for p, _, _ in files)
    script = f"cd {quote(model_dir)} && for f in {names}; do sha256sum -- \"$f\" || echo \"ERROR $f\"; done"
    try:
        stream = await transport.stream(script)
    except Exception as exc:  # noqa: BLE001 - a source never raises
        yield replace(state, finished=True, error=describe_error(exc))
        return
    order = [p for p, _, _ in files]
    try:
        async for raw in stream:
            line = raw.decode("utf-8", "replace")
            digest, _, name = line.partition("  ")
            name = name.lstrip("*")
            if digest == "ERROR" or name not in expected:
                name = line.split(" ", 1)[-1]
                bad = state.mismatched + (f"{name}: could not be read",)
                state = replace(state, mismatched=bad)
            else:
                size, sha = expected[name]
                ok = digest.lower() == sha.lower()
                state = replace(state, matched=state.matched + ok,
                                mismatched=state.mismatched if ok else state.mismatched + (f"{name}: sha256 differs",))
            done = state.done_files + 1
            state = replace(state, done_files=done, done_bytes=state.done_bytes + expected.get(name, (0, ""))[0],
                            current=order[done] if done < len(order) else None)
            yield state
    finally:
        await stream.close()
    error = None if state.done_files == len(files) else (stream.stderr_tail or "verification stopped early")
    yield replace(state, finished=True, error=error)


def verifiable_files(watcher: DownloadWatcher) -> list[tuple[str, int, str]]:
    """The finished LFS files whose sha256 we know: from the listing hf download keeps, or the Hub."""
    expected = watcher.state.tree_expected or watcher.state.hub_expected
    if expected is None:
        return []
    done = watcher.finished_files
    return [(f.path, f.size_bytes or 0, f.sha256) for f in expected.files
            if f.sha256 and f.path in done and (f.size_bytes is None or done[f.path] == f.size_bytes)]
