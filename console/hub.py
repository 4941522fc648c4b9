"""The Hub's file list for a repo (exact sizes and LFS sha256), fetched once, cached on disk.

`HfApi.model_info(files_metadata=True)` is synchronous and slow: call `fetch_expected` through
`asyncio.to_thread`. Offline, a cached answer is used; with none, the caller falls back to the
index file and says why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console.analysis.download import ExpectedFile, ExpectedFiles
from console.locations import cache_home


class HubError(Exception):
    """The Hub could not answer (offline, unknown repo, gated); the message is one line."""


@dataclass(frozen=True, slots=True)
class HubAccess:
    """Which Hub to ask and how. The demo's is the simulated host's own, on loopback
    (console/hostsim/fake_hub.py): it gets no token and its answers stay out of the user's cache."""

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


def fetch_expected(repo_id: str, revision: str = "main", *, max_age_s: float = 6 * 3600,
                   timeout_s: float = 15.0, access: HubAccess | None = None) -> ExpectedFiles:
    access = access or HubAccess()
    name = access.name()
    path = _cache_path(repo_id, revision, access.endpoint)
    cached = _read_cache(path) if access.use_cache else None
    if cached and time.time() - cached.get("fetched_at", 0) < max_age_s:
        fetched = time.strftime("%H:%M", time.localtime(cached["fetched_at"]))
        return expected_from_siblings(cached["siblings"], f"{name} file list (cached {fetched})")
    try:
        from huggingface_hub import HfApi, constants
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

        # huggingface_hub's user agent asks huggingface.co for an "agent harnesses" registry on the
        # first request unless telemetry is off (HF_HUB_DISABLE_TELEMETRY, read at its import): a
        # mirror, an air-gapped site or the demo's simulated Hub would still reach the real Hub.
        # The console sends no telemetry; the flag is read per request, so setting it here holds.
        constants.HF_HUB_DISABLE_TELEMETRY = True

        # HF_ENDPOINT is read at call time (huggingface_hub reads it at import), so a mirror set
        # in the profile's environment, or a test's loopback Hub, is honoured.
        endpoint = access.endpoint or os.environ.get("HF_ENDPOINT") or None
        # Never a token over plain http to another host, nor to an address a profile may not name
        # ($HF_ENDPOINT is not checked by the config): issue 34, item 7.
        from console.config import endpoint_problem

        send_token = access.send_token and (endpoint is None or endpoint_problem(endpoint) is None)
        api = HfApi(endpoint=endpoint)
        info = api.model_info(repo_id, revision=revision, files_metadata=True, timeout=timeout_s,
                              token=None if send_token else False)
    except (RepositoryNotFoundError, GatedRepoError, RevisionNotFoundError) as exc:
        raise HubError(f"{repo_id}: {type(exc).__name__.replace('Error', '')}: "
                       f"{str(exc).splitlines()[0][:160]}") from None
    except Exception as exc:  # noqa: BLE001 - offline, DNS, TLS, 5xx: use the cache if any
        if cached:
            return expected_from_siblings(cached["siblings"], f"{name} unreachable: using the cached file list")
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise HubError(f"{name} unreachable for {repo_id}: {type(exc).__name__}: {first}") from None
    siblings = [{"rfilename": s.rfilename, "size": s.size,
                 "lfs": {"size": s.lfs.size, "sha256": s.lfs.sha256} if s.lfs else None}
                for s in (info.siblings or [])]
    if not access.use_cache:
        return expected_from_siblings(siblings, f"{name} file list")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"repo_id": repo_id, "revision": revision, "sha": info.sha,
                                    "fetched_at": time.time(), "siblings": siblings}))
    except OSError:
        pass  # a read-only cache is no reason to lose the answer
    return expected_from_siblings(siblings, f"{name} file list")
