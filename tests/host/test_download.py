"""The download pane's truth: real listings, the simulated `hf download`, the Hub, bad input."""

from __future__ import annotations

import asyncio
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub._local_folder import _short_hash as hub_short_hash

from console.domain.analysis.download import ExpectedFile, ExpectedFiles, ProgressTracker, summarize
from console.demo.hostsim import HostSimulator
from console.demo.hostsim.downloader import GB, DownloadPlan, LocalDirDownloader
from console.model import Reading
from console.ui.panes.download import format_download
from console.host.parsers import ParseError
from console.host.parsers.hf_listing import listing_script, parse_index, parse_listing, short_hash
from console.host.sources.download import DirectoryProblem, DownloadWatcher
from console.host.transport import LocalTransport
from console.host.transport.ssh import SshTransport
from tests.kit.download import FakeHub, small_plan
from tests.kit.hosts import sim_options


def test_partial_names_use_huggingface_hubs_own_short_hash() -> None:
    for name in ("model-00007-of-00039.safetensors", "tokenizer.json", "weird name ✓.bin"):
        assert short_hash(name) == hub_short_hash(f"{name}.metadata")


def expected_for(plan: DownloadPlan) -> ExpectedFiles:
    from console.host.hub import expected_from_siblings

    return expected_from_siblings(plan.hub_siblings())  # type: ignore[arg-type]


async def listing_of(path: Path) -> object:
    t = LocalTransport()
    try:
        return parse_listing((await t.run(listing_script(str(path)))).text)
    finally:
        await t.close()


@pytest.mark.parametrize("new_naming", [True, False])
async def test_partials_are_matched_to_their_files_in_both_namings(tmp_path: Path, new_naming: bool) -> None:
    plan = small_plan(new_naming=new_naming)
    clock = [1.5]  # 1.5 MB done over 2 lanes: lane 1 has file 1 at 750 kB, lane 2 file 2 at 750 kB
    d = LocalDirDownloader(tmp_path, plan, lambda: clock[0])
    d.prepare()
    d.step()
    listing = await listing_of(tmp_path)
    p = summarize(listing, expected_for(plan), model_dir=str(tmp_path), repo_id="x/y", now_s=0)  # type: ignore[arg-type]
    assert [(f.path, f.bytes, f.expected_bytes, f.matched) for f in p.partial_files] == [
        ("model-00001-of-00004.safetensors", 750_000, 1_000_000, True),
        ("model-00002-of-00004.safetensors", 750_000, 1_000_000, True),
    ]
    assert p.bytes_done == 1_500_000 + sum(len(f.content or b"") for f in plan.files if f.content)
    assert (p.shards_done, p.shards_total, p.complete) == (0, 4, False)


async def test_a_finished_download_is_complete_with_matching_sizes(tmp_path: Path) -> None:
    plan = small_plan()
    d = LocalDirDownloader(tmp_path, plan, lambda: 10.0)
    d.prepare()
    d.step()
    p = summarize(await listing_of(tmp_path), expected_for(plan), model_dir=str(tmp_path), repo_id=None,  # type: ignore[arg-type]
                  now_s=0)
    assert (p.complete, p.shards_done, p.partial_files, p.problems) == (True, 4, (), ())
    assert p.bytes_done == p.bytes_total
    assert "COMPLETE 4/4 shards, sizes match" in format_download(Reading("download", p, 0.0), 60, 12, 0).plain


async def test_wrong_size_and_no_room_are_flagged(tmp_path: Path) -> None:
    plan = small_plan()
    d = LocalDirDownloader(tmp_path, plan, lambda: 10.0)
    d.prepare()
    d.step()
    os.truncate(tmp_path / "model-00003-of-00004.safetensors", 123)
    listing = await listing_of(tmp_path)
    p = summarize(listing, expected_for(plan), model_dir=str(tmp_path), repo_id=None, now_s=0)  # type: ignore[arg-type]
    assert p.complete is False
    assert any("model-00003-of-00004.safetensors: 123 bytes on disk, 1,000,000 expected" in x for x in p.problems)
    from dataclasses import replace

    tight = replace(listing, disk_free_bytes=10)  # type: ignore[type-var]
    p = summarize(tight, expected_for(plan), model_dir=str(tmp_path), repo_id=None, now_s=0)
    assert p.fits_on_disk is False
    assert "WILL NOT FIT" in format_download(Reading("download", p, 0.0), 60, 12, 0).plain


