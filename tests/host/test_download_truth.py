"""Download truth without the Hub: the listing `hf download --local-dir` keeps, the index, and each
file's own safetensors header; rate and ETA end with the download."""

from __future__ import annotations

from pathlib import Path

from console.domain.analysis.download import DownloadProgress, ProgressTracker
from console.ui.panes.download import verdict
from console.host.sources.download import DownloadWatcher
from console.host.transport import LocalTransport
from tests.kit.download import model_dir, poll, write_safetensors

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_tree_listing(model: Path, sizes: dict[str, int]) -> None:
    """What `hf download --local-dir` (huggingface_hub >= 1.22) keeps, written by huggingface_hub itself."""
    from huggingface_hub._tree_cache import TreeCacheEntry, tree_cache_folder_for_local_dir, write_tree_cache

    entries = {name: TreeCacheEntry(size=size, blob_id="0" * 40, lfs_sha256=("ab" * 32) if name.endswith(
        ".safetensors") else None, lfs_size=size if name.endswith(".safetensors") else None)
               for name, size in sizes.items()}
    write_tree_cache(tree_cache_folder_for_local_dir(str(model)), COMMIT, entries)


async def test_the_kept_listing_catches_a_shard_one_byte_short(tmp_path: Path) -> None:
    model, sizes = model_dir(tmp_path)
    write_tree_listing(model, sizes)
    good = await poll(model)
    assert good.complete and good.expected_source == "listing" and good.files_total == len(sizes)
    assert verdict(good, 0)[0].startswith("COMPLETE 2/2 shards, sizes match")
    shard = model / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-1])
    bad = await poll(model)
    assert not bad.complete and verdict(bad, 0)[0] == "WRONG SIZES"
    assert any("model-00002-of-00002.safetensors" in x and "truncated" in x for x in bad.problems), bad.problems


async def test_without_listing_or_hub_the_safetensors_header_names_a_truncated_or_corrupt_shard(
        tmp_path: Path) -> None:
    model, sizes = model_dir(tmp_path)  # the index only: it gives no per-file size
    good = await poll(model)
    assert good.complete and good.expected_source == "index"
    one, two = model / "model-00001-of-00002.safetensors", model / "model-00002-of-00002.safetensors"
    one.write_bytes(one.read_bytes()[:-1])
    two.write_bytes(two.read_bytes() + b"\0")
    bad = await poll(model)
    assert not bad.complete and verdict(bad, 0)[0] == "WRONG SIZES"
    assert any(one.name in x and "truncated" in x for x in bad.problems), bad.problems
    assert any(two.name in x and "corrupt" in x for x in bad.problems), bad.problems


