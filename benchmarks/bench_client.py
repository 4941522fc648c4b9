"""The load generator's ceiling and its overhead on TTFT, against a zero-think-time server on
127.0.0.1 that streams N tokens as fast as it can and records, per request, when it received the
request and when it wrote the first token (CLOCK_MONOTONIC, shared by every process here).

Overhead on TTFT = the client's mean measured TTFT minus the server's mean truth (receive to
first token written). Optionally the same server is driven by a peer client (guidellm), whose
numbers are read from its JSON report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from console.bench.runner import BenchConfig, run_benchmark  # noqa: E402
from console.bench.workload import random_prompts  # noqa: E402

TRUTH: list[float] = []  # seconds from request received to first token written
TOKENS = 64
PACE = {"ttft_s": 0.0, "itl_s": 0.0}  # zero think time by default (the ceiling)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """HTTP/1.1 with keep-alive: /v1/models, and streaming chat completions (chunked SSE)."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            received = time.monotonic()
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            if head.startswith(b"GET /v1/models"):
                payload = b'{"object": "list", "data": [{"id": "zero", "object": "model"}]}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(payload), payload))
                await writer.drain()
                continue
            if head.startswith(b"GET /health"):
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            if head.startswith(b"GET /truth"):
                ms = [t * 1000 for t in TRUTH]
                payload = json.dumps({"n": len(ms), "mean_ms": statistics.fmean(ms) if ms else None,
                                      "median_ms": statistics.median(ms) if ms else None}).encode()
                TRUTH.clear()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(payload), payload))
                await writer.drain()
                continue
            if not head.startswith(b"POST"):
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
                continue
            n = int(body.get("max_tokens") or body.get("max_completion_tokens") or TOKENS)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")

            def chunk(data: bytes) -> None:
                writer.write(b"%X\r\n%s\r\n" % (len(data), data))

            if PACE["ttft_s"]:
                await asyncio.sleep(PACE["ttft_s"])
            for i in range(n):
                if i and PACE["itl_s"]:
                    await writer.drain()
                    await asyncio.sleep(PACE["itl_s"])
                usage = f', "usage": {{"prompt_tokens": 64, "completion_tokens": {i + 1}}}'
                chunk(f'data: {{"choices": [{{"index": 0, "delta": {{"content": " tok"}}}}]{usage}}}\n\n'.encode())
                if i == 0:
                    await writer.drain()
                    TRUTH.append(time.monotonic() - received)
            chunk(b'data: {"choices": [], "usage": {"prompt_tokens": 64, "completion_tokens": %d}}\n\n' % n)
            chunk(b"data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def serve_forever(port_file: Path, ttft_ms: float = 0.0, itl_ms: float = 0.0) -> None:
    PACE.update(ttft_s=ttft_ms / 1000, itl_s=itl_ms / 1000)

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port_file.write_text(str(server.sockets[0].getsockname()[1]))
        async with server:
            await server.serve_forever()
    asyncio.run(main())


def truth(url: str) -> dict[str, float]:
    import httpx

    return dict(httpx.get(url + "/truth", timeout=10).json())


async def ours(url: str, n: int, concurrency: int) -> dict[str, float]:
    import time as _t

    m = await run_benchmark(BenchConfig(url, concurrency=concurrency, warmup=1, output_len=TOKENS, input_len=64),
                            random_prompts(n, 64, TOKENS))
    cpu = _t.process_time()
    return {"completed": m["completed"], "request_throughput": round(m["request_throughput"], 1),
            "output_throughput": round(m["output_throughput"]), "mean_ttft_ms": round(m["mean_ttft_ms"], 2),
            "median_ttft_ms": round(m["median_ttft_ms"], 2), "client_cpu_s": round(cpu, 1)}


def peer_guidellm(url: str, n: int, concurrency: int, tokenizer: str, out: Path) -> dict[str, float] | str:
    """guidellm 0.8 against the same server; it needs a tokenizer, given as the model name (a local dir)."""
    import os
    import shutil

    exe = shutil.which("guidellm") or str(Path(sys.executable).parent / "guidellm")
    cmd = [exe, "run", "--backend", f"kind=openai_http,target={url},model={tokenizer}",
           "--profile", f"kind=concurrent,streams={concurrency}",
           "--data", f"kind=synthetic_text,prompt_tokens=64,output_tokens={TOKENS}",
           "--constraint", f"kind=max_requests,count={n}", "--tokenizer", "kind=hf_auto",
           "--output", f"kind=json,path={out}", "--disable-console-interactive"]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900,
                       env={**os.environ, "HF_HUB_OFFLINE": "1"})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"guidellm did not run: {exc}"
    bench = json.loads(out.read_text())["benchmarks"][0]
    m = bench["metrics"]
    done = m["request_totals"]["successful"] if isinstance(m["request_totals"], dict) else m["request_totals"]
    out_tokens = m["output_token_count"]["successful"]["total_sum"]
    duration = bench["duration"]
    return {"completed": done, "request_throughput": round(done / duration, 1),
            "output_throughput": round(out_tokens / duration),
            "mean_ttft_ms": round(m["time_to_first_token_ms"]["successful"]["mean"], 2),
            "median_ttft_ms": round(m["time_to_first_token_ms"]["successful"]["median"], 2)}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", default="8,64", help="levels, comma-separated")
    ap.add_argument("--ttft-ms", type=float, default=0.0, help="server think time before the first token")
    ap.add_argument("--itl-ms", type=float, default=0.0, help="server time per token after the first")
    ap.add_argument("--peer-tokenizer", help="a local tokenizer dir for guidellm (it needs one); omit to skip the peer")
    a = ap.parse_args()
    import multiprocessing
    import tempfile

    port_file = Path(tempfile.mkdtemp()) / "port"
    # The server in its own process: the client's numbers must not include the server's CPU.
    proc = multiprocessing.Process(target=serve_forever, args=(port_file, a.ttft_ms, a.itl_ms), daemon=True)
    proc.start()
    while not port_file.exists() or not port_file.read_text():
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port_file.read_text()}"
    report: dict[str, object] = {"requests": a.requests, "server_ttft_ms": a.ttft_ms, "server_itl_ms": a.itl_ms}
    for level in [int(x) for x in a.concurrency.split(",")]:
        truth(url)  # reset
        result = asyncio.run(ours(url, a.requests, level))
        t = truth(url)
        result["client_overhead_on_ttft_ms"] = round(result["mean_ttft_ms"] - t["mean_ms"], 2)
        row: dict[str, object] = {"server_truth_ttft_ms": round(t["mean_ms"], 3), "gpuconsole": result}
        if a.peer_tokenizer:
            peer = peer_guidellm(url, a.requests, level, a.peer_tokenizer, Path(tempfile.mkdtemp()) / "g.json")
            pt = truth(url)
            if isinstance(peer, dict):
                peer["client_overhead_on_ttft_ms"] = round(peer["mean_ttft_ms"] - pt["mean_ms"], 2)
            row["guidellm"] = peer
        report[f"concurrency_{level}"] = row
    print(json.dumps(report, indent=2))
    proc.terminate()
