"""A hostile or broken Hub cannot make the console hold what it sends, keep a fetch past its deadline,
or take the operator's token to another host (issue 34, item 16): a 100 MB answer cost +141–206 MB,
a trickling Hub held a 15 s fetch for 30 s, and a mirror's redirect to another address was followed
with the token. A real HTTP server on loopback plays the Hub; 127.0.0.2 is another host."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from console.host.hub import MAX_BODY_BYTES, HubAccess, HubError, fetch_expected
from tests.kit.figures import record

TOKEN = "hf_" + "T" * 34
LISTING = json.dumps({"id": "o/m", "sha": "abc", "siblings": [
    {"rfilename": "model-00001-of-00001.safetensors", "size": 1000, "lfs": {"size": 1000, "sha256": "a" * 64}}]}).encode()


BOMB: list[bytes] = []  # 64 MiB of spaces gzipped (about 64 KB), made before memory is traced


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "listing"
    redirect_to = ""
    seen: list[tuple[str, str, str | None]] = []  # (server address, path, Authorization)
    stop = threading.Event()

    def do_GET(self) -> None:  # noqa: N802
        self.seen.append((self.server.server_address[0], self.path, self.headers.get("Authorization")))
        mode = self.mode if self.server.server_address[0] == "127.0.0.1" else "listing"
        try:
            getattr(self, "_" + mode)()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _listing(self) -> None:
        self._head(200, {"Content-Length": str(len(LISTING))})
        self.wfile.write(LISTING)

    def _head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()

    def _huge_declared(self) -> None:
        self._huge(declared=True)

    def _huge(self, declared: bool = False) -> None:
        size = 100 << 20
        self._head(200, {"Content-Length": str(size)} if declared else {"Connection": "close"})
        block = b" " * (1 << 20)
        for _ in range(100):
            if self.stop.is_set():
                return
            self.wfile.write(block)

    def _bomb(self) -> None:
        body = BOMB[0]
        self._head(200, {"Content-Length": str(len(body)), "Content-Encoding": "gzip"})
        self.wfile.write(body)

    def _trickle(self) -> None:
        self._head(200, {"Content-Length": str(10 << 20)})
        while not self.stop.wait(0.2):
            self.wfile.write(b" ")
            self.wfile.flush()

    def _redirect(self) -> None:
        self._head(307, {"Location": self.redirect_to + self.path, "Content-Length": "0"})

    def log_message(self, *args: object) -> None:
        pass


def _serve(address: str) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer((address, 0), Hub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(the Hub on 127.0.0.1, another host on 127.0.0.2); the operator has a saved token."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    Hub.seen = []
    Hub.stop = threading.Event()
    one, two = _serve("127.0.0.1"), _serve("127.0.0.2")
    try:
        yield f"http://127.0.0.1:{one.server_address[1]}", f"http://127.0.0.2:{two.server_address[1]}"
    finally:
        Hub.stop.set()
        for s in (one, two):
            s.shutdown()
            s.server_close()


def _fetch(url: str, timeout_s: float = 15.0) -> Any:
    return fetch_expected("o/m", access=HubAccess(endpoint=url, use_cache=False), timeout_s=timeout_s)


def test_the_hub_answers_through_the_bounded_client_with_the_token(hub: tuple[str, str]) -> None:
    Hub.mode = "listing"
    got = _fetch(hub[0])
    assert [f.path for f in got.files] == ["model-00001-of-00001.safetensors"] and got.files[0].sha256 == "a" * 64
    assert Hub.seen == [("127.0.0.1", "/api/models/o/m/revision/main?blobs=true", f"Bearer {TOKEN}")]


@pytest.mark.parametrize("mode", ["huge", "huge_declared", "bomb"])
def test_a_huge_answer_is_refused_and_never_held(hub: tuple[str, str], mode: str) -> None:
    Hub.mode = mode
    if not BOMB:
        BOMB.append(gzip.compress(b" " * (64 << 20), compresslevel=9))
    tracemalloc.start()
    try:
        with pytest.raises(HubError, match="bytes") as caught:
            _fetch(hub[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "unreachable for o/m" in str(caught.value)
    assert peak < 2 * MAX_BODY_BYTES + (8 << 20), f"peak {peak / 2**20:.0f} MiB for a 100 MB answer"
    record(f"a Hub answering 100 MB ({mode.replace('_', ' ')}), cap 16 MiB", tried=1, escaped=0,
           memory_mib=round(peak / 2**20))


def test_a_trickling_hub_is_dropped_at_the_deadline(hub: tuple[str, str]) -> None:
    """One byte every 0.2 s never trips a per-read timeout: the deadline is for the whole answer."""
    Hub.mode = "trickle"
    outcome: list[BaseException | object] = []

    def fetch() -> None:
        try:
            outcome.append(_fetch(hub[0], timeout_s=1.0))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    worker.join(60)  # generous: it only fails when the fetch outlives its deadline by far
    assert outcome, "the fetch was still reading a trickling answer long after its 1 s deadline"
    assert isinstance(outcome[0], HubError) and "within 1 s" in str(outcome[0]), outcome
    record("a Hub trickling one byte every 0.2 s past a 1 s deadline", tried=1, escaped=0, held=0)


def test_a_redirect_to_another_host_is_not_followed_and_the_token_stays(hub: tuple[str, str]) -> None:
    Hub.mode, Hub.redirect_to = "redirect", hub[1]
    with pytest.raises(HubError, match="redirected to another host"):
        _fetch(hub[0])
    assert [s for s in Hub.seen if s[0] == "127.0.0.2"] == []  # never asked, with or without the token
    assert Hub.seen[0][2] == f"Bearer {TOKEN}"
    record("a Hub mirror redirecting to another host (127.0.0.2) with the token", tried=1, escaped=0,
           borrowed=len([s for s in Hub.seen if s[0] == "127.0.0.2" and s[2]]))


def test_a_redirect_on_the_same_host_is_followed(hub: tuple[str, str]) -> None:
    Hub.mode, Hub.redirect_to = "redirect", hub[0] + "/moved"
    # The second request lands on the same server: answer it there with the listing.
    original = Hub._redirect

    def once(self: Hub) -> None:
        if self.path.startswith("/moved"):
            self._listing()
        else:
            original(self)

    Hub._redirect = once  # type: ignore[method-assign]
    try:
        got = _fetch(hub[0])
    finally:
        Hub._redirect = original  # type: ignore[method-assign]
    assert len(got.files) == 1
    assert [s[2] for s in Hub.seen] == [f"Bearer {TOKEN}"] * 2
