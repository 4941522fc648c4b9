"""The Hub's file list for a repo (exact sizes and LFS sha256), fetched once, cached on disk.

The request is HfApi.model_info(files_metadata=True)'s, made by a bounded client of our own
(`fetch_model_info`: a total deadline, a body cap, no redirect to another host): call
`fetch_expected` through `asyncio.to_thread`. Offline, a cached answer is used; with none, the
caller falls back to the index file and says why.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from console import __version__
from console.config import endpoint_problem
from console.domain.analysis.download import ExpectedFile, ExpectedFiles
from console.locations import cache_home
from console.sanitize import clean_line


class HubError(Exception):
    """The Hub could not answer (offline, unknown repo, gated); the message is one line."""


@dataclass(frozen=True, slots=True)
class HubAccess:
    """Which Hub to ask and how. The demo's is the simulated host's own, on loopback
    (console/demo/hostsim/fake_hub.py): it gets no token and its answers stay out of the user's cache."""

    endpoint: str | None = None  # None: $HF_ENDPOINT, else huggingface.co
    label: str | None = None  # how the pane names it ("the simulated host's Hub"); None: "Hub" or the endpoint
    send_token: bool = True  # False: huggingface_hub sends no token (the operator's never reaches a simulator)
    use_cache: bool = True  # False: nothing read from or written to the on-disk cache

    def name(self) -> str:
        if self.label:
            return self.label
        return f"Hub {self.endpoint}" if self.endpoint else "Hub"


def cache_dir() -> Path:
    return cache_home() / "hub"


def _cache_path(repo_id: str, revision: str, endpoint: str | None = None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]", "--", f"{repo_id}@{revision}")
    if endpoint:  # a mirror's answer is kept apart from the Hub's
        safe += "@" + hashlib.sha256(endpoint.encode()).hexdigest()[:12]
    return cache_dir() / f"{safe}.json"


def expected_from_siblings(siblings: list[dict[str, Any]], note: str | None = None) -> ExpectedFiles:
    files = []
    for s in siblings:
        name = s.get("rfilename")
        if not isinstance(name, str):
            continue
        lfs = s.get("lfs") if isinstance(s.get("lfs"), dict) else {}
        size = lfs.get("size", s.get("size"))
        sha = lfs.get("sha256")
        files.append(ExpectedFile(name, size if isinstance(size, int) and not isinstance(size, bool) and size >= 0
                                  else None, sha if isinstance(sha, str) else None))
    total = sum(f.size_bytes for f in files) if all(f.size_bytes is not None for f in files) else None
    return ExpectedFiles("hub", tuple(sorted(files, key=lambda f: f.path)), total, note)


