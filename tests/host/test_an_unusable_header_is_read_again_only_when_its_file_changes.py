"""A finished shard whose safetensors header cannot be read (a sparse or zeroed file, or not
safetensors at all) was read again at every poll: a pipeline of processes per file on the host
(stat, head, od, grep, sort...) and ~64 packets to the console every 10 s on a quiet host
(issue 36 item 2, the quiet host's download poll). Its header is now asked again only once the
file changed; a usable header is still read, and a file that changes is asked again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from console.host.sources.download import DownloadWatcher
from console.host.transport import LocalTransport
from tests.kit.download import model_dir, write_safetensors


class CountingTransport(LocalTransport):
    """The local transport, counting the scripts that read safetensors headers."""

    def __init__(self) -> None:
        super().__init__()
        self.header_reads: list[str] = []

    async def run(self, script: str, *, timeout: float = 10.0) -> Any:
        if "data_offsets" in script:  # the header script (hf_listing.header_script)
            self.header_reads.append(script)
        return await super().run(script, timeout=timeout)


async def test_an_unusable_header_is_read_once_until_its_file_changes(tmp_path: Path) -> None:
    model, _sizes = model_dir(tmp_path)
    zeroed = model / "model-00002-of-00002.safetensors"
    with open(zeroed, "r+b") as fh:  # its size kept, its header gone: n = 0
        fh.write(b"\0" * 16)
    transport = CountingTransport()
    try:
        watcher = DownloadWatcher(transport, str(model), None)
        for _ in range(5):
            await watcher.poll()
        # The first poll lists, the second reads both headers; after it, neither is asked again:
        # the good one is known, the zeroed one did not change.
        assert len(transport.header_reads) == 1, len(transport.header_reads)
        assert watcher.state.header_sizes["model-00001-of-00002.safetensors"] is not None
        assert watcher.state.header_sizes.get(zeroed.name) is None  # still unknown, never made up
        assert watcher.state.header_pending == []

        # The file is rewritten (a real shard now): asked again, and its size read from it.
        size = write_safetensors(zeroed, {"layer2.a": 4096, "layer2.b": 1002})
        stat = zeroed.stat()
        os.utime(zeroed, (stat.st_atime, stat.st_mtime + 5))  # a new mtime, whatever the clock's grain
        for _ in range(3):
            await watcher.poll()
        assert len(transport.header_reads) == 2, len(transport.header_reads)
        assert transport.header_reads[-1].count("safetensors") >= 1 and zeroed.name in transport.header_reads[-1]
        assert watcher.state.header_sizes[zeroed.name] == size
    finally:
        await transport.close()
