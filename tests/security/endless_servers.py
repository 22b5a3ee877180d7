"""FAKE hostile LLM endpoints on 127.0.0.1 that never stop streaming (tests and bench only).

One server speaks the three wire formats (OpenAI Chat Completions, Anthropic Messages, Gemini
streamGenerateContent: the request's path says which) and answers every POST with a stream that
never ends, in one of these ways (``MODES``):

- ``text``: reply text, 64 KiB per event, as fast as the socket takes it;
- ``arguments``: one tool call whose arguments never end (Gemini: whole calls, one after another);
- ``one-line``: ``data: `` and then one line without end (no newline ever);
- ``keepalive``: SSE comments (``: keep-alive``; Gemini: empty chunks) and nothing else;
- ``gzip``: a gzip-encoded body that decodes to one endless line (a few KB on the wire per MB).

``serve(mode)`` runs one in a thread of this process; ``python -m tests.security.endless_servers
MODE`` runs one in its own process and prints its URL (the bench measures the client alone).
"""

from __future__ import annotations

import json
import sys
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODES = ("text", "arguments", "one-line", "keepalive", "gzip")
PIECE = "x" * (64 * 1024)


def _sse(data: Any, event: str | None = None, crlf: bool = False) -> bytes:
    end = "\r\n\r\n" if crlf else "\n\n"
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}{end}".encode()


def _openai(mode: str) -> Iterator[bytes]:
    base = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any]) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})

    yield chunk({"role": "assistant", "content": ""})
    if mode == "arguments":
        yield chunk({"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                                     "function": {"name": "write_file", "arguments": '{"content": "'}}]})  # fmt: skip
        piece = chunk({"tool_calls": [{"index": 0, "function": {"arguments": PIECE}}]})
    else:
        piece = chunk({"content": PIECE})
    while True:
        yield piece


def _anthropic(mode: str) -> Iterator[bytes]:
    usage = {"input_tokens": 1, "output_tokens": 1}
    message = {"id": "msg_x", "type": "message", "role": "assistant", "model": "m", "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": usage}  # fmt: skip
    yield _sse({"type": "message_start", "message": message}, "message_start")
    if mode == "arguments":
        block = {"type": "tool_use", "id": "c1", "name": "write_file", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": PIECE}
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": PIECE}
    yield _sse({"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start")
    piece = _sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
    while True:
        yield piece


def _gemini(mode: str) -> Iterator[bytes]:
    if mode == "arguments":
        part: dict[str, Any] = {"functionCall": {"name": "write_file", "args": {"content": PIECE}}}
    else:
        part = {"text": PIECE}
    piece = _sse({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}, crlf=True)
    while True:
        yield piece


def _body(path: str, mode: str) -> Iterator[bytes]:
    if mode == "one-line":
        yield b"data: "
        while True:
            yield b"y" * (1024 * 1024)
    if mode == "keepalive":  # Gemini's SDK reads no SSE comment: empty chunks instead
        filler = b"data: {}\r\n\r\n" if "GenerateContent" in path else b": keep-alive\n\n"
        while True:
            yield filler * 4096
    if "GenerateContent" in path:
        yield from _gemini(mode)
    elif "/messages" in path:
        yield from _anthropic(mode)
    else:
        yield from _openai(mode)


def _gzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in chunks:
        out = packer.compress(chunk) + packer.flush(zlib.Z_SYNC_FLUSH)
        if out:
            yield out


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


def make_server(mode: str) -> _Server:
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            if mode == "gzip":
                self.send_header("content-encoding", "gzip")
            self.end_headers()
            body = _body(self.path, "one-line" if mode == "gzip" else mode)
            try:
                for chunk in _gzipped(body) if mode == "gzip" else body:
                    if stop.is_set():
                        return
                    self.wfile.write(chunk)
            except (BrokenPipeError, ConnectionResetError, OSError):
                pass  # the client stopped reading: what a bounded client does
            finally:
                self.close_connection = True

    server = _Server(("127.0.0.1", 0), Handler)
    server.stop_event = stop  # type: ignore[attr-defined]
    return server


def url_of(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host}:{port}"


def serve(mode: str) -> _Server:
    """A server in a thread of this process; ``shutdown()`` it (and set ``stop_event``) when done."""
    server = make_server(mode)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


if __name__ == "__main__":
    srv = make_server(sys.argv[1])
    print(url_of(srv), flush=True)
    srv.serve_forever(poll_interval=0.05)
