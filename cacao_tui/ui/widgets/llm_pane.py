"""The LLM tab: the calls of the selection in a table, and the selected call in full."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from cacao_tui.ui.disk import LLMCallView
from cacao_tui.ui.formatting import fmt_cost, fmt_count
from cacao_tui.ui.widgets.scroll_pane import ScrollPane
from cacao_tui.ui.widgets.table_sync import KeyTable
from cacao_tui.ui.widgets.text_line import TextLine

MESSAGE_CHARS = 6_000  # per message shown; the rest is cut with a note
ROLE_STYLES = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
COLUMNS = (
    ("node", "node"),
    ("idx", "#"),
    ("in", "in"),
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
    head.append(
        f" · {call.input_tokens:,} in / {call.output_tokens:,} out · {call.latency_s:.1f} s · {fmt_cost(call.cost_usd)}"
    )
    if call.retries:
        head.append(f" · {call.retries} retries", style="yellow")
    head.append(f"\n{call.path}", style="dim")
    parts.append(head)
    if call.error:
        parts.append(Text(f"error: {call.error}", style="bold red"))
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


class LLMPane(Vertical):
    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._calls: dict[str, LLMCallView] = {}
        self._shown: str | None = None

    def compose(self) -> ComposeResult:
        yield TextLine("LLM calls", id="llm-header", classes="pane-header")
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
