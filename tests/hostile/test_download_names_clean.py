"""A listing's file names are the host's: an escape sequence in one must not reach the terminal
through the download pane (issue 21, item 1). The reading keeps the raw name (it addresses the
real file); only what is drawn is cleaned."""

from __future__ import annotations

from console.domain.analysis.download import DownloadProgress, PartialFile
from console.model import Reading
from console.ui.panes.download import format_download

EVIL = "model-\x1b]52;c;cHduZWQ=\x07-00001\x1b[31m.safetensors"


def test_escape_sequences_in_file_names_are_not_drawn():
    progress = DownloadProgress("/shared/m", None, "listing", 10, 100, 0, 2, 0, 2,
                                (PartialFile(EVIL, 10, 50, True),), None, None, None, 10**12, True, False,
                                (f"wrong size: {EVIL}",), 0.0)
    text = format_download(Reading("download", progress, 0.0), width=100, height=20).plain
    assert "\x1b" not in text and "\x07" not in text
    assert "model-" in text and "-00001" in text  # the name is still there, cleaned
    assert progress.partial_files[0].path == EVIL  # the data keeps the real name
