"""A subscriber of the run's events that writes the original CACAO's run.log, token_usage.json
and run_meta.json under output/ (formats in store/original_files.py).

The lines are the ones ``--no-ui`` prints (the launcher hands in that renderer, so the two
never differ), each stamped ``[HH:MM:SS]`` with the original's mark, secrets redacted, and
appended as they happen: ``tail -f output/run.log`` follows a run whatever its front end (the
app, ``--no-ui``, a run the home screen started). A resumed run appends to it, as the
original's ``--resume`` does.
"""

from __future__ import annotations

from collections.abc import Callable

from cacao_tui.engine.events import (
    BranchStatusChanged,
    LLMCallEvent,
    LogLine,
    NewBest,
    RunFinished,
    RunStarted,
    _Event,
)
from cacao_tui.llm.redaction import redact
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.original_files import (
    RunMeta,
    TokenUsage,
    append_run_log,
    log_lines,
    write_run_meta,
    write_token_usage,
)

Render = Callable[[_Event], "str | None"]


def level_of(event: _Event) -> str:
    """The original's log level of an event's line: its mark in run.log."""
    if isinstance(event, LogLine):
        return event.level if event.level in ("warning", "error") else "info"
    if isinstance(event, NewBest):
        return "success"
    if isinstance(event, BranchStatusChanged) and event.status == "failed":
        return "error"
    if isinstance(event, RunFinished):
        return {"ok": "success", "interrupted": "warning", "budget": "warning"}.get(event.status, "error")
    return "info"


class OriginalFiles:
    def __init__(self, layout: RunLayout, render: Render) -> None:
        self.output = layout.output
        self.render = render
        self.calls = 0

    def __call__(self, event: _Event) -> None:
        if isinstance(event, RunStarted):
            write_run_meta(self.output, RunMeta(model=event.model, provider=event.provider))
            self.calls = event.llm_calls  # a resumed run goes on counting from its earlier calls
            self._usage(event.input_tokens, event.output_tokens)
        elif isinstance(event, LLMCallEvent):
            self.calls += 1
            self._usage(event.run.input_tokens, event.run.output_tokens)
        text = self.render(event)
        if text:
            append_run_log(self.output, log_lines(redact(text), level_of(event), event.ts))

    def _usage(self, prompt: int, completion: int) -> None:
        usage = TokenUsage(
            api_calls=self.calls, prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
        )
        write_token_usage(self.output, usage)
