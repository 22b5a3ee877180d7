"""A call in progress: its reply as it streams in, or the wait before a retry.

The tracked wrapper turns an adapter's stream deltas into ``CallProgress`` snapshots, at
most a few per second per call, and hands them to ``on_progress`` (the engine makes them
events: the app's LLM tab shows the reply as it arrives, the headless renderer a line now
and then). A snapshot carries the tail of the text, not all of it, so its size is bounded
however long the reply grows.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from cacao_tui.llm.provider import StreamDelta
from cacao_tui.llm.types import CallKey

TAIL_CHARS = 1500  # of the reply text (and of the reasoning) a snapshot carries
EVERY_S = 0.25  # snapshots of one call at most this often (the first at once)
CHARS_PER_OUTPUT_TOKEN = 4.0  # a streaming token count is an estimate until the usage arrives


class CallProgress(BaseModel):
    """One snapshot of a call: ``streaming`` (the reply so far) or ``waiting`` (for a retry,
    ``wait_s`` seconds, ``message`` says why)."""

    branch: str | None = None
    iteration: int | None = None
    node: str
    index: int
    phase: Literal["streaming", "waiting"] = "streaming"
    elapsed_s: float = 0.0  # since the call got its slot
    output_tokens: int = 0  # estimated from the characters so far
    tokens_per_s: float = 0.0
    text_chars: int = 0
    reasoning_chars: int = 0
    tool_chars: int = 0
    text_tail: str = ""
    reasoning_tail: str = ""
    wait_s: float | None = None
    message: str | None = None

    @property
    def key(self) -> CallKey:
        return CallKey(self.branch, self.iteration, self.node, self.index)


OnProgress = Callable[[CallProgress], None]


class StreamMeter:
    """Counts one attempt's stream and reports snapshots through ``report``."""

    def __init__(self, key: CallKey, started: float, report: OnProgress | None) -> None:
        self.key = key
        self.started = started
        self.report = report
        self._text = ""
        self._reasoning = ""
        self._text_chars = self._reasoning_chars = self._tool_chars = 0
        self._first: float | None = None
        self._last_report = 0.0

    def restart(self) -> None:
        """A new attempt: what the last one streamed is gone."""
        self._text = self._reasoning = ""
        self._text_chars = self._reasoning_chars = self._tool_chars = 0
        self._first = None

    def __call__(self, delta: StreamDelta) -> None:
        now = time.monotonic()
        if self._first is None:
            self._first = now
        self._text_chars += len(delta.text)
        self._reasoning_chars += len(delta.reasoning)
        self._tool_chars += delta.tool_chars
        self._text = (self._text + delta.text)[-TAIL_CHARS:]
        self._reasoning = (self._reasoning + delta.reasoning)[-TAIL_CHARS:]
        if self.report is not None and (now - self._last_report >= EVERY_S or self._last_report == 0.0):
            self._last_report = now
            self.report(self.snapshot(now))

    def snapshot(self, now: float | None = None) -> CallProgress:
        now = time.monotonic() if now is None else now
        chars = self._text_chars + self._reasoning_chars + self._tool_chars
        tokens = int(chars / CHARS_PER_OUTPUT_TOKEN)
        streaming_for = now - self._first if self._first is not None else 0.0
        return CallProgress(
            branch=self.key.branch,
            iteration=self.key.iteration,
            node=self.key.node,
            index=self.key.index,
            elapsed_s=now - self.started,
            output_tokens=tokens,
            tokens_per_s=tokens / streaming_for if streaming_for > 0.05 else 0.0,
            text_chars=self._text_chars,
            reasoning_chars=self._reasoning_chars,
            tool_chars=self._tool_chars,
            text_tail=self._text,
            reasoning_tail=self._reasoning,
        )

    def waiting(self, wait_s: float, message: str) -> None:
        if self.report is not None:
            snap = self.snapshot()
            self.report(snap.model_copy(update={"phase": "waiting", "wait_s": wait_s, "message": message}))
