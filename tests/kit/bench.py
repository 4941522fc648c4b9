"""Shared test kit: moved from test_bench.py so that no test imports another test module."""

from __future__ import annotations

import asyncio
import json


class FaultyServer:
    """A small HTTP/1.1 server on loopback whose answer depends on the prompt's first word."""

    served = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), b"0"))
            body = json.loads(await reader.readexactly(length)) if length else {}
            mode = body.get("messages", [{}])[0].get("content", "ok").split()[0]
            if b"GET /v1/models" in head:
                payload = b'{"data": [{"id": "m"}]}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
            elif b"GET /server_info" in head:
                payload = b'{"internal_states": [{"avg_spec_accept_length": 2.5}]}'
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
            elif mode in ("e400", "e503"):
                code = mode[1:].encode()
                writer.write(b"HTTP/1.1 " + code + b" X\r\nContent-Length: 12\r\n\r\nbad request!")
            elif mode == "e500":  # a message that differs per request, as real servers' do
                FaultyServer.served += 1
                msg = b"internal error in request %d" % FaultyServer.served
                writer.write(b"HTTP/1.1 500 X\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg))
            elif mode == "auth" and b"authorization: bearer sekrit-123" not in head.lower():
                msg = b"bad key: " + next((ln for ln in head.split(b"\r\n") if ln.lower().startswith(b"authorization")), b"none")
                writer.write(b"HTTP/1.1 401 X\r\nContent-Length: %d\r\n\r\n%s" % (len(msg), msg))
            elif mode == "huge":  # a chunk claiming 20,000,000 tokens
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
                writer.write(b'data: {"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}}\n\n')
                writer.write(b'data: {"choices": [{"delta": {"content": "b"}}], "usage": {"completion_tokens": 20000000}}\n\n')
                writer.write(b"data: [DONE]\n\n")
            elif mode == "longline":  # 4 MiB without a newline
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ")
                for _ in range(64):
                    writer.write(b"x" * 65536)
                    await writer.drain()
            else:
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
                chunks = [b'data: {"choices": [{"delta": {"content": "a"}}], "usage": {"completion_tokens": 1}}\n\n',
                          b'data: {"choices": [{"delta": {"content": "bcd"}}], "usage": {"completion_tokens": 4}}\n\n']
                if mode == "malformed":
                    chunks.append(b"data: {oops\n\n")
                for c in chunks:
                    writer.write(c)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if mode == "hang":
                    await asyncio.sleep(5)
                if mode not in ("cut", "hang"):
                    writer.write(b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 4}}\n\n')
                    writer.write(b"data: [DONE]\n\n")
                # "cut" and "nodone" end here without [DONE]
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
