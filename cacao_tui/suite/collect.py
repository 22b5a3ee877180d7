"""``cacao collect DIR...``: one row per problem from its output/ — best speedup, best
time, run time, branches, tokens, cost, and where its GPU jobs ran — as a terminal table,
CSV and Markdown.

The best comes from final_results.json, or the branches of a run that did not finish
(``store.results.load_results``, the same rule as ``cacao --best``); tokens, cost, run time
and placements from the run log (``output/run.jsonl``), read with a size cap.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from cacao_tui.llm.usage import ILLUSTRATIVE, is_illustrative
from cacao_tui.store.atomic import write_text_atomic
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results
from cacao_tui.store.results_export import csv_cell, md_text
from cacao_tui.store.run_lock import run_is_live
from cacao_tui.store.state import INTERRUPTED
from cacao_tui.suite.collect_runs import FACT_COLUMNS, RunFacts, run_facts
from cacao_tui.ui.formatting import safe_text
from ktt.capped_read import finite_number, iter_lines_capped, parse_json
from ktt.terminal_text import safe_line

MAX_RUN_LOG_BYTES = 256 * 1024 * 1024
BASE_COLUMNS = (
    "problem", "status", "best speedup", "best ms", "run time s", "branches", "tokens", "cost usd", "ran on"
)  # fmt: skip
COLUMNS = (*BASE_COLUMNS, *FACT_COLUMNS)  # then the original's columns (suite/collect_runs.py)


@dataclass
class Row:
    problem: str
    status: str = "no run"
    speedup: float | None = None
    best_ms: float | None = None
    run_s: float | None = None
    branches: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    ran_on: list[str] = field(default_factory=list)
    facts: RunFacts = field(default_factory=RunFacts)  # the original's columns
    illustrative: bool = False  # a replay's recorded usage: nothing was spent

    def cells(self) -> list[str]:
        return [
            self.problem,
            self.status,
            "" if self.speedup is None else f"{self.speedup:.2f}",
            "" if self.best_ms is None else f"{self.best_ms:.4g}",
            "" if self.run_s is None else f"{self.run_s:.1f}",
            str(self.branches),
            str(self.tokens),
            f"{self.cost_usd:.4f}" + (f" ({ILLUSTRATIVE})" if self.illustrative else ""),
            " ".join(self.ran_on),
            *self.facts.cells(),
        ]


@dataclass
class _LogFacts:
    first_ts: float | None = None
    last_ts: float | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    placements: list[str] = field(default_factory=list)
    finished: str | None = None
    provider: str | None = None
    local: str | None = None  # where a run on this machine's GPUs ran ("local:GPU0"), from its run_started


def _count(value: object) -> int:
    """A token count from the log: a non-negative whole number, else 0 (a mistyped field is not a crash)."""
    number = finite_number(value)
    return int(number) if number is not None and 0 <= number < 1e18 else 0


def _read_log(path: Path) -> _LogFacts:
    """Facts from the run log: a regular file (never a FIFO or a link), read up to its cap."""
    facts = _LogFacts()
    try:
        lines = iter_lines_capped(path, MAX_RUN_LOG_BYTES)
    except OSError:
        return facts
    for raw in lines:
        try:
            event = parse_json(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(event, dict):
            continue
        ts = finite_number(event.get("ts"))
        if ts is not None:
            facts.first_ts = ts if facts.first_ts is None else facts.first_ts
            facts.last_ts = ts
        kind = event.get("type")
        if kind == "llm_call":
            run = event.get("run") if isinstance(event.get("run"), dict) else {}  # the run's totals so far
            facts.tokens = _count(run.get("input_tokens")) + _count(run.get("output_tokens"))
            facts.cost_usd = max(0.0, finite_number(run.get("cost_usd")) or 0.0)
        elif kind == "run_started":
            facts.provider = safe_line(event.get("provider"), 40)
            gpus = event.get("gpus") if isinstance(event.get("gpus"), list) else []
            facts.local = "no GPU (dry run)" if event.get("dry_run") else " ".join(
                f"local:GPU{_count(g)}" for g in gpus[:64]) or None  # fmt: skip
        elif kind == "job_placed":
            where = safe_line(f"{event.get('host', '?')}:GPU{event.get('gpu', '?')}", 80)
            if where not in facts.placements and len(facts.placements) < 64:
                facts.placements.append(where)
        elif kind == "run_finished":
            facts.finished = safe_line(event.get("status"), 40)
        elif kind == "run_started":  # a --resume's part: how the run ended is said after it, if at all
            facts.finished = None
    return facts


def collect_row(problem_dir: Path, experiment: str = "") -> Row:
    layout = RunLayout(problem_dir)
    row = Row(problem_dir.name)
    loaded = load_results(layout)
    row.facts = run_facts(problem_dir, loaded, experiment)
    facts = _read_log(layout.run_log)
    results = loaded.results
    if facts.finished is None and facts.first_ts is not None:  # its log's last part has no end
        facts.finished = "running" if run_is_live(problem_dir) else INTERRUPTED  # else its process died
    if results is not None:
        row.status = facts.finished or ("finished" if results.complete else "unfinished")
        if results.dry_run:
            row.status += " (dry run)"
        if results.best is not None:
            row.best_ms = results.best.time_ms
            row.speedup = results.best.speedup
        row.branches = results.total_branches or len(results.branches)
        if results.tokens:
            row.tokens = _count(results.tokens.get("input")) + _count(results.tokens.get("output"))
        if results.cost_usd is not None:
            row.cost_usd = results.cost_usd
    elif facts.finished:
        row.status = facts.finished
    if not row.tokens:
        row.tokens = facts.tokens
    if not row.cost_usd:
        row.cost_usd = facts.cost_usd
    if facts.first_ts is not None and facts.last_ts is not None:
        row.run_s = facts.last_ts - facts.first_ts
    row.ran_on = facts.placements or ([facts.local] if facts.local else [])  # a cluster's placements, else local
    row.illustrative = is_illustrative(facts.provider) or (results is not None and results.illustrative_usage)
    return row


def render_table(rows: list[Row]) -> str:
    table = [list(COLUMNS)] + [[safe_text(c) for c in r.cells()] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table)


def to_csv(rows: list[Row]) -> str:
    """The rows as CSV; every cell neutralised for spreadsheets (``csv_cell``): a directory name, a
    status or a host starting with ``=``, ``+``, ``-`` or ``@`` is text, never a formula."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow([csv_cell(c) for c in r.cells()])
    return buf.getvalue()


def to_markdown(rows: list[Row]) -> str:
    def cell(text: str) -> str:
        return md_text(csv_cell(text))

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(c) for c in r.cells()) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def write_tables(rows: list[Row], prefix: Path) -> tuple[Path, Path]:
    """``PREFIX.csv`` and ``PREFIX.md``, each written atomically."""
    csv_path, md_path = prefix.with_name(prefix.name + ".csv"), prefix.with_name(prefix.name + ".md")
    write_text_atomic(csv_path, to_csv(rows))
    write_text_atomic(md_path, to_markdown(rows))
    return csv_path, md_path
