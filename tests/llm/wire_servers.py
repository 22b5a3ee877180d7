"""Loopback HTTP servers that speak each provider's wire protocol, for tests.

A ``WireServer`` answers POSTs from a queue of scripted ``Reply`` objects (then from its
``responder`` function, if set; the last ``repeat`` reply answers everything after the
queue runs dry) and keeps every request. The ``Dialect`` classes build bodies in the
Anthropic Messages, OpenAI Chat Completions and Gemini generateContent formats, and build
a real SDK-backed provider pointed at the server. A request that asks for a stream
(``"stream": true``, Gemini's ``:streamGenerateContent``) gets the same reply as
server-sent events, cut into pieces (``Reply.stall_after`` events, then silence: a stalled
stream; with ``Reply.gate``, the rest once the test sets it). Nothing leaves 127.0.0.1.
``cli_env`` and ``ENDPOINT_VARS`` point a whole ``cacao`` process at a server.
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    stall_after: int | None = None  # streamed: send this many events, then nothing for stall_s
    stall_s: float = 60.0
    gate: threading.Event | None = None  # streamed: after gate_after events, wait for it to be set
    gate_after: int = 0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class WireServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.repeat: Reply | None = None
        self.responder: Callable[[Seen], Reply | None] | None = None
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                seen = Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                reply = owner._next(seen)
                if reply.delay_s:
                    owner._stop.wait(reply.delay_s)
                if reply.status == 200 and isinstance(reply.body, dict) and wants_stream(seen):
                    self._stream(reply)
                    return
                payload = json.dumps(reply.body).encode() if not isinstance(reply.body, bytes) else reply.body
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _stream(self, reply: Reply) -> None:
                events = sse_events(reply.body)
                try:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for n, event in enumerate(events):
                        if reply.stall_after is not None and n >= reply.stall_after:
                            owner._stop.wait(reply.stall_s)
                            return
                        if reply.gate is not None and n == reply.gate_after:
                            while not reply.gate.wait(0.05) and not owner._stop.is_set():
                                pass
                        self.wfile.write(event)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    self.close_connection = True

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.requests.append(seen)
            if self.replies:
                return self.replies.popleft()
            if self.responder is not None:
                found = self.responder(seen)
                if found is not None:
                    return found
            if self.repeat is not None:
                return self.repeat
        return Reply(500, {"error": {"message": "no scripted reply left"}})

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def start(self) -> WireServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # a stalled stream or a delayed reply ends now
        self._server.shutdown()
        self._server.server_close()


# -- streams: the same replies as server-sent events -----------------------------------------


def wants_stream(seen: Seen) -> bool:
    return ":streamGenerateContent" in seen.path or (isinstance(seen.body, dict) and seen.body.get("stream") is True)


def pieces(text: str, size: int = 12, most: int = 200) -> list[str]:
    """``text`` in pieces of ``size`` characters, or in ``most`` pieces when that is fewer."""
    size = max(size, -(-len(text) // most))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def sse_events(body: dict[str, Any]) -> list[bytes]:
    """A complete reply body (any of the three formats) as the events of its stream."""
    if "choices" in body:
        return _openai_events(body)
    if body.get("type") == "message":
        return _anthropic_events(body)
    return _gemini_events(body)


def _openai_events(body: dict[str, Any]) -> list[bytes]:
    base = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    out = [chunk({"role": "assistant", "content": ""})]
    for key in ("reasoning_content", "reasoning"):
        for piece in pieces(message.get(key) or "") if message.get(key) else []:
            out.append(chunk({key: piece}))
    if message.get("refusal"):
        out.append(chunk({"refusal": message["refusal"]}))
    if message.get("content"):
        out += [chunk({"content": piece}) for piece in pieces(message["content"])]
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        head = {"index": i, "id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": ""}}
        out.append(chunk({"tool_calls": [head]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in pieces(fn["arguments"])]
    out.append(chunk({}, choice["finish_reason"]))
    out.append(_sse({**base, "choices": [], "usage": body.get("usage")}))
    out.append(b"data: [DONE]\n\n")
    return out


def _anthropic_events(body: dict[str, Any]) -> list[bytes]:
    usage = dict(body.get("usage") or {})
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [_sse({"type": "message_start", "message": start}, "message_start")]
    for i, block in enumerate(body["content"]):
        kind = block["type"]
        if kind == "text":
            out.append(_sse({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                            "content_block_start"))  # fmt: skip
            for p in pieces(block["text"]):
                delta = {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": p}}
                out.append(_sse(delta, "content_block_delta"))
        elif kind == "thinking":
            empty = {"type": "thinking", "thinking": "", "signature": ""}
            out.append(_sse({"type": "content_block_start", "index": i, "content_block": empty}, "content_block_start"))
            for p in pieces(block["thinking"]):
                delta = {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta", "thinking": p}}
                out.append(_sse(delta, "content_block_delta"))
            sig = {"type": "signature_delta", "signature": block.get("signature", "")}
            out.append(_sse({"type": "content_block_delta", "index": i, "delta": sig}, "content_block_delta"))
        elif kind == "tool_use":
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            out.append(_sse({"type": "content_block_start", "index": i, "content_block": head}, "content_block_start"))
            raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            for p in pieces(raw):
                delta = {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta",
                                                                               "partial_json": p}}  # fmt: skip
                out.append(_sse(delta, "content_block_delta"))
        else:
            out.append(_sse({"type": "content_block_start", "index": i, "content_block": block}, "content_block_start"))
        out.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    end = {"type": "message_delta", "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
           "usage": {"output_tokens": usage.get("output_tokens", 0)}}  # fmt: skip
    out.append(_sse(end, "message_delta"))
    out.append(_sse({"type": "message_stop"}, "message_stop"))
    return out


def _gemini_events(body: dict[str, Any]) -> list[bytes]:
    candidates = body.get("candidates") or []
    if not candidates:
        return [f"data: {json.dumps(body)}\r\n\r\n".encode()]
    candidate = candidates[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    out: list[dict[str, Any]] = []
    for part in parts:
        if "text" in part and "functionCall" not in part:
            texts = pieces(part["text"])
            for n, p in enumerate(texts):
                piece = {**part, "text": p}
                if n < len(texts) - 1:
                    piece.pop("thoughtSignature", None)  # the signature comes with the part's last piece
                out.append({"candidates": [{"content": {"role": "model", "parts": [piece]}, "index": 0}]})
        else:
            out.append({"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]})
    last = {k: v for k, v in candidate.items() if k != "content"}
    if not out:
        out.append({"candidates": [{**last}]})
    else:
        out[-1]["candidates"][0].update(last)
    out[-1]["usageMetadata"] = body.get("usageMetadata")
    out[-1]["modelVersion"] = body.get("modelVersion")
    return [f"data: {json.dumps(chunk)}\r\n\r\n".encode() for chunk in out]


# -- dialects ----------------------------------------------------------------------------


class Dialect:
    """One provider's wire format. ``provider`` is the name given to create_llm."""

    provider: str
    model: str
    key_var: str

    def build(self, server: WireServer, timeout_s: float = 10.0) -> Any:
        choice = ProviderChoice(self.provider, self.model, "test", self.key_var, base_url=self.base_url(server))
        return build_provider(choice, timeout_s=timeout_s, env={self.key_var: "test-key"})

    def base_url(self, server: WireServer) -> str:
        return server.url

    def text(self, text: str, *, truncated: bool = False, usage: tuple[int, int, int] = (100, 20, 0)) -> Reply:
        raise NotImplementedError

    def tool_call(
        self, name: str, arguments: dict[str, Any], call_id: str = "call_1", truncated: bool = False
    ) -> Reply:
        raise NotImplementedError

    def malformed_tool_call(self, name: str) -> Reply:
        raise NotImplementedError

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        raise NotImplementedError

    # What the client sent.
    def sent_tool_names(self, body: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def sent_tool_results(self, body: dict[str, Any]) -> list[tuple[str | None, str, bool]]:
        """(call id, content, is_error) of every tool result in a request."""
        raise NotImplementedError

    def sent_texts(self, body: dict[str, Any]) -> list[str]:
        """Text of every user / system turn in a request (re-ask reminders land here)."""
        raise NotImplementedError


class AnthropicDialect(Dialect):
    provider, model, key_var = "anthropic", "claude-sonnet-5-5", "ANTHROPIC_API_KEY"

    def _message(self, content: list[dict[str, Any]], stop: str, usage: tuple[int, int, int]) -> Reply:
        fresh, out, cached = usage
        return Reply(
            body={
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": fresh, "output_tokens": out, "cache_read_input_tokens": cached},
            }
        )

    def text(self, text, *, truncated=False, usage=(100, 20, 0)):
        return self._message([{"type": "text", "text": text}], "max_tokens" if truncated else "end_turn", usage)

    def tool_call(self, name, arguments, call_id="call_1", truncated=False):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
        return self._message(
            [{"type": "text", "text": "Let me look."}, block], "max_tokens" if truncated else "tool_use", (100, 20, 0)
        )

    def malformed_tool_call(self, name):
        # The input arrives as a string that is not JSON.
        block = {"type": "tool_use", "id": "call_bad", "name": name, "input": '{"path": "a.cu",'}
        return self._message([block], "tool_use", (100, 20, 0))

    def error(self, status, message, headers=None):
        kinds = {429: "rate_limit_error", 500: "api_error", 401: "authentication_error", 529: "overloaded_error"}
        body = {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
        return Reply(status, body, headers or {})

    def sent_tool_names(self, body):
        return [t["name"] for t in body.get("tools", [])]

    def sent_tool_results(self, body):
        out = []
        for turn in body["messages"]:
            for block in turn["content"] if isinstance(turn["content"], list) else []:
                if block.get("type") == "tool_result":
                    out.append((block["tool_use_id"], block["content"], bool(block.get("is_error"))))
        return out

    def sent_texts(self, body):
        texts = [b["text"] for b in body.get("system", [])]
        for turn in body["messages"]:
            if turn["role"] == "user":
                texts += [b["text"] for b in turn["content"] if b.get("type") == "text"]
        return texts


class OpenAIDialect(Dialect):
    provider, model, key_var = "openai", "gpt-6.1-sol", "OPENAI_API_KEY"

    def base_url(self, server):
        return server.url + "/v1"

    def _completion(self, message: dict[str, Any], finish: str, usage: tuple[int, int, int]) -> Reply:
        prompt, out, cached = usage
        return Reply(
            body={
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 1700000000,
                "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt + cached,
                    "completion_tokens": out,
                    "total_tokens": prompt + cached + out,
                    "prompt_tokens_details": {"cached_tokens": cached},
                },
            }
        )

    def text(self, text, *, truncated=False, usage=(100, 20, 0)):
        return self._completion({"content": text}, "length" if truncated else "stop", usage)

    def _call(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}

    def tool_call(self, name, arguments, call_id="call_1", truncated=False):
        raw = json.dumps(arguments)
        if truncated:
            raw = raw[: len(raw) // 2]
        message = {"content": None, "tool_calls": [self._call(call_id, name, raw)]}
        return self._completion(message, "length" if truncated else "tool_calls", (100, 20, 0))

    def malformed_tool_call(self, name):
        message = {"content": None, "tool_calls": [self._call("call_bad", name, '{"path": "a.cu",')]}
        return self._completion(message, "tool_calls", (100, 20, 0))

    def error(self, status, message, headers=None):
        return Reply(status, {"error": {"message": message, "type": "server_error", "code": None}}, headers or {})

    def sent_tool_names(self, body):
        return [t["function"]["name"] for t in body.get("tools", [])]

    def sent_tool_results(self, body):
        return [
            (m["tool_call_id"], m["content"], m["content"].startswith("Error"))
            for m in body["messages"]
            if m["role"] == "tool"
        ]

    def sent_texts(self, body):
        return [m["content"] for m in body["messages"] if m["role"] in ("user", "system")]


class CeritDialect(OpenAIDialect):
    provider, model, key_var = "cerit", "qwen3.5", "CERIT_API_KEY"


class GeminiDialect(Dialect):
    provider, model, key_var = "gemini", "gemini-3.1-pro-preview", "GEMINI_API_KEY"

    def _response(self, parts: list[dict[str, Any]] | None, finish: str, usage=(100, 20, 0), **extra: Any) -> Reply:
        prompt, out, cached = usage
        candidate: dict[str, Any] = {"finishReason": finish, "index": 0, **extra}
        if parts is not None:
            candidate["content"] = {"role": "model", "parts": parts}
        return Reply(
            body={
                "candidates": [candidate],
                "usageMetadata": {
                    "promptTokenCount": prompt + cached,
                    "candidatesTokenCount": out,
                    "cachedContentTokenCount": cached,
                    "totalTokenCount": prompt + cached + out,
                },
                "modelVersion": self.model,
            }
        )

    def text(self, text, *, truncated=False, usage=(100, 20, 0)):
        return self._response([{"text": text}], "MAX_TOKENS" if truncated else "STOP", usage)

    def tool_call(self, name, arguments, call_id="call_1", truncated=False):
        part = {"functionCall": {"id": call_id, "name": name, "args": arguments}, "thoughtSignature": "c2lnbmF0dXJl"}
        return self._response([part], "MAX_TOKENS" if truncated else "STOP")

    def malformed_tool_call(self, name):
        return self._response(None, "MALFORMED_FUNCTION_CALL", finishMessage=f"Malformed function call: {name}(path=")

    def error(self, status, message, headers=None):
        names = {429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 401: "UNAUTHENTICATED", 503: "UNAVAILABLE"}
        body = {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}
        return Reply(status, body, headers or {})

    def sent_tool_names(self, body):
        return [f["name"] for t in body.get("tools", []) for f in t.get("functionDeclarations", [])]

    def sent_tool_results(self, body):
        out = []
        for content in body["contents"]:
            for part in content.get("parts", []):
                fr = part.get("functionResponse")
                if fr:
                    response = fr.get("response", {})
                    is_error = "error" in response
                    out.append((fr.get("id"), response.get("error", response.get("output")), is_error))
        return out

    def sent_texts(self, body):
        texts = [p["text"] for p in (body.get("systemInstruction") or {}).get("parts", []) if "text" in p]
        for content in body["contents"]:
            if content.get("role") == "user":
                texts += [p["text"] for p in content.get("parts", []) if "text" in p]
        return texts


DIALECTS: dict[str, Dialect] = {
    "anthropic": AnthropicDialect(),
    "openai": OpenAIDialect(),
    "cerit": CeritDialect(),
    "gemini": GeminiDialect(),
}


# -- a whole cacao process against a server ------------------------------------------------------

# The variable that sends each provider's SDK to a server, and the URL form it takes.
ENDPOINT_VARS = {
    "anthropic": ("ANTHROPIC_BASE_URL", ""),
    "openai": ("OPENAI_BASE_URL", "/v1"),
    "cerit": ("CERIT_API_BASE", "/v1"),
    "gemini": ("GOOGLE_GEMINI_BASE_URL", ""),
}
_LLM_PREFIXES = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CERIT_", "CLAUDE_", "LLM_", "CACAO_")


def cli_env(provider: str, server: WireServer, config_dir: str, key: str | None = "test-key") -> dict[str, str]:
    """This process's environment without LLM variables, plus the endpoint of ``provider``
    at ``server`` and (unless None) its key; ``config_dir`` stands in for ~/.config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LLM_PREFIXES)}
    var, suffix = ENDPOINT_VARS[provider]
    env.update({var: server.url + suffix, "XDG_CONFIG_HOME": config_dir})
    if key is not None:
        env[DIALECTS[provider].key_var] = key
    return env
