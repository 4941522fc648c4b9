"""What a PNG drawn by headless Chromium carries: its renderer and the sha256 of the page it was drawn
from (tEXt chunks, which tests/ui/test_layout.py checks against the SVG or HTML beside it), and the
flags every such drawing runs with (nothing leaves the machine). Used by scripts/screenshots.py (the
terminal's SVGs) and the swap demo (its report's HTML)."""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--host-resolver-rules=MAP * ~NOTFOUND")  # nothing leaves the machine


def png_text_chunks(png: bytes, chunks: dict[str, str]) -> bytes:
    """`png` with tEXt chunks added before IEND."""
    end = png.rindex(b"IEND") - 4
    extra = b""
    for key, value in chunks.items():
        data = key.encode("latin-1") + b"\0" + value.encode("latin-1")
        extra += struct.pack(">I", len(data)) + b"tEXt" + data + struct.pack(">I", zlib.crc32(b"tEXt" + data))
    return png[:end] + extra + png[end:]


def png_text(png: bytes) -> dict[str, str]:
    out, at = {}, 8
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[at:at + 8])
        if kind == b"tEXt":
            key, _, value = png[at + 8:at + 8 + length].partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        at += 12 + length
    return out


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def draw_page(page: Path, png: Path, width: int, height: int, *, extra: tuple[str, ...] = (),
              source: Path | None = None) -> bool:
    """`page` (a file) as headless Chromium draws it into `png`, tagged with Chromium's version and the
    sha256 of `source` (the page itself unless it is a copy made for drawing); False when Chromium is
    missing or drew nothing."""
    browser = chromium()
    if browser is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.png"
        subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp}/profile", f"--screenshot={out}",
                        f"--window-size={width},{height}", *extra, page.resolve().as_uri()],
                       check=False, capture_output=True, timeout=120)
        if not out.exists():
            return False
        version = subprocess.run([browser, "--version"], capture_output=True, text=True).stdout.strip()
        png.write_bytes(png_text_chunks(out.read_bytes(), {
            "Software": f"headless {version or 'Chromium'}",
            "Source-SHA256": hashlib.sha256((source or page).read_bytes()).hexdigest()}))
    return True
