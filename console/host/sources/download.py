"""The download source: one listing round-trip per poll; the expected file list from the Hub
(once, on a thread, cached) or from model.safetensors.index.json (re-read only when it changes)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from console.domain.analysis.download import (
    DownloadProgress,
    ExpectedFiles,
    FinalsStats,
    ProgressTracker,
    expected_from_index,
    expected_from_tree,
    finals_stats,
    summarize,
)
from console.host.hub import HubAccess, HubError, fetch_expected
from console.host.parsers import ParseError
from console.host.parsers.hf_listing import (
    INDEX_NAME,
    TREES_DIR,
    DirListing,
    ListedFile,
    changes_script,
    header_script,
    listing_script,
    parse_changes,
    parse_headers,
    parse_index,
    parse_listing,
    parse_tree_listing,
)
from console.host.sources.base import PolledSource, describe_error
from console.host.transport.base import Transport, operand, quote
from console.host.transport.errors import TransportError

HUB_RETRY_S = 600.0
DEFAULT_HUB = HubAccess()  # $HF_ENDPOINT, else huggingface.co
# Below this many entries a whole listing is cheaper for the host than the change-listing pipeline;
# above, a poll brings only what changed (measured: benchmarks/download_poll.py --files 100000).
CHANGES_FROM_ENTRIES = 2000


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
    # relative path -> (size, mtime) of the file as it was when its header was read and was not
    # usable (a sparse or zeroed shard, not safetensors): asked again only once the file changed.
    # A finished shard's header that cannot be read was read again at every poll, a process
    # pipeline per file on the host and ~64 packets to the console every 10 s (issue 36 item 2).
    header_unusable: dict[str, tuple[int, float]] = field(default_factory=dict)
    header_asked: dict[str, tuple[int, float]] = field(default_factory=dict)


def _host_now(text: str) -> float | None:
    at = text.find("@@now\n")
    if at < 0:
        return None
    try:
        return float(text[at + 6:text.index("\n", at + 6)].replace(",", "."))  # EPOCHREALTIME follows the locale
    except ValueError:
        return None


class DownloadWatcher:
    def __init__(self, transport: Transport, model_dir: str, repo_id: str | None, *,
                 stall_after_s: float = 60.0, revision: str = "main", wait_for_hub_s: float = 0.0,
                 hub: HubAccess | None = DEFAULT_HUB) -> None:
        self.transport = transport
        self.model_dir = model_dir
        self.repo_id = repo_id
        # Which Hub to ask for the file list; None: none (a demo without its simulated Hub never
        # asks the real one: console/demo/hostsim/fake_hub.py)
        self.hub = hub
        self.revision = revision
        self.state = DownloadState()
        self.tracker = ProgressTracker(stall_after_s=stall_after_s)
        self._script = listing_script(model_dir)
        # The directory as last seen: every entry but the partial files, kept between polls so that a
        # poll only brings what changed (see `changes_script`).
        self._since: float | None = None  # host clock of the last listing
        self.changes_from_entries = CHANGES_FROM_ENTRIES
        self._entries: dict[str, ListedFile] = {}
        self._entries_bytes = 0
        self._finals: dict[str, ListedFile] = {}
        self._special: dict[str, ListedFile] = {}  # the index, the kept tree listings, broken links
        self._version = 0
        self._headers_version = 0
        self._shards_version = -1
        self._shards: list[str] = []
        self._stats_key: tuple[int, int, int] | None = None
        self._stats: FinalsStats | None = None
        # The app never waits for the Hub (the pane fills in when it answers); a one-shot
        # `snapshot` does, within this bound.
        self.wait_for_hub_s = wait_for_hub_s

    def _hub_expected(self) -> ExpectedFiles | None:
        """Start (or collect) the Hub lookup without ever blocking a poll on it."""
        s = self.state
        if not self.repo_id or self.hub is None:
            return None
        if s.hub_expected is None and s.hub_task is None and time.monotonic() - s.hub_tried_at > HUB_RETRY_S:
            s.hub_tried_at = time.monotonic()
            task = asyncio.ensure_future(asyncio.to_thread(fetch_expected, self.repo_id, self.revision,
                                                           access=self.hub))
            # Collected when it ends, not at the next poll: a watcher dropped meanwhile (the console
            # quit, a host removed) leaves no "Task exception was never retrieved" behind.
            task.add_done_callback(self._hub_done)
            s.hub_task = task
        return s.hub_expected

    def _hub_done(self, task: asyncio.Future[ExpectedFiles]) -> None:
        s = self.state
        if s.hub_task is task:
            s.hub_task = None
        if task.cancelled():
            s.hub_problem = "Hub lookup cancelled"
            return
        exc = task.exception()  # retrieved here, whatever happens to the watcher
        if exc is None:
            s.hub_expected, s.hub_problem = task.result(), None
        else:
            s.hub_problem = str(exc) if isinstance(exc, HubError) else describe_error(exc)

    # -- the directory, incrementally ---------------------------------------------------------
    @property
    def finished_files(self) -> dict[str, int]:
        """Path -> size of the finished files (not under .cache/), from the last poll."""
        return {path: f.size_bytes for path, f in self._finals.items()}

    def _reset_entries(self, files: tuple[ListedFile, ...]) -> None:
        self._entries = {}
        self._finals = {}
        self._special = {}
        self._entries_bytes = 0
        self._apply(files)

    def _apply(self, files: tuple[ListedFile, ...]) -> None:
        """Changed entries (not partial files) into the kept picture of the directory."""
        for f in files:
            rel = f.rel_path
            old = self._entries.get(rel)
            if old is not None:
                self._entries_bytes -= old.size_bytes
            self._entries[rel] = f
            self._entries_bytes += f.size_bytes
            if f.kind == "f" and not rel.startswith(".cache/"):
                self._finals[rel] = f
            else:
                self._finals.pop(rel, None)
            if f.kind == "l" or rel == INDEX_NAME or rel.startswith(TREES_DIR):
                self._special[rel] = f
            else:
                self._special.pop(rel, None)
        if files:
            self._version += 1

    async def _list(self, script_prefix: str) -> tuple[str, DirListing]:
        """One round-trip: the header reads asked for (if any) and the listing, changes only when
        the last poll gave a host time to start from."""
        if self._since is None or len(self._entries) < self.changes_from_entries:
            result = await self.transport.run(script_prefix + self._script, timeout=15)
            text = result.text
            head, _, text = text.partition("@@headers\n") if script_prefix else ("", "", text)
            listing = parse_listing(text)
            if listing.exists and listing.readable:
                self._reset_entries(tuple(f for f in listing.files if not f.rel_path.endswith(".incomplete")))
                self._since = _host_now(text)
                partials = tuple(f for f in listing.files if f.rel_path.endswith(".incomplete"))
                listing = DirListing(True, True, partials + tuple(self._special.values()), listing.blobs,
                                     listing.disk_free_bytes, listing.disk_size_bytes)
            return head, listing
        result = await self.transport.run(script_prefix + changes_script(self.model_dir, self._since - 2.0),
                                          timeout=15)
        text = result.text
        head, _, text = text.partition("@@headers\n") if script_prefix else ("", "", text)
        changes = parse_changes(text)
        if not changes.listing.exists or not changes.listing.readable:
            self._since = None
            return head, changes.listing
        self._apply(changes.changed)
        if changes.count is None:  # no awk on the host: whole listings from now on
            self.changes_from_entries = sys.maxsize
        if changes.count != len(self._entries) or changes.total_bytes != self._entries_bytes:
            # something went away (or the host's awk is missing): list everything once more
            self._since = None
            return head, (await self._list(""))[1]
        self._since = changes.host_now_s
        listing = DirListing(True, True, changes.partials + tuple(self._special.values()), changes.listing.blobs,
                             changes.listing.disk_free_bytes, changes.listing.disk_size_bytes)
        return head, listing

    async def poll(self) -> DownloadProgress:
        s = self.state
        asked = s.header_pending[:64]
        # the headers of files seen last poll ride along: still one round-trip per poll
        prefix = header_script(self.model_dir, asked) + "echo @@headers; " if asked else ""
        head, listing = await self._list(prefix)
        for path, size in parse_headers(head).items():
            if size is None:
                asked_as = s.header_asked.get(path)
                if asked_as is not None:
                    s.header_unusable[path] = asked_as
            elif s.header_sizes.get(path) != size:
                s.header_sizes[path] = size
                s.header_unusable.pop(path, None)
                self._headers_version += 1
        if not listing.exists:
            raise DirectoryProblem(f"{self.model_dir} does not exist (yet)")
        if not listing.readable:
            raise DirectoryProblem(f"{self.model_dir}: permission denied")
        self._note_headers(listing)
        await self._read_tree_listing(self._special.values())
        index = self._special.get(INDEX_NAME)
        if index is not None and index.kind == "f" and (index.size_bytes, index.mtime_s) != s.index_key:
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
        key = (self._version, id(expected), self._headers_version)
        if key != self._stats_key:  # the finished files' part changes only when one of them does
            self._stats_key, self._stats = key, finals_stats(self._finals, expected, s.header_sizes)
        progress = summarize(listing, expected, model_dir=self.model_dir, repo_id=self.repo_id,
                             now_s=time.time(), problems=notes, header_sizes=s.header_sizes,
                             finals=self._finals, stats=self._stats)
        return self.tracker.update(progress)

    def _note_headers(self, listing: DirListing) -> None:
        """Which safetensors files (finished or partial) still need their header read."""
        s = self.state
        if self._version != self._shards_version:
            self._shards_version = self._version
            self._shards = [p for p, f in self._finals.items() if p.endswith(".safetensors") and f.size_bytes >= 8]
        partials = [f.rel_path for f in listing.files if f.kind == "f" and f.size_bytes >= 8
                    and f.rel_path.startswith(".cache/huggingface/download/") and f.rel_path.endswith(".incomplete")]
        present = set(self._shards) | set(partials)
        gone = [p for p in s.header_sizes if p not in present]
        for path in gone:  # renamed or deleted: forget
            del s.header_sizes[path]
        if gone:
            self._headers_version += 1
        for path in [p for p in s.header_unusable if p not in present]:
            del s.header_unusable[path]
        # Each file as it is now (size, mtime): a header found unusable is read again only when
        # the file changed since (a partial file grows; a finished one is rewritten).
        keys = {p: (f.size_bytes, f.mtime_s) for p, f in self._finals.items()}
        keys.update((f.rel_path, (f.size_bytes, f.mtime_s)) for f in listing.files if f.rel_path in partials)
        s.header_pending = [p for p in self._shards + partials
                            if s.header_sizes.get(p) is None and s.header_unusable.get(p) != keys.get(p)]
        s.header_asked = {p: keys[p] for p in s.header_pending[:64] if p in keys}

    async def _read_tree_listing(self, special: Any) -> None:
        s = self.state
        trees = [f for f in special if f.kind == "f" and f.rel_path.startswith(TREES_DIR)
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
    """sha256 of the finished LFS files, computed on the host, against the expected values."""

    total_files: int
    total_bytes: int
    done_files: int = 0
    done_bytes: int = 0
    matched: int = 0
    mismatched: tuple[str, ...] = ()
    current: str | None = None
    finished: bool = False
    error: str | None = None
    # where the expected sha256 values came from ("the listing hf download kept", "the Hub"); None:
    # not said (a recording made before this field)
    reference: str | None = None

    def reference_text(self) -> str:
        return self.reference or "the expected sha256"


async def verify_sha256(transport: Transport, model_dir: str, files: list[tuple[str, int, str]],
                        reference: str | None = None) -> AsyncIterator[VerifyProgress]:
    """`files`: (relative path, size, expected sha256), the values from `reference` (see
    `verify_reference`). One stream, one file at a time, so each result arrives as soon as its
    file is hashed; never raises."""
    total_bytes = sum(size for _, size, _ in files)
    state = VerifyProgress(len(files), total_bytes, current=files[0][0] if files else None, reference=reference)
    yield state
    if not files:
        yield replace(state, finished=True)
        return
    expected = {path: (size, sha) for path, size, sha in files}
    names = " ".join(quote(p) for p, _, _ in files)
    script = f"cd -- {operand(model_dir)} && for f in {names}; do sha256sum -- \"$f\" || echo \"ERROR $f\"; done"
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


def verify_reference(watcher: DownloadWatcher) -> str | None:
    """Where `verifiable_files` takes its sha256 values from, as the pane says it."""
    s = watcher.state
    if s.tree_expected is not None:
        return "the listing hf download kept"
    if s.hub_expected is not None:
        hub = watcher.hub
        if hub is not None and hub.label:
            return hub.label
        return f"the Hub at {hub.endpoint}" if hub is not None and hub.endpoint else "the Hub"
    return None


def verifiable_files(watcher: DownloadWatcher) -> list[tuple[str, int, str]]:
    """The finished LFS files whose sha256 we know: from the listing hf download keeps, or the Hub."""
    expected = watcher.state.tree_expected or watcher.state.hub_expected
    if expected is None:
        return []
    done = watcher.finished_files
    return [(f.path, f.size_bytes or 0, f.sha256) for f in expected.files
            if f.sha256 and f.path in done and (f.size_bytes is None or done[f.path] == f.size_bytes)]