def _read_cache(path: Path) -> dict[str, Any] | None:
    """The cached answer, or None when there is none or it is corrupt (then the next fetch rewrites it)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # missing, binary, truncated, huge ints, deep nesting
        return None
    if not isinstance(data, dict) or not isinstance(data.get("siblings"), list):
        return None
    fetched = data.get("fetched_at")
    if not isinstance(fetched, (int, float)) or isinstance(fetched, bool) or not math.isfinite(fetched):
        return None
    if not all(isinstance(s, dict) for s in data["siblings"]):
        return None
    return data


# A 1,000-shard repo's file list with blobs is about 300 KB: 16 MiB is generous, and bounds what a
# hostile or broken Hub can make the console hold (issue 34, item 16: a 100 MB answer cost +141–206 MB).
MAX_BODY_BYTES = 16 << 20
MAX_REDIRECTS = 3
HUB = "https://huggingface.co"
_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")


class _NotFound(HubError):
    """The Hub says the repo, the revision or the access is not there (no cache fallback)."""


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port


async def _get_json(url: str, token: str | None, timeout_s: float, name: str,
                    max_bytes: int = MAX_BODY_BYTES) -> Any:
    """GET one JSON answer within a total deadline and a body cap, following only same-host
    redirects (the token never goes to another host)."""

    headers = {"User-Agent": f"gpuconsole/{_version()}", "Accept": "application/json",
               "Accept-Encoding": "gzip"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    start = httpx.URL(url)
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False,
                                 timeout=httpx.Timeout(timeout_s)) as client:
        target = start
        for _ in range(MAX_REDIRECTS + 1):
            async with client.stream("GET", target, headers=headers) as r:
                if r.is_redirect:
                    location = r.headers.get("location", "")
                    nxt = target.join(location)
                    if _origin(nxt) != _origin(start):
                        raise HubError(f"{name} redirected to another host ({clean_line(str(nxt.host))[:80]}): "
                                       "not followed (a token never leaves its host)")
                    target = nxt
                    continue
                if r.status_code in (401, 403, 404):
                    code = r.headers.get("x-error-code", "")
                    kind = {"RevisionNotFound": "RevisionNotFound", "GatedRepo": "GatedRepo",
                            "EntryNotFound": "EntryNotFound"}.get(code, "RepositoryNotFound")
                    said = clean_line(r.headers.get("x-error-message", "") or f"HTTP {r.status_code}")[:160]
                    raise _NotFound(f"{kind}: {said}")
                if r.status_code != 200:
                    raise HubError(f"HTTP {r.status_code}")
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise HubError(f"the answer is {int(declared):,} bytes, more than the {max_bytes:,} read")
                encoding = r.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("identity", "gzip", ""):
                    raise HubError(f"the answer is {clean_line(encoding)[:20]}-encoded (asked for gzip or none)")
                inflate = zlib.decompressobj(wbits=47) if encoding == "gzip" else None
                body = bytearray()
                async for chunk in r.aiter_raw():
                    if inflate is not None:
                        chunk = inflate.decompress(chunk, max_bytes + 1 - len(body))
                    body += chunk
                    if len(body) > max_bytes:
                        raise HubError(f"the answer is more than the {max_bytes:,} bytes read")
                if inflate is not None:
                    body += inflate.flush()[: max_bytes + 1 - len(body)]
                    if len(body) > max_bytes:
                        raise HubError(f"the answer is more than the {max_bytes:,} bytes read")
                try:
                    return json.loads(bytes(body))
                except (ValueError, RecursionError) as exc:
                    raise HubError(f"the answer is not JSON ({type(exc).__name__})") from None
        raise HubError(f"{name} redirected more than {MAX_REDIRECTS} times")


def _version() -> str:
    return __version__


def fetch_model_info(repo_id: str, revision: str, endpoint: str | None, token: str | None,
                     timeout_s: float, name: str = "Hub") -> dict[str, Any]:
    """The Hub's `GET /api/models/REPO/revision/REV?blobs=true` (what HfApi.model_info(files_metadata=True)
    asks), bounded: one total deadline for the whole exchange, the body capped at MAX_BODY_BYTES,
    redirects only to the same host. Call it through asyncio.to_thread (it runs its own loop)."""
    if not _REPO_RE.match(repo_id) or ".." in repo_id:
        raise _NotFound(f"RepositoryNotFound: not a repo id: {clean_line(repo_id)[:80]!r}")
    base = (endpoint or HUB).rstrip("/")
    url = f"{base}/api/models/{repo_id}/revision/{quote(revision, safe='')}?blobs=true"

    async def bounded() -> Any:
        try:
            return await asyncio.wait_for(_get_json(url, token, timeout_s, name), timeout_s)
        except asyncio.TimeoutError:
            raise HubError(f"no whole answer within {timeout_s:g} s") from None

    data = asyncio.run(bounded())
    if not isinstance(data, dict):
        raise HubError("the answer is not a JSON object")
    return data


def _siblings(data: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    raw = data.get("siblings")
    for s in raw if isinstance(raw, list) else []:
        if not isinstance(s, dict) or not isinstance(s.get("rfilename"), str):
            continue
        lfs = s.get("lfs") if isinstance(s.get("lfs"), dict) else None
        out.append({"rfilename": s["rfilename"], "size": s.get("size"),
                    "lfs": {"size": lfs.get("size"), "sha256": lfs.get("sha256")} if lfs else None})
    return out


def fetch_expected(repo_id: str, revision: str = "main", *, max_age_s: float = 6 * 3600,
                   timeout_s: float = 15.0, access: HubAccess | None = None) -> ExpectedFiles:
    access = access or HubAccess()
    name = access.name()
    path = _cache_path(repo_id, revision, access.endpoint)
    cached = _read_cache(path) if access.use_cache else None
    if cached and time.time() - cached.get("fetched_at", 0) < max_age_s:
        fetched = time.strftime("%H:%M", time.localtime(cached["fetched_at"]))
        return expected_from_siblings(cached["siblings"], f"{name} file list (cached {fetched})")
    # HF_ENDPOINT is read at call time, so a mirror set in the profile's environment, or a test's
    # loopback Hub, is honoured.
    endpoint = access.endpoint or os.environ.get("HF_ENDPOINT") or None
    try:
        # Never a token over plain http to another host, nor to an address a profile may not name
        # ($HF_ENDPOINT is not checked by the config): issue 34, item 7.
        send_token = access.send_token and (endpoint is None or endpoint_problem(endpoint) is None)
        token = None
        if send_token:
            from huggingface_hub import get_token  # the operator's saved token (HF_TOKEN, hf auth login)

            token = get_token()
        # huggingface_hub's client is not used for the request: its answer has no size bound and its
        # timeout is per read, so a trickling Hub held a 15 s fetch for 30 s (issue 34, item 16).
        info = fetch_model_info(repo_id, revision, endpoint, token, timeout_s, name)
    except _NotFound as exc:
        raise HubError(f"{repo_id}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - offline, DNS, TLS, 5xx, too big, too slow: use the cache if any
        if cached:
            return expected_from_siblings(cached["siblings"], f"{name} unreachable: using the cached file list")
        first = clean_line(str(exc).splitlines()[0])[:160] if str(exc) else ""
        raise HubError(f"{name} unreachable for {repo_id}: {type(exc).__name__}: {first}") from None
    siblings = _siblings(info)
    if not access.use_cache:
        return expected_from_siblings(siblings, f"{name} file list")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"repo_id": repo_id, "revision": revision,
                                    "sha": info.get("sha") if isinstance(info.get("sha"), str) else None,
                                    "fetched_at": time.time(), "siblings": siblings}))
    except OSError:
        pass  # a read-only cache is no reason to lose the answer
    return expected_from_siblings(siblings, f"{name} file list")
