"""A streamed reply gathered within the reply caps while it arrives (docs/SECURITY.md, "The LLM layer").

Before, every adapter appended each piece until the stream ended and the caps of
``llm/bounds.py`` applied only afterwards: a server that streamed without end held gigabytes. A
``ReplyGatherer`` keeps no more than the caps can use, as the pieces come: the text up to the text
cap, the reasoning up to the same, tool-call arguments while text and arguments together fit the
reply cap (a call that does not fit is dropped whole, and the model is told, as ``cap_reply``
does). Once more has arrived than any cap could keep (``full``), the adapter stops reading and
closes the stream; the reply is what was kept, cut and noted. What it keeps is within the caps,
so ``cap_reply`` later finds nothing more to cut. Signed provider data (Anthropic thinking
blocks, Gemini thought signatures) is never cut, only counted: past the bound, reading stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from cacao_tui.llm.types import ChatResponse, ToolCall
from cacao_tui.llm.wire_bounds import reply_in_progress
from cacao_tui.settings import DEFAULTS

MARKER_ROOM = 400  # characters kept free at the end of a cut text for the note that says so
MAX_NAME_CHARS = 256  # a tool call's name or id as kept (the tools' names are short words)
MAX_TOOL_CALLS = 1000  # tool calls of one reply told apart (more: they share one slot)


@dataclass
class ReplyGatherer:
    text_cap: int = DEFAULTS.llm_reply_text_chars
    cap: int = DEFAULTS.llm_reply_max_chars
    received: int = 0  # characters of every kind, kept or not
    text_received: int = 0
    reasoning_received: int = 0
    stopped: str | None = None  # why reading stopped early (a cap, the wire bound)
    _text: list[str] = field(default_factory=list)
    _text_kept: int = 0
    _reasoning_kept: int = 0
    _args_kept: int = 0
    _args: dict[object, int] = field(default_factory=dict)  # call key -> characters kept
    _dropped: dict[object, int] = field(default_factory=dict)  # call key -> characters seen

    @property
    def stop_at(self) -> int:
        """More than this has arrived: no cap can keep any of what follows."""
        return self.cap + 2 * self.text_cap

    @property
    def full(self) -> bool:
        return self.stopped is not None or self.received > self.stop_at

    def text(self, piece: str) -> str:
        """The part of ``piece`` of answer text to keep ('' when the text cap is reached)."""
        self.received += len(piece)
        self.text_received += len(piece)
        room = max(0, min(self.text_cap, self.cap - self._args_kept) - self._text_kept)
        kept = piece[:room]
        self._text_kept += len(kept)
        return kept

    def reasoning(self, piece: str) -> str:
        """The part of ``piece`` of reasoning text to keep (within the text cap, on its own)."""
        self.received += len(piece)
        self.reasoning_received += len(piece)
        kept = piece[: max(0, self.text_cap - self._reasoning_kept)]
        self._reasoning_kept += len(kept)
        return kept

    def signed(self, chars: int) -> None:
        """Signed data kept whole (a thinking block's text, a signature): counted only."""
        self.received += chars

    def arguments(self, call: object, piece: str) -> bool:
        """Whether to keep ``piece`` of the arguments of ``call`` (False: the call is dropped whole)."""
        return self.argument_chars(call, len(piece))

    def argument_chars(self, call: object, chars: int) -> bool:
        """``arguments`` for ``chars`` characters of ``call``'s arguments (a whole call parsed by an SDK)."""
        self.received += chars
        if call in self._dropped:
            self._dropped[call] += chars
            return False
        if self._args_kept + self._text_kept + chars > self.cap:
            kept = self._args.pop(call, 0)
            self._args_kept -= kept
            self._dropped[call] = kept + chars
            return False
        self._args[call] = self._args.get(call, 0) + chars
        self._args_kept += chars
        return True

    def dropped(self, call: object) -> str | None:
        """The tool error of a call whose arguments did not fit, or None."""
        if call not in self._dropped:
            return None
        return (
            f"the arguments were at least {self._dropped[call]:,} characters and did not fit the reply cap of "
            f"{self.cap:,}; the tool was not run. Write large files in parts (write_file, then edit_file)."
        )

    def stop(self, why: str) -> None:
        """Reading stopped before the stream's end (``why``: the wire bound, say); a stop of our
        own (``full``: the wire was told to stop) keeps its first reason."""
        if not self.full:
            self.stopped = why

    @contextlib.contextmanager
    def reading(self) -> Iterator[ReplyGatherer]:
        """While the stream is read: once ``full``, the wire stops (llm/wire_bounds.py)."""
        token = reply_in_progress.set(self)
        try:
            yield self
        finally:
            reply_in_progress.reset(token)

    def note(self) -> str | None:
        """What was cut, for the call's record; None when the reply was kept whole."""
        cut_text = self.text_received > self._text_kept
        cut_reasoning = self.reasoning_received > self._reasoning_kept
        if not (cut_text or cut_reasoning or self._dropped or self.full):
            return None
        parts = [f"the reply was cut while it streamed: {self.received:,} characters received "
                 f"({self.text_received:,} of text)"]  # fmt: skip
        if cut_text:
            parts.append(f"its text was cut to {self._text_kept:,} characters")
        if cut_reasoning:
            parts.append(f"its reasoning to {self._reasoning_kept:,}")
        if self._dropped:
            parts.append(f"{len(self._dropped)} tool call(s) over the cap of {self.cap:,} not run")
        if self.stopped is not None:
            parts.append(self.stopped)
        elif self.full:
            parts.append(f"reading stopped past {self.stop_at:,} characters (more than the caps can keep)")
        return "; ".join(parts)

    def finish(self, response: ChatResponse) -> ChatResponse:
        """``response`` (built from what was kept) with the cut marked in its text and noted."""
        note = self.note()
        if note is None:
            return response
        update: dict[str, object] = {"cut": note}
        if self.text_received > self._text_kept or self.full:
            marker = f"\n[cacao: reply cut here: {note}]"[:MARKER_ROOM]
            update["text"] = response.text[: max(0, self.text_cap - len(marker))] + marker
            if self.full:
                update["stop_reason"] = "max_tokens"  # cut short: what it ends with may be partial
                update["raw_stop_reason"] = "cacao_cut"
        if self.reasoning_received > self._reasoning_kept:
            kept = response.reasoning[: max(0, self.text_cap - 100)]
            update["reasoning"] = kept + f"\n[cacao: reasoning cut at {len(kept):,} characters]"
        return response.model_copy(update=update)


def dropped_call(call_id: str, name: str, error: str) -> ToolCall:
    """A tool call whose arguments were not kept: never run, its error goes back to the model."""
    return ToolCall(id=call_id, name=name, arguments={}, error=error)


async def close_stream(stream: object) -> None:
    """Close an SDK's stream read only in part (its connection goes back, nothing more is read)."""
    for name in ("close", "aclose"):
        method = getattr(stream, name, None)
        if method is not None:
            with contextlib.suppress(Exception):  # closing a stream we gave up on: nothing to report
                await method()
            return
