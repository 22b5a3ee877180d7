"""The files the original CACAO writes under output/, in its format, beside our state.

A CACAO user's habits and scripts rely on them: ``tail -f output/run.log``, its
``collect_results.py`` reading ``token_usage.json`` and the run log's timestamps, a look at
``analysis.md`` and ``strategies.json``. Each has one writer (FORMATS.md):

- ``run.log``: the progress lines, ``[HH:MM:SS] <mark> <line>``, appended as they happen;
  written by the run's event subscriber (engine/original_files.py).
- ``token_usage.json``: ``{"api_calls", "prompt_tokens", "completion_tokens",
  "total_tokens"}``; the same subscriber, after every LLM call.
- ``run_meta.json``: ``{"model", "provider"}``; the same subscriber, when the run starts.
- ``analysis.md``: the master's analysis, as text; the master, once.
- ``strategies.json``: ``{"strategies": [{"name", "description", "hypothesis",
  "key_parameters"}], "reasoning"}``; the master, once.

JSON files are written atomically; run.log is appended a line at a time (the original's is a
copy of its stdout, so it is the one file written in place). Nothing here reads them back:
our own state (master.json, run.jsonl, llm/) stays the source of truth.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel

from cacao_tui.store.atomic import write_json_atomic, write_text_atomic

RUN_LOG = "run.log"
TOKEN_USAGE = "token_usage.json"
RUN_META = "run_meta.json"
ANALYSIS = "analysis.md"
STRATEGIES = "strategies.json"
# The original's marks before a log message, by level (utils/log.py's meaning).
MARKS = {"info": "ℹ", "success": "✓", "warning": "⚠", "error": "✗"}
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TokenUsage(BaseModel):
    api_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class RunMeta(BaseModel):
    model: str
    provider: str


class OriginalStrategy(BaseModel):
    name: str
    description: str
    hypothesis: str = ""
    key_parameters: list[str] = []


def log_lines(text: str, level: str = "info", when: float | None = None) -> str:
    """``text`` as the original's log lines: every non-empty line ``[HH:MM:SS] <mark> ...`` (local
    time, as its collector reads it), empty lines kept; ends with a newline."""
    stamp = time.strftime("%H:%M:%S", time.localtime(time.time() if when is None else when))
    mark = MARKS.get(level, "•")
    return "".join(f"[{stamp}] {mark} {line}\n" if line.strip() else "\n" for line in text.split("\n"))


def append_run_log(output: Path, text: str) -> None:
    """Append to output/run.log: never through a link, never blocking on a FIFO someone put there."""
    fd = os.open(output / RUN_LOG, _APPEND, 0o644)
    try:
        os.write(fd, text.encode("utf-8", errors="replace"))
    finally:
        os.close(fd)


def write_token_usage(output: Path, usage: TokenUsage) -> None:
    write_json_atomic(output / TOKEN_USAGE, usage.model_dump())


def write_run_meta(output: Path, meta: RunMeta) -> None:
    write_json_atomic(output / RUN_META, meta.model_dump())


def write_analysis(output: Path, analysis: str) -> None:
    write_text_atomic(output / ANALYSIS, analysis if analysis.endswith("\n") else analysis + "\n")


def write_strategies(output: Path, strategies: Iterable[OriginalStrategy], reasoning: str = "") -> None:
    write_json_atomic(output / STRATEGIES, {"strategies": [s.model_dump() for s in strategies], "reasoning": reasoning})
