"""Read-only questions an authoring step may ask about this branch and the others.

This branch: an earlier iteration's tuning landscape (the top configurations, one parameter
swept with the others held at the best, failures by status), a search of its tuner output,
the list of its iterations, one iteration's history and its errors. Other branches: the
index of siblings, one branch's log (one line per iteration) and its errors — never another
branch's kernel, so parallel strategies stay independent attempts.

Everything is bounded (rows, hits, characters) and contained: a branch is named only by an
exact name from the run's own list, an iteration only by a number this branch has; no path
is ever built from the model's text. Only decided iterations of other branches are read.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from cacao_tui.nodes.context import BranchDirectory
from cacao_tui.nodes.tuner_output import config_text, read_results, result_line, tuner_output
from cacao_tui.settings import Defaults
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.layout import BRANCH_NAME, BranchLayout, RunLayout
from cacao_tui.store.state import BranchManifest, IterState, TuneOutcome
from ktt.protocol import ConfigResult

MAX_NAME_CHARS = 120
MAX_PATTERN_CHARS = 200
GREP_LINE_CHARS = 300
LANDSCAPE_MODES = ("top", "sweep", "failures")


class QueryError(Exception):
    """A question that cannot be answered as asked; returned to the model as a tool error."""


def cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 60)].rstrip() + f"\n... (cut at {limit:,} characters)"


def fmt_ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "-"


def outcome_line(run: TuneOutcome | None) -> str:
    if run is None:
        return "not tuned"
    if not run.ran:
        if run.message and run.message.startswith("dry run:") and (run.compiled or 0) > 0:
            return "compiled, not run (a dry run)"
        return run.message or "not run"
    if run.best_ms is None:
        return f"no valid configuration ({run.evaluated} evaluated)"
    text = f"{run.best_ms:.4g} ms, {run.valid}/{run.evaluated} valid"
    return text + (f", {run.speedup:.2f}x" if run.speedup else "")


def summary_line(st: IterState) -> str:
    """The one-line story of an iteration: the decision's summary, else what can be read."""
    d = st.decision
    if d is not None and d.iteration_summary.strip():
        return " ".join(d.iteration_summary.split())
    if st.error:
        return f"failed: {' '.join(st.error.split())[:200]}"
    action = f" (decision: {d.action})" if d is not None else ""
    return outcome_line(st.run) + action


def read_state(branch: BranchLayout, index: int) -> IterState | None:
    try:
        return read_model_or_none(branch.iteration(index).state, IterState)
    except StateFileError:
        return None


def read_manifest(branch: BranchLayout) -> BranchManifest | None:
    try:
        return read_model_or_none(branch.manifest, BranchManifest)
    except StateFileError:
        return None


def decided_states(branch: BranchLayout, before: int | None = None) -> list[IterState]:
    out = []
    for i in branch.iteration_indices():
        if before is not None and i >= before:
            continue
        st = read_state(branch, i)
        if st is not None and st.decision is not None:
            out.append(st)
    return out


@dataclass(frozen=True)
class DiskBranches:
    """The run's branches as the run directory holds them (a ``BranchDirectory``)."""

    run: RunLayout

    def names(self) -> list[str]:
        return self.run.branch_names()

    def manifest(self, name: str) -> BranchManifest | None:
        return read_manifest(self.run.branch(name))


def branch_index_lines(
    run: RunLayout, exclude: str | None, rows: int, branches: BranchDirectory | None = None
) -> list[str]:
    """One line per other branch, fastest first: name | status | iterations | best | title."""
    directory = branches if branches is not None else DiskBranches(run)
    entries: list[tuple[tuple[bool, float], str]] = []
    for name in directory.names():
        if name == exclude:
            continue
        m = directory.manifest(name)
        if m is None:
            continue
        best = m.best.time_ms if m.best else None
        speed = f", {m.best.speedup:.2f}x" if m.best and m.best.speedup else ""
        parent = f" (from {m.parent})" if m.parent else ""
        line = (
            f"- {name}{parent} | {m.status} | {m.iterations_done} iterations | "
            f"{'best ' + fmt_ms(best) + speed if best is not None else 'no result yet'} | {m.title}"
        )
        entries.append(((best is None, best or 0.0), line))
    entries.sort(key=lambda e: e[0])
    shown = [line for _, line in entries[: max(0, rows)]]
    if len(entries) > len(shown):
        shown.append(f"- ... and {len(entries) - len(shown)} more (branch_index lists them all)")
    return shown


