"""Results to CSV or Markdown (``cacao --dir X --best --export FILE``, and ``e`` in the results view).

CSV: one row per branch (table ``branch``), one per case of the best kernel (table ``case``) and
one per iteration of each branch (table ``iteration``), under one header, so a spreadsheet can
filter by the first column. Markdown: the best result, then the same three tables. Names and
texts come from run files, which are untrusted: cells are one line, pipes escaped, capped,
and neutralised against formula injection (``csv_cell``: a cell starting with ``= + - @``).
The file is written atomically (temp file, then rename).
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from cacao_tui.store.atomic import write_text_atomic
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import LoadedResults
from ktt.reference_times import NO_BASELINE
from ktt.terminal_text import safe_line

FORMATS = {".csv": "csv", ".md": "markdown", ".markdown": "markdown"}
CSV_COLUMNS = (
    "table",
    "branch",
    "case",
    "iteration",
    "status",
    "time_ms",
    "speedup",
    "score",
    "reference_ms",
    "reference_source",
    "best_iteration",
    "iterations",
    "valid",
    "evaluated",
    "budget_s",
    "config",
    "note",
)
MAX_CELL = 200


class ExportError(Exception):
    """An export that cannot be made; the message is one line."""


def export_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ExportError(f"--export: {path.name}: name a .csv or .md file")
    return fmt


# A cell a spreadsheet would read as a formula: =, +, -, @, or a tab or CR before one.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")


def csv_cell(text: str) -> str:
    """``text`` safe in a CSV or Markdown cell that a spreadsheet may open: one line with its control
    characters escaped (a directory name's ESC, BEL or newline is ``\\x1b``, ``\\x07``, ``\\x0a``), at
    most ``MAX_CELL`` characters, and one that starts like a formula gets a leading ``'`` (OWASP's
    advice), so ``=HYPERLINK(...)`` in a model's reason or a directory name stays text. A plain
    number (``-1.5``, ``+3e-5``) is left as it is. Every cell of every table cacao writes goes here."""
    text = safe_line(text, MAX_CELL)
    if text.startswith(_FORMULA_START) and not _NUMBER.match(text):
        return "'" + text
    return text


_MD_ACTIVE = re.compile(r"([\\`\[\]|])")


def md_text(text: str) -> str:
    """``text`` (a ``csv_cell``) inert in Markdown: HTML's ``& < >`` as entities (no tag, no
    ``<https://...>`` autolink) and what opens a link, an image or a code span (``[ ] ` \\``) or
    ends a table cell (``|``) backslash-escaped. So a model's ``<img src=...>``,
    ``![](https://...)`` or ``[x](javascript:...)`` is shown as text: no image is fetched when the
    report is opened, no link can be clicked. Emphasis characters are left: they only style."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_ACTIVE.sub(r"\\\1", text)


def _cell(value: object) -> str:
    if value is None:
        return ""
    return csv_cell(" ".join(str(value).split()))


def _config(config: dict[str, object] | None) -> str:
    return " ".join(f"{k}={v}" for k, v in (config or {}).items())


def result_rows(loaded: LoadedResults) -> list[dict[str, str]]:
    r = loaded.results
    if r is None:
        return []
    rows: list[dict[str, object]] = []
    for b in r.branches:
        rows.append(
            {
                "table": "branch",
                "branch": b.name,
                "status": loaded.shown_status(b.status),
                "time_ms": b.best_ms,
                "speedup": b.speedup,
                "score": b.score,
                "best_iteration": b.best_iteration,
                "iterations": b.iterations,
                "reference_ms": r.reference_ms,
                "reference_source": r.reference_source,
                "note": b.stop_reason,
            }
        )
    if r.best is not None:
        for c in r.best.cases:
            rows.append(
                {
                    "table": "case",
                    "branch": r.best.branch,
                    "case": c.name,
                    "iteration": r.best.iteration,
                    "status": c.status,
                    "time_ms": c.time_ms,
                    "speedup": c.speedup,
                    "reference_ms": c.reference_ms,
                    "reference_source": c.reference_source,
                    "valid": c.valid,
                    "evaluated": c.evaluated,
                    "budget_s": c.budget_s,
                    "config": _config(c.config),
                    "note": c.error,
                }
            )
    for b in r.branches:
        for p in b.timeline:
            rows.append(
                {
                    "table": "iteration",
                    "branch": b.name,
                    "iteration": p.iteration,
                    "status": loaded.shown_iteration_status(p.status),
                    "time_ms": p.time_ms,
                    "speedup": p.speedup,
                    "score": p.score,
                    "note": " ".join(
                        x
                        for x in (p.action, "new best" if p.new_best else "", "superseded" if p.superseded else "")
                        if x
                    ),
                }
            )
    return [{k: _cell(row.get(k)) for k in CSV_COLUMNS} for row in rows]


def render_csv(loaded: LoadedResults) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(result_rows(loaded))
    return out.getvalue()


def _md_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    def esc(cell: str) -> str:
        return md_text(cell) or "-"

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(loaded: LoadedResults, layout: RunLayout) -> str:
    r = loaded.results
    name = md_text(_cell(r.problem_name if r else layout.problem_dir.name))
    lines = [f"# Results: {name}", ""]
    if r is None:
        return "\n".join([*lines, "No results: output/ holds no run.", ""])
    if not r.complete:
        lines += ["*The run had not finished when this was exported.*", ""]
    if r.best is not None:
        b = r.best
        speed = f" ({b.speedup:.3g}× over the reference)" if b.speedup else ""
        score = f", score {b.score:.3g} (geometric mean over the cases)" if b.score is not None else ""
        lines.append(f"**Best:** {b.time_ms:.4g} ms{speed}{score}, branch {md_text(_cell(b.branch))} "
                     f"iteration {b.iteration}")  # fmt: skip
        lines.append(f"configuration: {md_text(_cell(_config(b.config))) or '-'}")
    else:
        lines.append("No valid kernel was timed.")
    if r.reference_ms:
        lines.append(f"reference: {r.reference_ms:.4g} ms ({md_text(_cell(r.reference_source)) or 'measured'})")
    elif r.reference_source == NO_BASELINE:
        lines.append("reference: no baseline (null in reference_time.json): no speedup, no score")
    lines.append("")
    rows = result_rows(loaded)

    def pick(table: str, cols: tuple[str, ...]) -> list[tuple[str, ...]]:
        return [tuple(row[c] for c in cols) for row in rows if row["table"] == table]

    cols = ("branch", "status", "iterations", "time_ms", "speedup", "score", "best_iteration", "note")
    lines += ["## Branches", "", *_md_table(cols, pick("branch", cols)), ""]
    cases = pick("case", ("case", "status", "time_ms", "reference_ms", "reference_source", "speedup", "budget_s",
                          "valid", "evaluated", "config"))  # fmt: skip
    if cases:
        header = ("case", "status", "time_ms", "reference_ms", "source", "speedup", "budget_s", "valid", "evaluated",
                  "config")  # fmt: skip
        lines += ["## Cases of the best kernel", "", *_md_table(header, cases), ""]
    cols = ("branch", "iteration", "status", "time_ms", "speedup", "score", "note")
    iters = pick("iteration", cols)
    if iters:
        lines += ["## Iterations", "", *_md_table(cols, iters), ""]
    return "\n".join(lines)


def export_results(loaded: LoadedResults, layout: RunLayout, path: Path) -> Path:
    """Write the results to ``path`` (.csv or .md), atomically; returns the path written."""
    path = Path(path).expanduser()
    fmt = export_format(path)
    text = render_csv(loaded) if fmt == "csv" else render_markdown(loaded, layout)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ExportError(f"--export: {parent}: no such directory")
    write_text_atomic(path, text)
    return path
