"""The sha256 check says where its reference values came from: the listing hf download kept, or
the Hub (which one), never "the Hub" for values read from the kept listing."""

from __future__ import annotations

import hashlib
from pathlib import Path

from console.domain.analysis.download import ExpectedFile, ExpectedFiles
from console.host.hub import HubAccess
from console.ui.panes.download import format_verify
from console.host.sources.download import DownloadWatcher, VerifyProgress, verifiable_files, verify_reference, verify_sha256
from console.host.transport import LocalTransport

BODY = b"weights" * 100


async def _verify(tmp_path: Path, *, tree: bool, hub: HubAccess | None = None) -> VerifyProgress:
    (tmp_path / "model-00001-of-00001.safetensors").write_bytes(BODY)
    entry = ExpectedFile("model-00001-of-00001.safetensors", len(BODY), hashlib.sha256(BODY).hexdigest())
    t = LocalTransport()
    try:
        watcher = DownloadWatcher(t, str(tmp_path), None, hub=hub)
        await watcher.poll()
        expected = ExpectedFiles("listing" if tree else "hub", (entry,), len(BODY))
        if tree:
            watcher.state.tree_expected = expected
        else:
            watcher.state.hub_expected = expected
        files = verifiable_files(watcher)
        assert len(files) == 1
        states = [s async for s in verify_sha256(t, str(tmp_path), files, reference=verify_reference(watcher))]
    finally:
        await t.close()
    last = states[-1]
    assert last.finished and last.matched == 1 and not last.mismatched
    return last


async def test_values_from_the_kept_listing_are_not_called_the_hubs(tmp_path: Path) -> None:
    done = await _verify(tmp_path, tree=True)
    assert done.reference == "the listing hf download kept"
    shown = format_verify(done, 80).plain
    assert "1/1 files match the listing hf download kept" in shown and "Hub" not in shown


async def test_values_from_the_hub_name_the_hub_they_came_from(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    hub = await _verify(tmp_path / "a", tree=False)
    assert hub.reference == "the Hub" and "1/1 files match the Hub\n" in format_verify(hub, 80).plain
    sim = await _verify(tmp_path / "b", tree=False, hub=HubAccess("http://127.0.0.1:9", "the simulated host's Hub"))
    assert "files match the simulated host's Hub" in format_verify(sim, 80).plain
    mirror = await _verify(tmp_path / "c", tree=False, hub=HubAccess("https://hf-mirror.example.internal"))
    assert mirror.reference == "the Hub at https://hf-mirror.example.internal"


def test_the_gate_and_a_recording_without_a_reference_say_what_is_known() -> None:
    from console.domain.swap.preflight import check_sha

    class State:
        verify = VerifyProgress(2, 10, 2, 10, 2, finished=True, reference="the listing hf download kept")

    assert check_sha(State(), True).reason == "2/2 files match the listing hf download kept"
    State.verify = VerifyProgress(2, 10, 2, 10, 1, ("b: sha256 differs",), finished=True)  # an old recording
    assert check_sha(State(), True).reason == "1 file differs from the expected sha256: b: sha256 differs"
    assert "match the expected sha256" in format_verify(VerifyProgress(1, 1, 1, 1, 1, finished=True), 80).plain
