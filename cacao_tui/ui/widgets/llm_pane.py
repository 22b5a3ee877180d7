"""The LLM tab: the calls of the selection in a table, and the selected call in full.

While a call of the selection is in flight its reply shows above the table as it streams
in (the tail of the text and of the reasoning, tokens so far, tokens/s, elapsed time), or
the wait before its retry; it goes away when the call's record arrives.
"""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from cacao_tui.llm.progress import CallProgress
from cacao_tui.llm.usage import cost_words
from cacao_tui.ui.disk import LLMCallView
from cacao_tui.ui.formatting import fmt_cost, fmt_count
from cacao_tui.ui.widgets.scroll_pane import ScrollPane
from cacao_tui.ui.widgets.table_sync import KeyTable
from cacao_tui.ui.widgets.text_line import TextLine

MESSAGE_CHARS = 6_000  # per message shown; the rest is cut with a note
ROLE_STYLES = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
LIVE_LINES = 8  # of the streaming reply's tail shown
COLUMNS = (
    ("node", "node"),
    ("idx", "#"),
    ("in", "in"),
    ("cached", "cached"),
    ("out", "out"),
    ("secs", "s"),
    ("cost", "$"),
    ("note", "note"),
)


def _cut(text: str, limit: int = MESSAGE_CHARS) -> Text:
    if len(text) <= limit:
        return Text(text)
    out = Text(text[:limit])
    out.append(f"\n… {len(text) - limit:,} more characters in the record file", style="dim italic")
    return out


def call_row(call: LLMCallView) -> tuple[object, ...]:
    if call.error:
        note = Text("error", style="red")
    elif call.tool_calls:
        note = Text(f"{len(call.tool_calls)} tool call(s)")
    else:
        note = Text(call.stop_reason or "")
    return (
        call.node,
        str(call.index),
        fmt_count(call.input_tokens),
        fmt_count(call.cached_tokens) if call.cached_tokens else "-",
        fmt_count(call.output_tokens),
        f"{call.latency_s:.1f}",
        fmt_cost(call.cost_usd),
        note,
    )


def call_detail(call: LLMCallView) -> RenderableType:
    parts: list[RenderableType] = []
    head = Text()
    head.append(f"{call.node} #{call.index}", style="bold")
    if call.model:
        head.append(f" · {call.model}")
    head.append(f" · {call.input_tokens:,} in")
    if call.cached_tokens:
        head.append(f" ({call.cached_tokens:,} cached)")
    head.append(f" / {call.output_tokens:,} out")
    if call.reasoning_tokens:
        head.append(f" ({call.reasoning_tokens:,} reasoning)")
    head.append(f" · {call.latency_s:.1f} s · {cost_words(fmt_cost(call.cost_usd), call.provider)}")
    if call.reasoning_effort:
        head.append(f" · reasoning {call.reasoning_effort}")
    if call.retries:
        head.append(f" · {call.retries} retries", style="yellow")
    head.append(f"\n{call.path}", style="dim")
    parts.append(head)
    if call.error:
        parts.append(Text(f"error: {call.error}", style="bold red"))
    for note in call.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    if call.tools:
        parts.append(Text("tools offered: " + ", ".join(call.tools), style="dim"))
    for message in call.messages:
        role = str(message.get("role", "?"))
        parts.append(Text(f"── {role} ──", style=f"bold {ROLE_STYLES.get(role, '')}"))
        content = message.get("content", "")
        parts.append(_cut(content if isinstance(content, str) else json.dumps(content, indent=1)))
        for tc in message.get("tool_calls") or []:
            if isinstance(tc, dict):
                parts.append(_tool_call(tc))
    if call.reasoning:
        parts.append(Text("── reasoning ──", style="bold magenta"))
        thinking = _cut(call.reasoning)
        thinking.stylize("dim italic")
        parts.append(thinking)
    parts.append(Text("── response ──", style="bold green"))
    parts.append(_cut(call.response_text) if call.response_text else Text("(no text)", style="dim"))
    for tc in call.tool_calls:
        parts.append(_tool_call(tc))
    return Group(*parts)


def _tool_call(tc: dict[str, object]) -> Text:
    args = tc.get("arguments", tc.get("input", {}))
    text = Text()
    text.append(f"→ {tc.get('name', '?')}", style="bold yellow")
    text.append("(")
    text.append_text(_cut(json.dumps(args, indent=1, ensure_ascii=False) if not isinstance(args, str) else args, 2000))
    text.append(")")
    if tc.get("error"):
        text.append(f"  error: {tc['error']}", style="red")
    return text


def live_view(p: CallProgress) -> Text:
    """A call in flight: what has streamed so far, or the wait before its retry."""
    text = Text()
    if p.phase == "waiting":
        text.append(f"⏸ {p.node} #{p.index} · waiting {p.wait_s or 0:.0f} s before a retry", style="bold yellow")
        if p.message:
            text.append(f"\n{_flat(p.message, 300)}", style="yellow")
        return text
    rate = f" · {p.tokens_per_s:.0f} tok/s" if p.tokens_per_s else ""
    text.append(f"▶ {p.node} #{p.index} · streaming · ~{fmt_count(p.output_tokens)} tokens{rate} · {p.elapsed_s:.1f} s",
                style="bold green")  # fmt: skip
    if p.tool_chars:
        text.append(f" · {fmt_count(p.tool_chars)} chars of tool calls", style="green")
    if p.reasoning_tail and not p.text_tail:
        text.append("\n" + _tail(p.reasoning_tail), style="dim italic")
    if p.text_tail:
        text.append("\n" + _tail(p.text_tail))
    return text


def _tail(text: str, lines: int = LIVE_LINES) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _flat(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


class LLMPane(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._calls: dict[str, LLMCallView] = {}
        self._shown: str | None = None

    def compose(self) -> ComposeResult:
        yield TextLine("LLM calls", id="llm-header", classes="pane-header")
        yield Static("", id="llm-live")
        yield KeyTable(COLUMNS, id="llm-calls")
        with ScrollPane(id="llm-detail-scroll"):
            yield Static("", id="llm-detail")

    def show_calls(self, calls: list[LLMCallView], scope: str) -> None:
        table = self.query_one("#llm-calls", KeyTable)
        self._calls = {c.key: c for c in calls}
        table.sync({c.key: call_row(c) for c in calls})
        tokens_in = sum(c.input_tokens for c in calls)
        tokens_out = sum(c.output_tokens for c in calls)
        self.query_one("#llm-header", TextLine).update(
            f"LLM · {scope} · {len(calls)} call(s) · {fmt_count(tokens_in)} in / {fmt_count(tokens_out)} out"
        )
        if not calls:
            self._show(None)
        elif self._shown not in self._calls:
            table.move_cursor(row=len(calls) - 1)
            self._show(calls[-1].key)

    def show_live(self, progress: CallProgress | None) -> None:
        """The selection's call in flight, or nothing (its record has arrived)."""
        live = self.query_one("#llm-live", Static)
        live.display = progress is not None
        if progress is not None:
            live.update(live_view(progress))

    def _show(self, key: str | None) -> None:
        if key == self._shown:
            return
        self._shown = key
        detail = self.query_one("#llm-detail", Static)
        call = self._calls.get(key) if key else None
        detail.update(call_detail(call) if call else Text("No LLM calls recorded here yet.", style="dim"))

    @on(DataTable.RowHighlighted, "#llm-calls")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._show(event.row_key.value)
