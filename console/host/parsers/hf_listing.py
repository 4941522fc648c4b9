"""A model directory on the host in one round-trip, and the files that describe what it should hold.

The listing is one `find -printf` (NUL-separated, so any file name survives) plus `df`, through
the persistent shell: never a `du` per poll. `model.safetensors.index.json` is read separately,
and only when its size or mtime changes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import posixpath
import re
from dataclasses import dataclass

from console.host.parsers import ParseError, split_sections
from console.host.transport.base import operand

INDEX_NAME = "model.safetensors.index.json"


@dataclass(frozen=True, slots=True)
class ListedFile:
    rel_path: str
    kind: str  # "f" file, "d" dir, "l" broken symlink, ...
    size_bytes: int
    mtime_s: float


@dataclass(frozen=True, slots=True)
class DirListing:
    exists: bool
    readable: bool
    files: tuple[ListedFile, ...]
    blobs: tuple[ListedFile, ...]  # cache mode: ../../blobs/*.incomplete of a snapshot dir
    disk_free_bytes: int | None
    disk_size_bytes: int | None
    error: str | None = None


def listing_script(model_dir: str) -> str:
    d = operand(model_dir.rstrip("/") or "/")
    blobs = operand(posixpath.normpath(posixpath.join(model_dir, "..", "..", "blobs")))
    is_snapshot = "/snapshots/" in model_dir and "/models--" in model_dir
    blob_part = (f"echo @@blobs; find {blobs} -maxdepth 1 -name '*.incomplete' -printf '%y %s %T@ %P\\0' "
                 "2>/dev/null; echo; ") if is_snapshot else ""
    return (
        f"if [ ! -e {d} ]; then echo @@missing; exit 0; fi; "
        f"if [ ! -r {d} ] || [ ! -x {d} ]; then echo @@denied; exit 0; fi; "
        "echo @@now; echo ${EPOCHREALTIME:-$(date +%s.%N)}; "
        f"echo @@df; df -P -B1 -- {d} 2>/dev/null; "
        # -L follows the symlinks of a cache-mode snapshot into its blobs (sizes of the targets).
        f"echo @@files; find -L {d} -mindepth 1 -printf '%y %s %T@ %P\\0' 2>/dev/null; echo; "
        f"{blob_part}true"
    )


def _parse_records(blob: str) -> tuple[ListedFile, ...]:
    out: list[ListedFile] = []
    for record in blob.split("\0"):
        record = record.lstrip("\n")
        if not record:
            continue
        parts = record.split(" ", 3)
        if len(parts) != 4:
            continue
        kind, size, mtime, rel = parts
        if not (size.isascii() and size.isdigit()):  # find's %s is digits; "-1" or "1_000" is no size
            continue
        try:
            # The real name (it addresses the file on the host); panes draw it through Rich Text.
            out.append(ListedFile(rel, kind, int(size), float(mtime)))
        except ValueError:
            continue
    return tuple(out)


def parse_listing(text: str) -> DirListing:
    if text.startswith("@@missing"):
        return DirListing(False, False, (), (), None, None, "directory does not exist")
    if text.startswith("@@denied"):
        return DirListing(True, False, (), (), None, None, "permission denied")
    # Split on the markers by hand: file names may contain newlines, so no line-based splitting.
    files_at = text.find("@@files\n")
    if files_at < 0:
        raise ParseError("listing: no @@files section")
    head = split_sections(text[:files_at])
    rest = text[files_at + len("@@files\n"):]
    blobs_at = rest.find("\n@@blobs\n")
    files_blob, blobs_blob = (rest, "") if blobs_at < 0 else (rest[:blobs_at], rest[blobs_at + 9:])
    free = size = None
    df_lines = [ln for ln in head.get("df", "").splitlines() if ln.strip() and not ln.startswith("Filesystem")]
    df = df_lines[-1].split() if df_lines else []
    if len(df) >= 4 and df[1].isdigit() and df[3].isdigit():
        size, free = int(df[1]), int(df[3])
    return DirListing(True, True, _parse_records(files_blob), _parse_records(blobs_blob), free, size)


@dataclass(frozen=True, slots=True)
class SafetensorsIndex:
    total_size_bytes: int | None
    shards: tuple[str, ...]


def parse_index(text: str) -> SafetensorsIndex:
    """`model.safetensors.index.json`: `metadata.total_size` and the shard files of `weight_map`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{INDEX_NAME} is not valid JSON (truncated?): {exc.msg} at char {exc.pos}") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, nesting deeper than Python recurses
        raise ParseError(f"{INDEX_NAME} is not usable JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("weight_map"), dict):
        raise ParseError(f"{INDEX_NAME} has no weight_map")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    total = meta.get("total_size")
    shards = sorted({v for v in data["weight_map"].values() if isinstance(v, str)})
    usable = isinstance(total, (int, float)) and not isinstance(total, bool) and math.isfinite(total) and total >= 0
    return SafetensorsIndex(int(total) if usable else None, tuple(shards))


def short_hash(basename: str) -> str:
    """huggingface_hub's `_short_hash(f"{basename}.metadata")` that names a partial download."""
    return base64.urlsafe_b64encode(hashlib.sha1(f"{basename}.metadata".encode()).digest()).decode()


# <short_hash>.<etag>.incomplete (huggingface_hub <= 1.17) or <short_hash>.<etag>.<8 hex>.incomplete (>= 1.18)
LOCAL_PARTIAL = re.compile(r"^(?P<short>[A-Za-z0-9_=-]{28})\.(?P<etag>[0-9a-f]{40,64})(?:\.[0-9a-f]{8})?\.incomplete$")
BLOB_PARTIAL = re.compile(r"^(?P<etag>[0-9a-f]{40,64})(?:\.[0-9a-f]{8})?\.incomplete$")


# `hf download --local-dir DIR` (huggingface_hub >= 1.22) keeps the commit's whole file listing,
# with sizes and LFS sha256, in DIR/.cache/huggingface/trees/<commit>.json (huggingface_hub's
# `_tree_cache.py`): the truth of what the download holds, with no Hub access.
TREES_DIR = ".cache/huggingface/trees/"


@dataclass(frozen=True, slots=True)
class TreeEntry:
    path: str
    size_bytes: int
    sha256: str | None


def parse_tree_listing(text: str) -> tuple[TreeEntry, ...]:
    """`{"format_version": 1, "files": {path: {"size", "blob_id", "lfs_sha256"?, ...}}}`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"tree listing is not valid JSON (truncated?): {exc.msg} at char {exc.pos}") from None
    if not isinstance(data, dict) or data.get("format_version") != 1 or not isinstance(data.get("files"), dict):
        raise ParseError("tree listing: not format_version 1 with a files object (another huggingface_hub?)")
    out = []
    for path, info in data["files"].items():
        if not isinstance(info, dict) or not isinstance(info.get("size"), int):
            raise ParseError(f"tree listing: {path!r} has no size")
        sha = info.get("lfs_sha256")
        out.append(TreeEntry(str(path), int(info["size"]), sha if isinstance(sha, str) else None))
    return tuple(sorted(out, key=lambda e: e.path))


# A safetensors file starts with an 8-byte little-endian header length N and N bytes of JSON whose
# tensors carry `data_offsets: [begin, end]` into the data that follows; so the finished file is
# 8 + N + max(end) bytes. Read on the host (head/od/grep) for the files that need it, once each.
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit


def header_script(model_dir: str, rel_paths: list[str]) -> str:
    """Prints `N END PATH\\0` per file; `-` when the header is not (yet) all there or not valid."""
    if not rel_paths:
        return ""
    names = " ".join(operand("./" + p) for p in rel_paths)
    return (
        f"( cd -- {operand(model_dir)} 2>/dev/null && for f in {names}; do n=-; e=-; "
        "s=$(stat -L -c %s -- \"$f\" 2>/dev/null || echo 0); "
        "if [ \"$s\" -ge 8 ]; then n=$(head -c 8 -- \"$f\" | od -An -tu8 --endian=little | tr -d ' \\n'); "
        "case \"$n\" in ''|*[!0-9]*) n=-;; esac; "
        f"if [ \"$n\" != - ] && [ \"$n\" -gt 1 ] && [ \"$n\" -lt {MAX_HEADER_BYTES} ] "
        "&& [ \"$s\" -ge $((8 + n)) ]; then e=$(head -c $((8 + n)) -- \"$f\" | tail -c +9 "
        "| grep -aoE '\"data_offsets\" *: *\\[ *[0-9]+ *, *[0-9]+ *\\]' | grep -oE '[0-9]+ *\\]$' | tr -d ' ]' "
        "| sort -n | tail -n 1); fi; fi; printf '%s %s %s\\0' \"$n\" \"${e:--}\" \"${f#./}\"; done ); "
    )


def parse_headers(blob: str) -> dict[str, int | None]:
    """Path -> the file's final size from its header, or None when the header is not usable yet."""
    out: dict[str, int | None] = {}
    for record in blob.split("\0"):
        record = record.lstrip("\n")
        parts = record.split(" ", 2)
        if len(parts) != 3:
            continue
        n, end, path = parts
        out[path] = 8 + int(n) + int(end) if n.isdigit() and end.isdigit() else None
    return out


def changes_script(model_dir: str, since_s: float) -> str:
    """The listing of what changed since `since_s` (host clock, status-change time: a rename counts),
    every partial file, and the count and byte sum of everything, summed on the host: a 100k-file
    directory costs the console a few records per poll instead of 100k. Sections as in
    `listing_script`, plus `@@now` (the host's clock) and records prefixed C (changed) or P (partial),
    then `@@sum COUNT BYTES`."""
    d = operand(model_dir.rstrip("/") or "/")
    blobs = operand(posixpath.normpath(posixpath.join(model_dir, "..", "..", "blobs")))
    is_snapshot = "/snapshots/" in model_dir and "/models--" in model_dir
    blob_part = (f"echo @@blobs; find {blobs} -maxdepth 1 -name '*.incomplete' -printf '%y %s %T@ %P\\0' "
                 "2>/dev/null; echo; ") if is_snapshot else ""
    return (
        f"if [ ! -e {d} ]; then echo @@missing; exit 0; fi; "
        f"if [ ! -r {d} ] || [ ! -x {d} ]; then echo @@denied; exit 0; fi; "
        "echo @@now; echo ${EPOCHREALTIME:-$(date +%s.%N)}; "
        f"echo @@df; df -P -B1 -- {d} 2>/dev/null; "
        f"echo @@files; find -L {d} -mindepth 1 \\( -name '*.incomplete' -printf 'P%y %s %T@ %P\\0' \\) "
        f"-o \\( -newerct @{since_s:.3f} -printf 'C%y %s %T@ %P\\0' \\) -o -printf 'S%s\\0' 2>/dev/null "
        "| awk 'BEGIN { RS = \"\\0\"; ORS = \"\\0\" } /^S/ { n++; s += substr($0, 2); next } "
        "/^C/ { n++; s += $2 } { print } END { print \"@@sum \" n + 0 \" \" sprintf(\"%.0f\", s) }'; echo; "
        f"{blob_part}true"
    )


@dataclass(frozen=True, slots=True)
class DirChanges:
    host_now_s: float | None
    changed: tuple[ListedFile, ...]
    partials: tuple[ListedFile, ...]
    count: int | None  # every entry but the partial files, counted on the host
    total_bytes: int | None
    listing: DirListing  # df, blobs; files = the partial files only


def parse_changes(text: str) -> DirChanges:
    base = parse_listing(text)
    if not base.exists or not base.readable:
        return DirChanges(None, (), (), None, None, base)
    files_at = text.find("@@files\n")
    head = split_sections(text[:files_at])
    try:
        now: float | None = float(head.get("now", "").strip().replace(",", "."))  # bash's EPOCHREALTIME: locale
    except ValueError:
        now = None
    rest = text[files_at + len("@@files\n"):]
    blobs_at = rest.find("\n@@blobs\n")
    records = rest if blobs_at < 0 else rest[:blobs_at]
    changed: list[ListedFile] = []
    partials: list[ListedFile] = []
    count = total = None
    for record in records.split("\0"):
        record = record.lstrip("\n")
        if record.startswith("@@sum "):
            parts = record.split()
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                count, total = int(parts[1]), int(parts[2])
            continue
        if record[:1] not in ("C", "P"):
            continue
        parsed = _parse_records(record[1:])
        (changed if record[0] == "C" else partials).extend(parsed)
    listing = DirListing(True, True, tuple(partials), base.blobs, base.disk_free_bytes, base.disk_size_bytes)
    return DirChanges(now, tuple(changed), tuple(partials), count, total, listing)