async def test_cache_mode_symlinks_and_blob_partials(tmp_path: Path) -> None:
    """A snapshot dir of the HF cache: files are symlinks into blobs/, partials are blobs/<etag>.incomplete."""
    repo = tmp_path / "models--Qwen--Tiny"
    snap = repo / "snapshots" / "abc123"
    blobs = repo / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    etag1, etag2 = "a" * 64, "b" * 64
    (blobs / etag1).write_bytes(b"x" * 1000)
    (snap / "model-00001-of-00002.safetensors").symlink_to(f"../../blobs/{etag1}")
    (blobs / f"{etag2}.1a2b3c4d.incomplete").write_bytes(b"y" * 400)
    (snap / "dangling.json").symlink_to("../../blobs/missing")
    expected = ExpectedFiles("hub", (ExpectedFile("model-00001-of-00002.safetensors", 1000, etag1),
                                     ExpectedFile("model-00002-of-00002.safetensors", 1000, etag2)), 2000)
    p = summarize(await listing_of(snap), expected, model_dir=str(snap), repo_id=None, now_s=0)  # type: ignore[arg-type]
    assert (p.bytes_done, p.shards_done) == (1400, 1)
    assert [(f.path, f.bytes, f.matched) for f in p.partial_files] == [("model-00002-of-00002.safetensors", 400, True)]
    assert any("broken symlink: dangling.json" in x for x in p.problems)


async def test_names_with_spaces_quotes_and_newlines_are_listed(tmp_path: Path) -> None:
    d = tmp_path / "dir with 'quotes' $(x)"
    d.mkdir()
    (d / "a\nb.safetensors").write_bytes(b"1234")
    listing = await listing_of(d)
    assert [(f.rel_path, f.size_bytes) for f in listing.files] == [("a\nb.safetensors", 4)]  # type: ignore[attr-defined]


def test_rate_eta_stall_and_restart() -> None:
    from console.domain.analysis.download import DownloadProgress

    def progress(t: float, done: int) -> DownloadProgress:
        return DownloadProgress("/m", None, "hub", done, 1000, 0, 4, 0, 4, (), None, None, None, 10**9, True,
                                False, (), t)

    tracker = ProgressTracker(window_s=20, stall_after_s=60)
    tracker.update(progress(0, 0))
    p = tracker.update(progress(10, 100))
    assert p.rate_bytes_per_s == pytest.approx(10.0) and p.eta_s == pytest.approx(90.0)
    assert tracker.update(progress(30, 100)).stalled_since is None
    p = tracker.update(progress(70, 100))
    assert p.stalled_since == 10 and p.rate_bytes_per_s == 0.0 and p.eta_s is None
    assert "STALLED for 1m00s" in format_download(Reading("download", p, 70.0), 60, 12, 70).plain
    p = tracker.update(progress(72, 40))
    assert any("download restarted" in x for x in p.problems) and p.stalled_since is None


def test_truncated_index_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_index('{"metadata": {"total_size": 12}, "weight_map": {"a": "m-0')
    idx = parse_index('{"metadata": {"total_size": 12}, "weight_map": {"a": "m1", "b": "m2", "c": "m1"}}')
    assert (idx.total_size_bytes, idx.shards) == (12, ("m1", "m2"))


