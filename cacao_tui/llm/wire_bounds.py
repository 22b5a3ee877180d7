"""Bytes from an LLM endpoint, bounded before any SDK buffers them (docs/SECURITY.md, "The LLM layer").

A server may stream without end, send one line of 400 MB, or compress a gigabyte into a few
megabytes; the SDKs buffer an SSE line (and an event's data lines) whole before they parse it,
and read an error body whole. Every provider's HTTP client is built here (``http_client_for``)
with two event hooks that hold for every response, redirects included, on any connection pool
or proxy the client picks:

- the request asks for no compression (``Accept-Encoding: identity``); a gzip or deflate body
  sent anyway is decoded here, as it is read, so the bounds count what the SDK would buffer;
  another encoding is refused;
- the body is read through a meter: at most ``MAX_FRAME_BYTES`` in one server-sent event (the
  bytes up to the blank line that ends it) or in a whole body that is not an event stream, and
  at most ``MAX_RESPONSE_BYTES`` in one response. Past either, reading raises
  ``ResponseTooLarge``: the adapter keeps what the reply held so far, cut and noted
  (cacao_tui/llm/streamed_reply.py), or fails the call in one line when it held nothing.

A real reply stays far below both: the largest event is one streamed tool call (a whole file in
one Gemini part, at most the 512 Ki character reply cap, JSON-escaped), and a 48 Ki-token reply
of one-token events is about 12 MB.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import zlib
from collections.abc import AsyncIterator
from typing import Any

MIB = 1024 * 1024
MAX_FRAME_BYTES = 8 * MIB
MAX_RESPONSE_BYTES = 64 * MIB
_DECODED = ("gzip", "x-gzip", "deflate")


class ResponseTooLarge(Exception):
    """The endpoint sent more than a bound allows; ``str()`` is one line."""


# The reply being read in this task (a ReplyGatherer): once it is ``full``, the next chunk from
# the wire raises instead of arriving, so every layer of the SDK ends its stream the way it ends
# on an error (closing an SDK's generator from outside instead left Gemini's inner ones to fail
# when collected).
reply_in_progress: contextvars.ContextVar[Any] = contextvars.ContextVar("cacao_reply_in_progress", default=None)
STOPPED = "the reply is past its caps"


class _Meter:
    """Counts a response's bytes, and in an event stream the bytes since the last blank line."""

    def __init__(self, events: bool) -> None:
        self.events = events
        self.total = 0
        self.frame = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.total > MAX_RESPONSE_BYTES:
            raise ResponseTooLarge(
                f"the response passed {MAX_RESPONSE_BYTES // MIB} MiB (cacao's bound on one response); reading stopped"
            )
        if not self.events:
            self.frame += len(chunk)
        else:
            data = self._tail + chunk
            ends = [at + len(sep) for sep in (b"\n\n", b"\r\r", b"\r\n\r\n") if (at := data.rfind(sep)) >= 0]
            self.frame = len(data) - max(ends) if ends else self.frame + len(chunk)
            self._tail = data[-3:]
        if self.frame > MAX_FRAME_BYTES:
            what = "one server-sent event" if self.events else "the response body"
            raise ResponseTooLarge(
                f"{what} passed {MAX_FRAME_BYTES // MIB} MiB without an end (cacao's bound); reading stopped"
            )


@functools.cache
def _bounded_stream_class(module_name: str) -> type:
    """A byte stream of the HTTP library ``module_name`` (httpx or httpx2) that meters its source."""
    module = importlib.import_module(module_name)

    class BoundedStream(module.AsyncByteStream):  # type: ignore[misc,name-defined]
        def __init__(self, inner: Any, meter: _Meter, decoder: Any) -> None:
            self._inner = inner
            self._meter = meter
            self._decoder = decoder

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                watched = reply_in_progress.get()
                if watched is not None and watched.full:
                    raise ResponseTooLarge(STOPPED)
                if self._decoder is None:
                    self._meter.feed(chunk)
                    yield chunk
                    continue
                data = chunk
                while data:  # a small compressed chunk may hold a great deal: out in bounded pieces
                    out = self._decoder.decompress(data, 1 * MIB)
                    data = self._decoder.unconsumed_tail
                    if out:
                        self._meter.feed(out)
                        yield out
            if self._decoder is not None:
                rest = self._decoder.flush()
                if rest:
                    self._meter.feed(rest)
                    yield rest

        async def aclose(self) -> None:
            await self._inner.aclose()

    return BoundedStream


async def _identity(request: Any) -> None:
    request.headers["Accept-Encoding"] = "identity"


async def _bound(response: Any) -> None:
    """The response's body from here on is metered (and decoded here, when it is compressed)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    decoder = None
    if encoding and encoding != "identity":
        if encoding not in _DECODED:
            raise ResponseTooLarge(f"the response is {encoding}-encoded; cacao asked for none and reads only gzip")
        decoder = zlib.decompressobj(32 + zlib.MAX_WBITS)  # a gzip or zlib header, found by zlib
        del response.headers["content-encoding"]
    events = "text/event-stream" in response.headers.get("content-type", "").lower()
    module_name = type(response).__module__.split(".")[0]
    response.stream = _bounded_stream_class(module_name)(response.stream, _Meter(events), decoder)


def bounded_hooks() -> dict[str, list[Any]]:
    """The event hooks that bound every response of an async httpx (or httpx2) client."""
    return {"request": [_identity], "response": [_bound]}


def http_module() -> Any:
    """The HTTP library the SDKs use here: httpx2 where it is installed, else httpx."""
    for name in ("httpx2", "httpx"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError("neither httpx2 nor httpx is installed")


def http_client_for(client_class: Any | None = None, **kwargs: Any) -> Any:
    """An async HTTP client whose responses are bounded: ``client_class`` (an SDK's
    DefaultAsyncHttpxClient, with its defaults) or the library's own AsyncClient."""
    cls = client_class or http_module().AsyncClient
    return cls(event_hooks=bounded_hooks(), **kwargs)
