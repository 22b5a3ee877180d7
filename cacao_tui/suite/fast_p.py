"""fast_p, KernelBench's score, over a set of problems' runs: ``cacao collect --fast-p 0,1,2``.

fast_p is the share of *all* the problems whose kernel is correct and faster than the
reference by more than p: ``count(correct and speedup > p) / n`` (KernelBench's src/score.py).
fast_0 is the share that is correct at all. Here a problem is correct when its run has a best:
a kernel that passed validation on every input set of the problem (five for a problem made by
``cacao import``, ``validation.input_sets``) and is not suspect; a problem with no run, a dry
run, or no valid kernel counts in n and not in the numerator. The speedup is the run's headline
(the geometric mean over the cases, when the problem has cases) against the problem's reference:
for an imported problem, the module's forward in PyTorch eager, timed with CUDA events. A correct
kernel with no baseline (a null in reference_time.json) counts for fast_0 only. Beside fast_p:
the geometric mean speedup of the correct kernels, our usual headline.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from cacao_tui.store.atomic import write_text_atomic
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results
from cacao_tui.ui.formatting import safe_text
from ktt.problem import ProblemError, load_problem

KERNELBENCH_SETS = 5  # KernelBench's correctness trials


class FastPError(ValueError):
    """A --fast-p list that cannot be read; ``str()`` says why."""


def parse_thresholds(text: str) -> list[float]:
    """'0,1,2' or '0,0.5,1.5' -> [0.0, 1.0, 2.0]: distinct, finite, non-negative, in the order given."""
    values: list[float] = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise FastPError(f"expected numbers like 0,1,2, got {part!r}") from None
        if not math.isfinite(value) or value < 0:
            raise FastPError(f"p must be a number >= 0, got {part!r}")
        if value not in values:
            values.append(value)
    if not values:
        raise FastPError("expected numbers like 0,1,2")
    return values


@dataclass(frozen=True)
class Outcome:
    problem: str
    correct: bool
    speedup: float | None
    input_sets: int | None  # how many input sets the problem's validation checks (None: not readable)


def outcome(problem_dir: Path) -> Outcome:
    """Whether the problem's run found a correct kernel, and its speedup over the reference."""
    results = load_results(RunLayout(problem_dir)).results
    try:
        sets: int | None = load_problem(problem_dir).input_sets
    except (ProblemError, OSError):
        sets = None
    if results is None or results.dry_run or results.best is None:
        return Outcome(problem_dir.name, False, None, sets)
    best = results.best
    speedup = results.speedup if results.speedup is not None else (best.score if results.cases else best.speedup)
    if speedup is not None and not (math.isfinite(speedup) and speedup > 0):
        speedup = None
    return Outcome(problem_dir.name, True, speedup, sets)


def fast_p(outcomes: list[Outcome], p: float) -> float:
    if not outcomes:
        return 0.0
    hits = sum(1 for o in outcomes if o.correct and (p == 0 or (o.speedup is not None and o.speedup > p)))
    return hits / len(outcomes)


def count(outcomes: list[Outcome], p: float) -> int:
    return round(fast_p(outcomes, p) * len(outcomes))


def geomean_correct(outcomes: list[Outcome]) -> float | None:
    speedups = [o.speedup for o in outcomes if o.correct and o.speedup is not None]
    if not speedups:
        return None
    return math.exp(sum(math.log(s) for s in speedups) / len(speedups))


def _p_text(p: float) -> str:
    return f"{p:g}"


def render(outcomes: list[Outcome], thresholds: list[float]) -> str:
    n = len(outcomes)
    lines = [f"fast_p over {n} problem(s): correct on every input set and faster than the reference by more than p"]
    lines.append("  " + "   ".join(f"fast_{_p_text(p)} = {fast_p(outcomes, p):.3f} ({count(outcomes, p)}/{n})"
                                   for p in thresholds))  # fmt: skip
    correct = [o for o in outcomes if o.correct]
    g = geomean_correct(outcomes)
    lines.append(f"  geomean speedup of the {len(correct)} correct: " + (f"{g:.3f}x" if g is not None else "none"))
    fewer = [o.problem for o in outcomes if o.input_sets is not None and o.input_sets < KERNELBENCH_SETS]
    if fewer:
        lines.append(f"  note: {len(fewer)} problem(s) validate on fewer than {KERNELBENCH_SETS} input sets "
                     f"(KernelBench's count): {', '.join(fewer[:8])}{' ...' if len(fewer) > 8 else ''}")  # fmt: skip
    return "\n".join(lines)


def to_json(outcomes: list[Outcome], thresholds: list[float]) -> str:
    doc = {
        "problems": len(outcomes),
        "fast_p": {_p_text(p): fast_p(outcomes, p) for p in thresholds},
        "geomean_speedup_correct": geomean_correct(outcomes),
        "outcomes": [asdict(o) for o in outcomes],
    }
    return json.dumps(doc, indent=2) + "\n"


# -- the hook in cacao collect and cacao suite (cacao_tui.suite.cli) ----------------------------


def add_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fast-p", metavar="P,...", help="also print KernelBench's fast_p for each p, e.g. 0,1,2")


def flag_error(spec: str | None) -> str | None:
    """The one line for a --fast-p that cannot be read (checked before anything runs), or None."""
    if spec is None:
        return None
    try:
        parse_thresholds(spec)
    except FastPError as exc:
        return f"--fast-p: {exc}"
    return None


def report(spec: str | None, problems: list[Path], prefix: Path) -> None:
    """With --fast-p: print fast_p over ``problems`` and write PREFIX.fast_p.json."""
    if spec is None:
        return
    thresholds = parse_thresholds(spec)
    outcomes = [outcome(p) for p in problems]
    print(safe_text(render(outcomes, thresholds)))
    path = prefix.with_name(prefix.name + ".fast_p.json")
    write_text_atomic(path, to_json(outcomes, thresholds))
    print(safe_text(f"fast_p: wrote {path}"))