@dataclass
class BranchQueries:
    """The questions of one authoring step (iteration ``current`` of branch ``name``)."""

    run: RunLayout
    name: str
    current: int
    limits: Defaults
    superseded: frozenset[int] = frozenset()
    branches: BranchDirectory | None = None  # None: read the run directory

    @property
    def branch(self) -> BranchLayout:
        return self.run.branch(self.name)

    # -- this branch ------------------------------------------------------------------------
    def _earlier(self, iteration: int) -> IterState:
        if not isinstance(iteration, int) or not (1 <= iteration < self.current):
            raise QueryError(f"iteration must be a number from 1 to {self.current - 1}")
        st = read_state(self.branch, iteration)
        if st is None:
            raise QueryError(f"iteration {iteration} of this branch has no state")
        return st

    def _results(self, iteration: int, case: str | None) -> tuple[list[ConfigResult], str]:
        self._earlier(iteration)
        rows = read_results(self.branch.iteration(iteration).tune_results)
        if not rows:
            raise QueryError(f"iteration {iteration} has no tuning results (it was not tuned, or tuned nothing)")
        shapes = list(dict.fromkeys(r.shape for r in rows))
        shape = case if case else shapes[0]
        if shape not in shapes:
            raise QueryError(f"no case {case!r} in iteration {iteration}; cases: {', '.join(shapes)}")
        note = f" (case {shape}; others: {', '.join(s for s in shapes if s != shape)})" if len(shapes) > 1 else ""
        return [r for r in rows if r.shape == shape], note

    def tuning_landscape(
        self, iteration: int, mode: str = "top", n: int = 10, param: str | None = None, case: str | None = None
    ) -> str:
        if mode not in LANDSCAPE_MODES:
            raise QueryError(f"mode must be one of {', '.join(LANDSCAPE_MODES)}, not {str(mode)[:40]!r}")
        rows, note = self._results(iteration, case)
        if mode == "top":
            text = self._top(rows, n)
        elif mode == "sweep":
            text = self._sweep(rows, param)
        else:
            text = self._failures(rows)
        return cap(f"iteration {iteration}{note}\n{text}", self.limits.tool_output_chars)

    def _top(self, rows: list[ConfigResult], n: int) -> str:
        ok = sorted((r for r in rows if r.status == "ok" and r.time_ms is not None), key=lambda r: r.time_ms or 0.0)
        if not ok:
            return f"no valid configuration among {len(rows)} evaluated; ask mode 'failures' why"
        shown = ok[: max(1, min(int(n), self.limits.landscape_rows))]
        lines = [f"{i:>3}. {fmt_ms(r.time_ms):>11}  {config_text(r.config)}" for i, r in enumerate(shown, 1)]
        best, worst = ok[0].time_ms or 0.0, ok[-1].time_ms or 0.0
        spread = f"{worst / best:.2f}x" if best else "-"
        lines.append(
            f"{len(ok)}/{len(rows)} valid; fastest {fmt_ms(best)}, slowest valid {fmt_ms(worst)} (spread {spread})"
        )
        return "\n".join(lines)

    def _sweep(self, rows: list[ConfigResult], param: str | None) -> str:
        names = list(dict.fromkeys(k for r in rows for k in r.config))
        if not param or param not in names:
            asked = f"{str(param)[:40]!r} is not a parameter" if param else "sweep needs param"
            raise QueryError(f"{asked}; parameters: {', '.join(names) or '(none)'}")
        ok = [r for r in rows if r.status == "ok" and r.time_ms is not None]
        if not ok:
            return "no valid configuration, so there is no best to hold the other parameters at"
        best = min(ok, key=lambda r: r.time_ms or 0.0)
        others = {k: v for k, v in best.config.items() if k != param}
        line = [r for r in rows if all(r.config.get(k) == v for k, v in others.items())]
        by_value: dict[object, list[ConfigResult]] = {}
        for r in line:
            by_value.setdefault(r.config.get(param), []).append(r)
        held = config_text(others) or "(no other parameters)"
        out = [f"{param} swept with the others at the best ({held}):"]
        for value in sorted(by_value, key=value_key)[: self.limits.landscape_rows]:
            group = by_value[value]
            good = [r.time_ms for r in group if r.status == "ok" and r.time_ms is not None]
            status = ", ".join(f"{k} {v}" for k, v in Counter(r.status for r in group).items())
            out.append(f"  {param}={value}: {fmt_ms(min(good)) if good else 'no valid time'} ({status})")
        evaluated_values = sorted({r.config.get(param) for r in rows}, key=value_key)
        missing = [v for v in evaluated_values if v not in by_value]
        if missing:
            out.append(f"  not evaluated with the others at the best: {', '.join(map(str, missing[:20]))}")
        # Every configuration, grouped by the value (the best and median valid time of each).
        out.append(f"{param} over every configuration (best / median valid time, valid/evaluated):")
        groups: dict[object, list[ConfigResult]] = {}
        for r in rows:
            groups.setdefault(r.config.get(param), []).append(r)
        for value in sorted(groups, key=value_key)[: self.limits.landscape_rows]:
            times = [r.time_ms for r in groups[value] if r.status == "ok" and r.time_ms is not None]
            med = statistics.median(times) if times else None
            out.append(
                f"  {param}={value}: {fmt_ms(min(times)) if times else '-'} / {fmt_ms(med)}"
                f" ({len(times)}/{len(groups[value])})"
            )
        ranked = [v for v in sorted(groups, key=value_key) if any(r.status == "ok" for r in groups[v])]
        if len(ranked) >= 2 and best.config.get(param) in (ranked[0], ranked[-1]):
            out.append(
                f"The best value {param}={best.config.get(param)} is at the edge of the values tried: "
                "consider widening its range in tuning.yaml."
            )
        return "\n".join(out)

    def _failures(self, rows: list[ConfigResult]) -> str:
        counts = Counter(r.status for r in rows)
        out = [f"{len(rows)} configurations: " + ", ".join(f"{k} {v}" for k, v in counts.most_common())]
        for status in counts:
            if status == "ok":
                continue
            first = next(r for r in rows if r.status == status)
            out.append(f"first {status}: {result_line(first)}")
        failing = [r for r in rows if r.status != "ok"]
        if not failing:
            out.append("every configuration passed")
            return "\n".join(out)
        dead: list[str] = []
        for name in dict.fromkeys(k for r in rows for k in r.config):
            groups: dict[object, list[ConfigResult]] = {}
            for r in rows:
                groups.setdefault(r.config.get(name), []).append(r)
            for value, group in sorted(groups.items(), key=lambda kv: value_key(kv[0])):
                if not any(r.status == "ok" for r in group):
                    dead.append(f"{name}={value} ({len(group)} configurations)")
        if dead:
            out.append("values that never gave a valid configuration: " + "; ".join(dead[: self.limits.landscape_rows]))
        else:
            out.append("no single parameter value explains the failures")
        return "\n".join(out)

    def grep_tuner_output(self, iteration: int, text: str) -> str:
        """Lines of the tuner output containing ``text`` (a plain, case-insensitive substring)."""
        self._earlier(iteration)
        if not isinstance(text, str) or not text.strip():
            raise QueryError("text must be a non-empty string (a plain substring, not a regular expression)")
        if len(text) > MAX_PATTERN_CHARS:
            raise QueryError(f"text is longer than {MAX_PATTERN_CHARS} characters")
        lines = tuner_output(self.branch.iteration(iteration))
        if not lines:
            raise QueryError(f"iteration {iteration} has no tuner output (it was not tuned)")
        needle = text.lower()
        hits: list[str] = []
        total = 0
        for n, line in enumerate(lines, 1):
            if needle in line.lower():
                total += 1
                if len(hits) < self.limits.grep_max_hits:
                    hits.append(f"{n}: {line[:GREP_LINE_CHARS]}")
        if not hits:
            return f"no line of iteration {iteration}'s tuner output ({len(lines)} lines) contains {text!r}"
        head = f"{total} matching line(s) of {len(lines)}" + (f", the first {len(hits)}:" if total > len(hits) else ":")
        return cap(head + "\n" + "\n".join(hits), self.limits.tool_output_chars)

    def list_iterations(self) -> str:
        rows = []
        for i in self.branch.iteration_indices():
            if i >= self.current:
                continue
            st = read_state(self.branch, i)
            if st is None:
                continue
            flag = " (superseded by a revert)" if i in self.superseded else ""
            mode = "" if st.mode in ("first", "continue") else f" [{st.mode}]"
            action = st.decision.action if st.decision else st.status
            rows.append(f"- iter {i}{mode}{flag}: {outcome_line(st.run)}; {action} — {summary_line(st)}")
        if not rows:
            return "this branch has no earlier iterations"
        return cap("\n".join(rows), self.limits.tool_output_chars)

    def history(self, iteration: int) -> str:
        st = self._earlier(iteration)
        data: dict[str, Any] = {
            "mode": st.mode,
            "superseded": iteration in self.superseded,
            "plan": st.plan,
            "result": outcome_line(st.run),
            "profile": (st.profile.roofline, st.profile.headline) if st.profile else None,
            "proposal": st.proposal,
            "decision": st.decision.model_dump(exclude_defaults=True) if st.decision else None,
            "error": st.error,
        }
        return cap(json.dumps(data, indent=1, default=str), self.limits.tool_output_chars)

    def errors(self) -> str:
        return cap(_errors_of(self.branch, self.current, with_tuning=True), self.limits.tool_output_chars)

    # -- other branches -----------------------------------------------------------------------
    def _other(self, name: object) -> BranchLayout:
        names = [n for n in self.run.branch_names() if n != self.name]
        if (
            not isinstance(name, str)
            or len(name) > MAX_NAME_CHARS
            or not BRANCH_NAME.match(name)
            or name not in names
        ):
            shown = str(name)[:MAX_NAME_CHARS] if isinstance(name, str) else type(name).__name__
            raise QueryError(f"no other branch named {shown!r}; branches: {', '.join(names) or '(none)'}")
        return self.run.branch(name)

    def branch_index(self) -> str:
        lines = branch_index_lines(self.run, self.name, rows=10_000, branches=self.branches)
        return cap("\n".join(lines) if lines else "there are no other branches", self.limits.tool_output_chars)

    def branch_log(self, name: str) -> str:
        other = self._other(name)
        m = read_manifest(other)
        states = decided_states(other)
        head = f"branch {name}" + (f" — {m.title}: {m.strategy.description}" if m else "")
        if not states:
            return cap(head + "\nno decided iterations yet", self.limits.tool_output_chars)
        superseded = set(m.superseded) if m else set()
        lines = [head]
        for st in states:
            flag = " (superseded)" if st.index in superseded else ""
            lines.append(f"- iter {st.index}{flag}: {summary_line(st)} [{st.decision.action if st.decision else '?'}]")
        return cap("\n".join(lines), self.limits.tool_output_chars)

    def branch_errors(self, name: str) -> str:
        other = self._other(name)
        return cap(f"branch {name}:\n" + _errors_of(other, None, with_tuning=False), self.limits.tool_output_chars)


