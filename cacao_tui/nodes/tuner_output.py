"""An iteration's tuner output, as text: one line per evaluated configuration, then the result.

ktt writes ``tune/results.jsonl`` (one ConfigResult per configuration, as each finishes) and
``tune/summary.json``. This renders them as the log a person would read: what the
``grep_tuner_output`` tool searches, and the failure examples of the landscape summary
(nodes/landscape.py). Reading is bounded: a results file of any size costs at most
MAX_RESULT_BYTES and MAX_RESULT_LINES.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from cacao_tui.store.layout import IterLayout
from ktt.capped_read import iter_lines_capped, read_bytes_capped
from ktt.mismatch import describe as describe_mismatches
from ktt.protocol import ConfigResult, TuneSummary, ValidationReport

MAX_RESULT_BYTES = 32 * 1024 * 1024
MAX_RESULT_LINES = 200_000
MAX_SUMMARY_BYTES = 4 * 1024 * 1024
LINE_CHARS = 400  # one rendered line


def read_results(path: Path) -> list[ConfigResult]:
    """The configurations of a results.jsonl, skipping lines that do not parse (bounded)."""
    out: list[ConfigResult] = []
    for line in _lines(path):
        try:
            out.append(ConfigResult.model_validate_json(line))
        except (ValidationError, ValueError):
            continue
    return out


def _lines(path: Path) -> Iterator[str]:
    try:  # a regular file, not a link, within MAX_RESULT_BYTES; a FIFO is never opened blocking
        lines = iter_lines_capped(path, MAX_RESULT_BYTES)
    except OSError:
        return
    for n, raw in enumerate(lines):
        if n >= MAX_RESULT_LINES:
            return
        yield raw.decode("utf-8", errors="replace")


def read_summary(path: Path) -> TuneSummary | None:
    try:
        return TuneSummary.model_validate_json(read_bytes_capped(path, MAX_SUMMARY_BYTES, follow_links=False))
    except (OSError, ValidationError, ValueError):
        return None


def _short(text: str, limit: int = LINE_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def config_text(config: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def result_line(r: ConfigResult) -> str:
    shape = f" [{r.shape}]" if r.shape != "default" else ""
    head = f"#{r.index}{shape} {r.status}"
    if r.time_ms is not None:
        head += f" {r.time_ms:.4g} ms"
    head += f" ({config_text(r.config)})"
    detail = ""
    if r.diagnostics:
        d = r.diagnostics[0]
        where = f"{d.file}:{d.line}: " if d.line is not None else f"{d.file}: "
        detail = where + d.message
    elif r.validation is not None and (r.validation.reason or r.validation.max_abs_error is not None):
        detail = validation_text(r.validation)
    elif r.error:
        detail = r.error
    return _short(f"{head}: {detail}" if detail else head)


def validation_text(v: ValidationReport) -> str:
    """What went wrong in a validation, with how many elements and a few of them."""
    parts = [v.reason] if v.reason else []
    if v.bad_count and v.checked and not (v.reason and f"{v.bad_count} of {v.checked}" in v.reason):
        parts.append(f"{v.bad_count:,}/{v.checked:,} elements wrong")
    if v.max_abs_error is not None:
        parts.append(f"max abs error {v.max_abs_error:.3g}" + (f" in {v.buffer}" if v.buffer else ""))
    if v.first_bad_index is not None:
        parts.append(f"first bad index {v.first_bad_index}")
    if v.input_set:
        parts.append("on the fresh input set")
    if v.samples:
        parts.append("e.g. " + describe_mismatches(v.samples))
    return "; ".join(parts)


def summary_lines(s: TuneSummary) -> list[str]:
    lines = [
        f"result: {'ok' if s.ok else 'nothing valid'}; {s.valid}/{s.evaluated} configurations valid "
        f"of a space of {s.restricted_size or s.space_size} (strategy {s.strategy})"
    ]
    if s.by_status:
        lines.append("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(s.by_status.items())))
    if s.best is not None and s.best.time_ms is not None:
        best = f"best: {s.best.time_ms:.4g} ms ({config_text(s.best.config)})"
        if s.speedup and s.reference_ms:
            best += f", {s.speedup:.2f}x over the reference ({s.reference_ms:.4g} ms)"
        lines.append(best + ("" if s.confirmed_on_fresh_input else "; not confirmed on fresh inputs"))
    for c in s.cases:
        t = f"{c.time_ms:.4g} ms" if c.time_ms is not None else "-"
        lines.append(f"case {c.name}: {c.status} {t}" + (f" ({c.error})" if c.error else ""))
    if s.floor is not None and s.floor.fraction_of_floor is not None:
        floor = f"physical floor: {s.floor.floor_ms:.4g} ms; best is at {s.floor.fraction_of_floor:.0%} of it"
        if s.floor.bytes and s.floor.bandwidth_gbs:
            floor += f" (at the {s.floor.bandwidth_gbs:,.0f} GB/s copy bandwidth measured afresh in each tuning run)"
        lines.append(floor)
    if s.worker_restarts:
        lines.append(f"GPU worker restarts: {s.worker_restarts}")
    lines += [f"warning: {w}" for w in s.warnings]
    if s.message:
        lines.append(f"message: {s.message}")
    return [_short(line) for line in lines]


def tuner_output(it: IterLayout) -> list[str]:
    """The whole rendered output of an iteration's tuning (empty when it never tuned)."""
    lines = [result_line(r) for r in read_results(it.tune_results)]
    summary = read_summary(it.tune_summary)
    if summary is not None:
        lines += summary_lines(summary)
    return lines

