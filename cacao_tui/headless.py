"""The --no-ui renderer: one line per state change, tuning progress throttled, a final table.

Every LLM call gets a line when it ends (tokens in, cached, out, reasoning, time, tokens/s),
and a call still streaming after ``LLM_PROGRESS_EVERY_S`` gets a progress line that often.

With --json it prints every event as one JSON line instead. It is a subscriber of the same
event stream as the Textual app, and keeps no state the engine does not send. Text from
problem files and the model is printed terminal-safe (escape sequences, NUL, bidi controls
shown escaped; see ``cacao_tui.ui.formatting.safe_text``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import IO

from cacao_tui.engine.events import (
    BranchAdded,
    BranchRemoved,
    BranchStatusChanged,
    DecisionMade,
    IterationStatusChanged,
    LLMCallEvent,
    LLMCallProgress,
    LogLine,
    MasterPhase,
    NewBest,
    ProfileMetrics,
    RunFinished,
    RunStarted,
    TuningFinished,
    TuningProgress,
    _Event,
)
from cacao_tui.llm.usage import cost_words
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results, render_results
from cacao_tui.ui.formatting import safe_event, safe_json_line, safe_text

PROGRESS_EVERY_S = 2.0
LLM_PROGRESS_EVERY_S = 10.0


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _silence(out: IO[str]) -> None:
    """Point the closed stream's descriptor at /dev/null, so nothing written later (the exit's own
    flush included) meets the broken pipe again."""
    try:
        fd = out.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _caller(branch: str | None, iteration: int | None) -> str:
    """Who made an LLM call, as a line starts: "b1-tiling #2", a branch alone, or the master."""
    return f"{branch} #{iteration}" if branch and iteration else (branch or "master")


def _due(last: dict, key: object, every_s: float) -> bool:
    """Whether a throttled line for ``key`` may be printed now (and note that it was)."""
    now = time.monotonic()
    if now - last.get(key, 0.0) < every_s:
        return False
    last[key] = now
    return True


class HeadlessRenderer:
    def __init__(self, out: IO[str] | None = None, *, json_lines: bool = False, verbose: bool = False) -> None:
        self.out = out or sys.stdout
        self.json_lines = json_lines
        self.verbose = verbose
        self._progress_at: dict[object, float] = {}
        self._llm_progress_at: dict[object, float] = {}
        self.finished: RunFinished | None = None
        self.reader_gone = False

    def print_line(self, text: str) -> None:
        """Write one line (or a block of lines); any control character left in it is escaped.

        When the reader has gone (``| head``), the lines stop and the run goes on: a stop asked
        for then (SIGTERM, Ctrl-C) must not die on the closed pipe before it reaches the engine.
        """
        if self.reader_gone:
            return
        try:
            self.out.write(safe_text(text, keep_newlines=True) + "\n")
            self.out.flush()
        except BrokenPipeError:
            self.reader_gone = True
            _silence(self.out)

    def __call__(self, event: _Event) -> None:
        if self.json_lines:
            self.print_line(safe_json_line(event.model_dump_json()))
            if isinstance(event, RunFinished):
                self.finished = event
            return
        text = self.render(safe_event(event))
        if text:
            self.print_line(text)

    def render(self, e: _Event) -> str | None:
        if isinstance(e, RunStarted):
            gpu = "dry run (no GPU)" if e.dry_run else f"GPU {','.join(map(str, e.gpus))} {e.gpu_name or ''} ({e.arch})"
            if e.phase == "llm":
                gpu = f"the model's phase (no GPU; compile checks for {e.arch})"
            elif e.phase == "gpu":
                gpu += " · the GPU phase (no LLM call)"
            what = "resuming" if e.resumed else "starting"
            spent = ""
            if e.resumed and e.llm_calls:
                tokens = f"{e.input_tokens}+{e.output_tokens} tokens"
                spent = f" · so far {e.llm_calls} LLM calls, {tokens}, {cost_words(f'${e.cost_usd:.4f}', e.provider)}"
            # With --path-budget each root-to-leaf path has that many iterations; max_iter is unused.
            budget = f"path budget {e.path_budget} iterations" if e.path_budget else f"{e.max_iter} iterations"
            return (
                f"cacao: {what} {e.problem} · {e.provider}/{e.model} · {gpu.strip()} · "
                f"{e.n_strategies} strategies, {budget}, depth {e.max_depth}{spent}"
            )
        if isinstance(e, MasterPhase):
            return f"master: {e.phase}" + (f" ({e.message})" if e.message else "")
        if isinstance(e, BranchAdded):
            parent = f" from {e.parent}" if e.parent else ""
            return f"+ {e.branch}{parent}: {e.title} [{e.status}]"
        if isinstance(e, BranchStatusChanged):
            reason = f" — {e.reason}" if e.reason else ""
            return f"{e.branch}: {e.status} ({e.iterations_done}/{e.max_iter}){reason}"
        if isinstance(e, IterationStatusChanged):
            return f"{e.branch} #{e.iteration}: {e.status}" + (f" — {e.message}" if e.message else "")
        if isinstance(e, TuningProgress):
            if not _due(self._progress_at, (e.branch, e.iteration), PROGRESS_EVERY_S):
                return None
            p = e.progress
            budget = f"/{p.budget_s:.0f}" if p.budget_s else ""
            return (
                f"{e.branch} #{e.iteration}: tuning {e.phase} {p.evaluated}/{p.space_size} evaluated, "
                f"{p.valid} valid, best {_ms(p.best_ms)} [{p.elapsed_s:.0f}{budget} s]"
            )
        if isinstance(e, TuningFinished):
            r = e.outcome
            if not r.ran:
                return f"{e.branch} #{e.iteration}: {r.message or 'not run'}"
            fails = ", ".join(f"{k} {v}" for k, v in sorted(r.by_status.items()) if k != "ok")
            return (
                f"{e.branch} #{e.iteration}: tuned: best {_ms(r.best_ms)} ({_x(r.speedup)}), "
                f"{r.valid}/{r.evaluated} valid" + (f"; {fails}" if fails else "")
            )
        if isinstance(e, ProfileMetrics):
            if not e.outcome.ran:
                return None
            return f"{e.branch} #{e.iteration}: profile: {e.outcome.roofline}"
        if isinstance(e, DecisionMade):
            d = e.decision
            extra = " (configuration only next)" if d is not None and d.skip_implement else ""
            summary = f"\n  {e.branch} #{e.iteration}: {d.iteration_summary}" if d and d.iteration_summary else ""
            return f"{e.branch} #{e.iteration}: decide → {e.action}{extra}: {e.reason}{summary}"
        if isinstance(e, BranchRemoved):
            return f"- {e.branch}: deleted (moved to {e.trash})"
        if isinstance(e, NewBest):
            star = "new run best" if e.run_best else "new branch best"
            return f"★ {star}: {e.branch} #{e.iteration} {_ms(e.time_ms)} ({_x(e.speedup)})"
        if isinstance(e, LogLine):
            if e.level == "debug" and not self.verbose:
                return None
            where = f"{e.branch}" + (f" #{e.iteration}" if e.iteration else "") + ": " if e.branch else ""
            tag = "" if e.level == "info" else f"{e.level}: "
            return f"{where}{tag}{e.message}"
        if isinstance(e, LLMCallEvent):
            c = e.call
            where = _caller(c.branch, c.iteration)
            self._llm_progress_at.pop(c.key, None)
            if c.error:
                return f"{where}: LLM call {c.node}#{c.index} failed: {c.error}"
            u = c.usage
            cached = f" ({u.cached_tokens:,} cached)" if u.cached_tokens else ""
            thought = f" ({u.reasoning_tokens:,} reasoning)" if u.reasoning_tokens else ""
            answer = c.answer_s or c.latency_s  # the answering attempt on the wire, not the wait for a slot
            rate = f", {u.output_tokens / answer:.0f} tok/s" if answer >= 0.5 and u.output_tokens else ""
            retries = f", {c.retries} retries" if c.retries else ""
            return (
                f"{where}: LLM {c.node}#{c.index}: {u.input_tokens:,} in{cached} / {u.output_tokens:,} out{thought}, "
                f"{c.latency_s:.1f} s{rate}{retries}"
            )
        if isinstance(e, LLMCallProgress):
            p = e.progress
            if p.phase != "streaming" or p.elapsed_s < LLM_PROGRESS_EVERY_S:
                return None  # a wait is printed as the retry's log line
            if not _due(self._llm_progress_at, p.key, LLM_PROGRESS_EVERY_S):
                return None
            where = _caller(p.branch, p.iteration)
            rate = f", {p.tokens_per_s:.0f} tok/s" if p.tokens_per_s else ""
            return f"{where}: LLM {p.node}#{p.index} streaming: ~{p.output_tokens:,} tokens{rate}, {p.elapsed_s:.0f} s"
        if isinstance(e, RunFinished):
            self.finished = e
            lines: list[str] = []
            if e.final_results:
                layout = RunLayout(Path(e.final_results).parent.parent)
                loaded = load_results(layout)
                if loaded.results is not None and loaded.results.branches:
                    lines += ["", render_results(loaded, layout, verdict=False)]  # the verdict is the last line
            lines.append("")
            lines.append(
                f"run {e.status}"
                + (f": {e.message}" if e.message else "")
                + (f" — {e.final_results}" if e.final_results and e.status != "waiting" else "")
            )
            return "\n".join(lines)
        return None
