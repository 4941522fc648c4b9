"""An OpenAI-compatible streaming server on 127.0.0.1 with exact timing that reports its own truth.

It streams chat (and plain) completions as SGLang does: `usage` on every chunk only when the client
asks (`stream_options.continuous_usage_stats`), a final usage chunk with `include_usage`, a last
chunk with `finish_reason: "length"`, then `data: [DONE]`, over HTTP/1.1 keep-alive with chunked
encoding. Zero think time by default (the clients' ceiling), or paced (`ttft_ms`, `itl_ms`).

Per request it records, on CLOCK_MONOTONIC, how long from the request's last byte read to its
first token written (`GET /truth` returns and resets the record), so a client's TTFT minus this
is the client's own overhead.

Options for the client tests: `usage=False` never sends usage (other servers), and
`tokens_per_chunk=K` puts K tokens in each chunk (speculative decoding, `--stream-interval`).
Each token is the word " tok": one token for the word-level tokenizer that `build_tokenizer`
writes, so every count is exact.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

WORD = " tok"


def _pct(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100.0
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


class LoopbackServer:
    def __init__(self, ttft_ms: float = 0.0, itl_ms: float = 0.0, *, usage: bool = True, tokens_per_chunk: int = 1,
                 model: str = "zero") -> None:
        self.ttft_s, self.itl_s = ttft_ms / 1000, itl_ms / 1000
        self.usage, self.k, self.model = usage, max(1, tokens_per_chunk), model
        self.truth: list[float] = []
        self.durations: list[float] = []  # request read -> last byte written
        self.requests = 0
        self.connections = 0

    def truth_report(self) -> dict[str, Any]:
        ms = [t * 1000 for t in self.truth]
        dur = [t * 1000 for t in self.durations]
        report = {"n": len(ms), "mean_ms": statistics.fmean(ms) if ms else None,
                  "median_ms": statistics.median(ms) if ms else None, "p99_ms": _pct(ms, 99),
                  "duration_mean_ms": statistics.fmean(dur) if dur else None}
        self.truth, self.durations = [], []
        return report

    @staticmethod
    def _json(writer: asyncio.StreamWriter, obj: Any, status: bytes = b"200 OK") -> None:
        payload = json.dumps(obj).encode()
        writer.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (status, len(payload), payload))

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                body = await reader.readexactly(length) if length else b""
                received = time.monotonic()
                path = head.split(b" ", 2)[1]
                if head.startswith(b"GET"):
                    if path == b"/v1/models":
                        self._json(writer, {"object": "list", "data": [{"id": self.model, "object": "model"}]})
                    elif path in (b"/server_info", b"/get_server_info"):
                        self._json(writer, {"internal_states": [{"avg_spec_accept_length": None}]})
                    elif path == b"/truth":
                        self._json(writer, self.truth_report())
                    elif path == b"/health":
                        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    else:
                        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                await self.stream(writer, json.loads(body or b"{}"), path, received)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def stream(self, writer: asyncio.StreamWriter, req: dict[str, Any], path: bytes, received: float) -> None:
        self.requests += 1
        chat = path.endswith(b"chat/completions")
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        if chat:
            text = " ".join(str(m.get("content", "")) for m in req.get("messages", []))
        else:
            text = str(req.get("prompt", ""))
        prompt_tokens = len(text.split())
        opts = req.get("stream_options") or {}
        final_usage = self.usage and bool(opts.get("include_usage"))
        every_usage = final_usage and bool(opts.get("continuous_usage_stats"))
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = f'{{"id":"r","object":"{kind}","created":0,"model":"{self.model}","choices":[{{"index":0,'

        def chunk(count: int, done: int, finish: bool = False) -> bytes:
            piece = json.dumps(WORD * count)
            content = f'"delta":{{"content":{piece}}}' if chat else f'"text":{piece}'
            reason = '"length"' if finish else "null"
            usage = (f',"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":{done},'
                     f'"total_tokens":{prompt_tokens + done}}}') if every_usage else ""
            data = f'{head}{content},"logprobs":null,"finish_reason":{reason}}}]{usage}}}'
            return b"data: " + data.encode() + b"\n\n"

        def framed(data: bytes) -> bytes:
            return b"%X\r\n%s\r\n" % (len(data), data)

        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        if self.ttft_s:
            await asyncio.sleep(self.ttft_s)
        done = 0
        first = True
        rest: list[bytes] = []
        while done < n:
            count = min(self.k, n - done)
            done += count
            data = framed(chunk(count, done, finish=done >= n))
            if first:
                writer.write(data)
                await writer.drain()
                self.truth.append(time.monotonic() - received)
                first = False
            elif self.itl_s:
                await asyncio.sleep(self.itl_s * count)
                writer.write(data)
            else:
                rest.append(data)
        if final_usage:
            rest.append(framed(b'data: {"id":"r","object":"chat.completion.chunk","choices":[],"usage":'
                               b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}\n\n'
                               % (prompt_tokens, n, prompt_tokens + n)))
        rest.append(framed(b"data: [DONE]\n\n"))
        rest.append(b"0\r\n\r\n")
        writer.write(b"".join(rest))
        await writer.drain()
        self.durations.append(time.monotonic() - received)


def serve_forever(port_file: Path, ttft_ms: float = 0.0, itl_ms: float = 0.0, usage: bool = True,
                  tokens_per_chunk: int = 1) -> None:
    """In its own process: the clients' figures must not include the server's CPU."""
    server = LoopbackServer(ttft_ms, itl_ms, usage=usage, tokens_per_chunk=tokens_per_chunk)

    async def main() -> None:
        srv = await asyncio.start_server(server.handle, "127.0.0.1", 0, backlog=1024)
        port_file.write_text(str(srv.sockets[0].getsockname()[1]))
        async with srv:
            await srv.serve_forever()

    try:
        import uvloop

        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


def start_in_process(ttft_ms: float = 0.0, itl_ms: float = 0.0, *, usage: bool = True,
                     tokens_per_chunk: int = 1) -> tuple[Any, str]:
    """The server in a child process of its own; returns (process, base URL)."""
    import subprocess
    import sys
    import tempfile

    port_file = Path(tempfile.mkdtemp(prefix="gpuconsole-bench-")) / "port"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--port-file", str(port_file), "--ttft-ms", str(ttft_ms),
           "--itl-ms", str(itl_ms), "--tokens-per-chunk", str(tokens_per_chunk)] + ([] if usage else ["--no-usage"])
    proc = subprocess.Popen(cmd)
    deadline = time.monotonic() + 30
    while not (port_file.exists() and port_file.read_text()):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the loopback server did not start")
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port_file.read_text()}"
    port_file.unlink()
    port_file.parent.rmdir()
    return proc, url


def build_tokenizer(directory: Path, vocab_size: int = 2048) -> Path:
    """A word-level Hugging Face tokenizer written locally (no download): "tok" and filler words,
    whitespace-split, so a prompt of N words is N tokens for every client and the server alike."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {"[UNK]": 0, "tok": 1}
    for i in range(2, vocab_size):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "model_max_length": 1 << 20,
        "clean_up_tokenization_spaces": False}))
    return directory


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port-file", required=True, type=Path)
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--no-usage", action="store_true")
    a = ap.parse_args()
    serve_forever(a.port_file, a.ttft_ms, a.itl_ms, usage=not a.no_usage, tokens_per_chunk=a.tokens_per_chunk)