def value_key(value: object) -> tuple[int, float, str]:
    """Sort key of tune parameter values: numbers in order, then the rest as text."""
    if isinstance(value, bool):
        return (1, 0.0, str(value))
    if isinstance(value, int | float):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _errors_of(branch: BranchLayout, before: int | None, *, with_tuning: bool) -> str:
    """Failed steps, the decisions' error analyses and (for this branch) tuning failures."""
    lines: list[str] = []
    for i in branch.iteration_indices():
        if before is not None and i >= before:
            continue
        st = read_state(branch, i)
        if st is None or (before is None and st.decision is None):
            continue
        if st.error:
            lines.append(f"- iter {i}: step failed: {' '.join(st.error.split())[:400]}")
        if st.author and st.author.compile_failures:
            lines.append(f"- iter {i}: {st.author.compile_failures} failed compile check(s) while authoring")
        ea = st.decision.error_analysis if st.decision else None
        if ea is not None:
            lines.append(f"- iter {i}: {ea.error_type}: cause: {ea.root_cause}; fix: {ea.suggested_fix}")
        if st.run is not None and st.run.by_status:
            failed = {k: v for k, v in st.run.by_status.items() if k != "ok"}
            if failed:
                counts = ", ".join(f"{k} {v}" for k, v in sorted(failed.items()))
                lines.append(f"- iter {i}: tuning failures: {counts}")
        if with_tuning:
            rows = read_results(branch.iteration(i).tune_results)
            seen: set[str] = set()
            for r in rows:
                if r.status != "ok" and r.status not in seen:
                    seen.add(r.status)
                    lines.append(f"  e.g. {result_line(r)}")
    return "\n".join(lines) if lines else "no errors recorded"