async def test_a_partial_file_knows_its_final_size_from_its_header(tmp_path: Path) -> None:
    from console.host.parsers.hf_listing import short_hash

    model, sizes = model_dir(tmp_path)
    shard = model / "model-00002-of-00002.safetensors"
    full = shard.read_bytes()
    shard.unlink()
    partial_dir = model / ".cache" / "huggingface" / "download"
    partial_dir.mkdir(parents=True)
    # huggingface_hub's naming for a file in flight; the etag is not known to anyone here
    (partial_dir / f"{short_hash('model-00002-of-00002.safetensors')}.{'cd' * 32}.1a2b3c4d.incomplete").write_bytes(
        full[: len(full) // 2])
    p = await poll(model)
    [part] = p.partial_files
    assert part.expected_bytes == len(full) and part.path == "model-00002-of-00002.safetensors"
    assert not p.complete


def test_rate_and_eta_end_with_the_download() -> None:
    tracker = ProgressTracker()
    base = dict(model_dir="/m", repo_id=None, expected_source="listing", bytes_total=100, shards_done=0,
                shards_total=1, files_done=0, files_total=1, partial_files=(), rate_bytes_per_s=None, eta_s=None,
                stalled_since=None, disk_free_bytes=None, fits_on_disk=None, problems=())
    tracker.update(DownloadProgress(bytes_done=10, complete=False, sampled_at_s=0.0, **base))  # type: ignore[arg-type]
    moving = tracker.update(DownloadProgress(bytes_done=60, complete=False, sampled_at_s=1.0, **base))  # type: ignore[arg-type]
    assert moving.rate_bytes_per_s == 50 and moving.eta_s == 0.8
    done = tracker.update(DownloadProgress(bytes_done=100, complete=True, sampled_at_s=2.0, **base))  # type: ignore[arg-type]
    assert done.rate_bytes_per_s is None and done.eta_s is None


async def test_a_poll_that_brings_only_changes_tells_the_same_truth_as_a_full_listing(
        tmp_path: Path) -> None:
    """Issue 16: a 100k-file directory polled by changes (host-side sums); the picture must equal a
    whole listing's at every step, through partial files, renames, a deletion and a file moved in."""
    from console.demo.hostsim.downloader import LocalDirDownloader
    from tests.kit.download import small_plan

    model = tmp_path / "m"
    model.mkdir()
    plan = small_plan(rate_bytes_per_s=300_000.0)
    clock = [0.0]
    downloader = LocalDirDownloader(model, plan, lambda: clock[0])
    downloader.prepare()
    transport = LocalTransport()
    incremental = DownloadWatcher(transport, str(model), None)
    incremental.changes_from_entries = 0  # as for a 100k-file directory
    whole_transport = LocalTransport()
    whole = DownloadWatcher(whole_transport, str(model), None)  # a small dir: whole listings
    runs = []
    real_run = transport.run

    async def counting_run(script: str, **kw):  # type: ignore[no-untyped-def]
        runs.append("find" in script and "-newerct" in script)
        return await real_run(script, **kw)

    transport.run = counting_run  # type: ignore[method-assign]

    def picture(p: DownloadProgress) -> tuple[object, ...]:
        return (p.bytes_done, p.files_done, p.shards_done, p.complete, p.problems,
                tuple((x.path, x.bytes, x.expected_bytes) for x in p.partial_files))

    try:
        await incremental.poll()
        await whole.poll()
        for step in range(16):
            clock[0] = step * 1.0
            downloader.step()
            if step == 10:
                (model / "config.json").unlink()  # a deletion: counted on the host, caught
            if step == 12:
                old = tmp_path / "moved-in.bin"
                old.write_bytes(b"x" * 10)
                import os
                os.utime(old, (1, 1))
                old.rename(model / "moved-in.bin")  # an old file moved in: its ctime is new
            mine = await incremental.poll()
            assert picture(mine) == picture(await whole.poll()), step
        assert any(runs), "the change listing was used"
        assert "config.json" not in incremental.finished_files and "moved-in.bin" in incremental.finished_files
        assert incremental.finished_files == whole.finished_files
    finally:
        await transport.close()
        await whole_transport.close()


def test_the_host_clock_in_a_comma_locale_and_a_host_without_awk() -> None:
    """bash's EPOCHREALTIME follows LC_NUMERIC ("1796051657,63"); a host without awk gives no sums:
    the watcher falls back to whole listings instead of re-listing twice per poll."""
    from console.host.parsers.hf_listing import parse_changes
    from console.host.sources.download import _host_now

    text = "@@now\n1796051657,630213\n@@df\n@@files\n\n"
    assert _host_now(text) == 1796051657.630213
    changes = parse_changes(text)
    assert changes.host_now_s == 1796051657.630213 and changes.count is None


# -- a shard's own header decides its size when nothing else does ---------------------------------
async def test_without_index_or_listing_a_truncated_or_padded_shard_is_named_from_its_own_header(
        tmp_path: Path) -> None:
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
    assert not long.complete


def test_a_shard_one_byte_short_or_long_of_its_header_is_named_and_the_exact_size_passes() -> None:
    from types import SimpleNamespace

    from console.domain.analysis.download import header_problems

    finals = {"a.safetensors": SimpleNamespace(size_bytes=99), "b.safetensors": SimpleNamespace(size_bytes=101),
              "c.safetensors": SimpleNamespace(size_bytes=100), "d.safetensors": SimpleNamespace(size_bytes=5)}
    headers: dict[str, int | None] = {"a.safetensors": 100, "b.safetensors": 100, "c.safetensors": 100,
                                      "d.safetensors": None}
    problems = header_problems(finals, headers)
    assert problems == ["a.safetensors is truncated: 99 bytes on disk, its safetensors header says 100",
                        "b.safetensors is corrupt (longer than its header says): 101 bytes on disk, "
                        "its safetensors header says 100"]


async def test_a_truncated_safetensors_file_outside_the_index_keeps_the_download_incomplete(tmp_path: Path) -> None:
    model, _ = model_dir(tmp_path)
    good = await poll(model)
    assert good.complete and good.expected_source == "index"
    stray = model / "extra.safetensors"  # not in the index's weight map (a leftover, a second format)
    write_safetensors(stray, {"x": 2048})
    stray.write_bytes(stray.read_bytes()[:-10])
    bad = await poll(model)
    assert any("extra.safetensors" in x and "truncated" in x for x in bad.problems), bad.problems
    assert not bad.complete


def test_a_listing_line_with_a_negative_or_odd_size_is_no_file_so_no_negative_bytes_are_shown() -> None:
    """Found by the fuzz test's property (bytes done >= 0): `f -1 100 a` counted -1 bytes done."""
    from console.domain.analysis.download import summarize
    from console.host.parsers.hf_listing import parse_listing

    listing = parse_listing("@@df\n\n@@files\nf -1 100 a.safetensors\0f 1_000 100 b.safetensors\0"
                            "f 7 100 c.safetensors\0\n@@blobs\n")
    assert [(f.rel_path, f.size_bytes) for f in listing.files] == [("c.safetensors", 7)]
    assert summarize(listing, None, model_dir="/m", repo_id=None, now_s=0.0).bytes_done == 7