class Runs:
    """Counts round-trips through the transport."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.runs = 0
        self.reads = 0

    async def run(self, script: str, *, timeout: float = 10.0) -> object:
        self.runs += 1
        return await self.inner.run(script, timeout=timeout)  # type: ignore[attr-defined]

    async def read_file(self, path: str, **kw: object) -> bytes:
        self.reads += 1
        return await self.inner.read_file(path, **kw)  # type: ignore[attr-defined, no-any-return]


async def test_simulated_download_over_ssh_one_round_trip_per_poll(sim: HostSimulator) -> None:
    model_dir = sim.path("/shared/models/Tiny")
    model_dir.mkdir(parents=True)
    plan = small_plan(rate_bytes_per_s=400_000.0)
    downloader = LocalDirDownloader(model_dir, plan, sim.elapsed_s)
    downloader.prepare()
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    counted = Runs(transport)
    watcher = DownloadWatcher(counted, str(model_dir), None, stall_after_s=60)  # type: ignore[arg-type]
    try:
        seen = []
        for _ in range(14):
            downloader.step()
            seen.append(await watcher.poll())
            await asyncio.sleep(0.25)
        assert counted.runs == 14, "one listing round-trip per poll"
        assert counted.reads == 1, "the index is read once, not every poll"
        assert seen[-1].bytes_done > seen[0].bytes_done
        assert seen[-1].rate_bytes_per_s and seen[-1].rate_bytes_per_s > 0
        assert seen[-1].eta_s is not None and seen[-1].expected_source == "index"
        assert seen[-1].shards_total == 4 and seen[-1].disk_free_bytes
        while not (await watcher.poll()).complete:
            downloader.step()
            await asyncio.sleep(0.2)
    finally:
        await transport.close()


async def test_a_missing_directory_is_a_clear_state(sim: HostSimulator) -> None:
    transport = SshTransport(sim_options(sim))
    await transport.connect()
    try:
        watcher = DownloadWatcher(transport, sim.host_path("/shared/models/nope"), None)
        with pytest.raises(DirectoryProblem, match="does not exist"):
            await watcher.poll()
    finally:
        await transport.close()
    assert parse_listing("@@denied\n").error == "permission denied"


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    FakeHub.siblings = small_plan().hub_siblings()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        yield url
    finally:
        server.shutdown()


def test_hub_file_list_through_huggingface_hub_and_its_cache(fake_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.host.hub import HubError, fetch_expected

    expected = fetch_expected("Qwen/Tiny")
    assert expected.source == "hub" and len(expected.shards) == 4
    assert expected.shards[0].sha256 == f"{1:064x}" and expected.shards[0].size_bytes == 1_000_000
    with pytest.raises(HubError, match="RepositoryNotFound"):
        fetch_expected("Qwen/DoesNotExist")
    # Offline later: the cached answer is used, and says so.
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    again = fetch_expected("Qwen/Tiny", max_age_s=0)
    assert again.files == expected.files and "Hub unreachable" in (again.note or "")


async def test_hub_unreachable_falls_back_to_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("GPUCONSOLE_CACHE_DIR", str(tmp_path / "cache"))
    plan = small_plan()
    model = tmp_path / "m"
    model.mkdir()
    LocalDirDownloader(model, plan, lambda: 1.0).prepare()
    t = LocalTransport()
    try:
        watcher = DownloadWatcher(t, str(model), "Qwen/Tiny", wait_for_hub_s=15)
        p = await watcher.poll()
    finally:
        await t.close()
    assert p.expected_source == "index" and p.bytes_total == 3_999_000
    assert any(x.startswith("Hub: Hub unreachable for Qwen/Tiny") for x in p.problems)


def test_download_json_keys_are_the_documented_ones() -> None:
    from console.domain.analysis.download import DownloadProgress
    from console.cli.snapshot import download_json

    p = DownloadProgress("/m", "r", "hub", 1, 2, 0, 1, 0, 1, (), None, None, None, 5, True, False, (), 0.0)
    keys = set(download_json(Reading("download", p, 0.0)) or {})
    assert keys >= {"model_dir", "repo_id", "bytes_done", "bytes_total", "shards_done", "shards_total",
                    "partial_files", "rate_bytes_per_s", "eta_s", "stalled_since", "disk_free_bytes",
                    "fits_on_disk", "complete", "problems"}


def test_demo_scale_plan_is_the_seeds_download() -> None:
    plan = DownloadPlan()
    shards = [f for f in plan.files if f.path.endswith(".safetensors")]
    assert len(shards) == 39
    assert 245 * GB < sum(f.size for f in shards) < 255 * GB


async def test_sha256_of_finished_files_is_verified_on_the_host(tmp_path: Path) -> None:
    """Real sha256sum on real files: a matching file, a corrupted one, one that vanished."""
    import hashlib

    from console.host.sources.download import verify_sha256

    good, bad = tmp_path / "a.safetensors", tmp_path / "b b.safetensors"
    good.write_bytes(b"weights" * 1000)
    bad.write_bytes(b"flipped" * 1000)
    files = [("a.safetensors", good.stat().st_size, hashlib.sha256(good.read_bytes()).hexdigest()),
             ("b b.safetensors", bad.stat().st_size, hashlib.sha256(b"original" * 1000).hexdigest()),
             ("gone.safetensors", 10, "0" * 64)]
    t = LocalTransport()
    try:
        states = [s async for s in verify_sha256(t, str(tmp_path), files)]
    finally:
        await t.close()
    last = states[-1]
    assert last.finished and (last.done_files, last.matched) == (3, 1)
    assert any("b b.safetensors: sha256 differs" in m for m in last.mismatched)
    assert any("gone.safetensors" in m for m in last.mismatched)
    assert [s.done_files for s in states[1:-1]] == [1, 2, 3], "progress arrives file by file"
    text = format_download(Reading("download", None, 0.0), 60).plain  # no crash without data
    assert text


def test_a_download_nobody_started_is_waiting_never_stalled() -> None:
    # 0 bytes and no partial file for minutes is a download not begun (WAITING), not a stall: the
    # shared operator demo showed "STALLED for 1m39s" at 0 B before anyone pressed download
    from console.domain.analysis.download import DownloadProgress, PartialFile

    def progress(t: float, done: int, partial: tuple = ()) -> DownloadProgress:
        return DownloadProgress("/m", None, "hub", done, 1000, 0, 4, 0, 4, partial, None, None, None, 10**9,
                                True, False, (), t)

    tracker = ProgressTracker(window_s=20, stall_after_s=60)
    for t in (0, 30, 99):
        p = tracker.update(progress(t, 0))
    assert p.stalled_since is None
    assert "WAITING" in format_download(Reading("download", p, 99.0), 60, 12, 99).plain
    # ...but a download begun (a partial file, even at 0 bytes) that stops growing is stalled
    tracker = ProgressTracker(window_s=20, stall_after_s=60)
    begun = (PartialFile("model-00001-of-00004.safetensors", 0, 250, True),)
    for t in (0, 30, 99):
        p = tracker.update(progress(t, 0, begun))
    assert p.stalled_since == 0
    # ...and its stall clock starts when it began, not when the console first looked
    tracker = ProgressTracker(window_s=20, stall_after_s=60)
    for t, partial in ((0, ()), (200, begun), (230, begun)):
        p = tracker.update(progress(t, 0, partial))
    assert p.stalled_since is None
    assert tracker.update(progress(260, 0, begun)).stalled_since == 200
