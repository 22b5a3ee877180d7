"""The tuning landscape of an iteration, summarised for propose and decide.

Not the tuner's lines in evaluation order but what they add up to: the fastest
configurations, for each tune parameter the value the best configuration has, the best
time each tried value reached and whether the best value sits at the edge of the range
tuning.yaml declares (then the space is clipped: widen it, a configuration-only iteration),
and the failures by status with one example each (with the validation detail: how many
elements were wrong and a few of them). Bounded by the results reader's caps.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

from cacao_tui.nodes.branch_queries import value_key
from cacao_tui.nodes.tuner_output import config_text, read_results, read_summary, result_line, summary_lines
from cacao_tui.store.layout import IterLayout
from ktt.problem import ProblemError
from ktt.problem.yaml_io import parse_yaml_mapping
from ktt.protocol import ConfigResult

MAX_VALUES = 12  # values listed per parameter


def _declared(spec: str | None) -> dict[str, list[object]]:
    return dict(_parsed_params(spec)) if spec else {}


@functools.lru_cache(maxsize=16)  # propose and decide read the same iteration's tuning.yaml
def _parsed_params(spec: str) -> dict[str, list[object]]:
    try:
        data = parse_yaml_mapping(spec, "tuning.yaml")
    except ProblemError:
        return {}
    params = data.get("tune_params")
    if not isinstance(params, dict):
        return {}
    return {str(k): list(v) if isinstance(v, list) else [v] for k, v in params.items()}


def _ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "-"


def edge_note(name: str, best: object, declared: list[object]) -> str:
    """'' or why the best value of ``name`` says the range should move."""
    numeric = [v for v in declared if isinstance(v, int | float) and not isinstance(v, bool)]
    if len(numeric) < 2 or best not in numeric or set(numeric) <= {0, 1}:
        return ""  # a 0/1 switch has no larger or smaller value to try
    low, high = min(numeric), max(numeric)  # type: ignore[type-var]
    shown = ", ".join(map(str, sorted(numeric)))  # type: ignore[type-var]
    if best == high:
        return f"AT THE UPPER EDGE of the declared values [{shown}]: try larger ones"
    if best == low:
        return f"AT THE LOWER EDGE of the declared values [{shown}]: try smaller ones"
    return ""


def parameter_lines(rows: list[ConfigResult], declared: dict[str, list[object]]) -> list[str]:
    ok = [r for r in rows if r.status == "ok" and r.time_ms is not None]
    if not ok:
        return []
    best = min(ok, key=lambda r: r.time_ms or 0.0)
    out = []
    for name in dict.fromkeys(k for r in rows for k in r.config):
        by_value: dict[object, float] = {}
        for r in ok:
            v = r.config.get(name)
            if r.time_ms is not None and (v not in by_value or r.time_ms < by_value[v]):
                by_value[v] = r.time_ms
        values = sorted(by_value, key=value_key)
        times = ", ".join(f"{v}: {_ms(by_value[v])}" for v in values[:MAX_VALUES])
        if len(values) > MAX_VALUES:
            times += f", ... ({len(values) - MAX_VALUES} more)"
        value = best.config.get(name)
        edge = edge_note(name, value, declared.get(name, []))
        single = " (the only value declared)" if len(declared.get(name, [])) == 1 else ""
        line = f"- {name} = {value} in the best{single}; best time per value: {times}"
        out.append(line + (f"; {edge}" if edge else ""))
    return out


_summaries: dict[tuple[object, ...], str] = {}  # the last few, by their files' identity (see below)
MAX_KEPT = 16


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def landscape_summary(it: IterLayout, spec: str | None, top: int) -> str:
    """The landscape of iteration ``it`` (its primary case), as a prompt shows it. Propose and
    decide both show it: the second is the first's text while the tuner's files are unchanged."""
    key = (str(it.root), _stamp(it.tune_results), _stamp(it.tune_summary), spec, top)
    if key[1] is not None and key in _summaries:
        return _summaries[key]
    text = _landscape(it, spec, top)
    if key[1] is not None:
        if len(_summaries) >= MAX_KEPT:
            _summaries.pop(next(iter(_summaries)))
        _summaries[key] = text
    return text


def _landscape(it: IterLayout, spec: str | None, top: int) -> str:
    rows = read_results(it.tune_results)
    summary = read_summary(it.tune_summary)
    if not rows:
        return "(no tuner output: the kernel was not tuned in this iteration)"
    shapes = list(dict.fromkeys(r.shape for r in rows))
    primary = [r for r in rows if r.shape == shapes[0]]
    note = f" (case {shapes[0]}; the others: {', '.join(shapes[1:])})" if len(shapes) > 1 else ""
    ok = sorted((r for r in primary if r.status == "ok" and r.time_ms is not None), key=lambda r: r.time_ms or 0.0)
    lines = [f"{len(ok)} of {len(primary)} evaluated configurations valid{note}."]
    if ok:
        lines.append(f"Fastest {min(top, len(ok))}:")
        lines += [f"  {i}. {_ms(r.time_ms)}  {config_text(r.config)}" for i, r in enumerate(ok[:top], 1)]
        if len(ok) > 1:
            spread = (ok[-1].time_ms or 0) / (ok[0].time_ms or 1)
            lines.append(f"  (slowest valid: {_ms(ok[-1].time_ms)}, {spread:.2f}x the fastest)")
        params = parameter_lines(primary, _declared(spec))
        if params:
            lines.append("Each parameter (its value in the best configuration, the best time each value reached):")
            lines += params
    failures = Counter(r.status for r in primary if r.status != "ok")
    if failures:
        lines.append("Failures: " + ", ".join(f"{k} {v}" for k, v in failures.most_common()))
        for status in failures:
            first = next(r for r in primary if r.status == status)
            lines.append(f"  e.g. {result_line(first)}")
    if summary is not None:
        lines += [f"tuner: {line}" for line in summary_lines(summary)]
    return "\n".join(lines)
