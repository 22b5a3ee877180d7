"""``--no-clean``: a fresh run in the same output/, the earlier run kept beside it in ``output/earlier_N/``.

The original's ``--no-clean`` skips cleaning output/ and starts the new run in it: the new
run overwrites the earlier one's context, strategies, analysis, run.log and
final_results.json, and its branches join the earlier ones. Ours keeps output/ too, and
loses nothing: the earlier run's files move, as they are, into ``output/earlier_N/`` (N the
next free number; a rename inside the same directory, so nothing is copied), and the new
run starts fresh beside them. The hand-seeded ``reference_time.json`` stays where it is (the
new run's denominator). Each run's account stays its own: ``--best`` shows the new run; an
earlier one's folder is a complete output/ of its own, read in place or moved back.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cacao_tui.store.layout import RunLayout

EARLIER = re.compile(r"^earlier_(\d+)\Z")
KEPT_IN_PLACE = frozenset({"reference_time.json"})  # the speedup denominator: the new run's too


def holds_a_run(layout: RunLayout) -> bool:
    """output/ holds a run's state (its master, context or branches), not just seeds or a launch log."""
    return layout.master.exists() or layout.context.exists() or bool(layout.branch_names())


def set_aside(layout: RunLayout) -> Path | None:
    """Move the earlier run's files in output/ to ``output/earlier_N/``; None when there is no run to move.

    Links are moved as links (a rename never follows one); ``earlier_*`` folders of runs set
    aside before stay where they are, so N grows with each ``--no-clean`` run.
    """
    if not holds_a_run(layout):
        return None
    out = layout.output
    taken = [int(m.group(1)) for p in out.iterdir() if (m := EARLIER.match(p.name))]
    for n in range(max(taken, default=0) + 1, max(taken, default=0) + 101):
        target = out / f"earlier_{n}"
        try:
            target.mkdir()
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - a hundred concurrent set-asides under one run lock cannot happen
        raise OSError(f"{out}: no free earlier_N name")
    for entry in sorted(out.iterdir(), key=lambda p: p.name):
        if entry == target or entry.name in KEPT_IN_PLACE or EARLIER.match(entry.name):
            continue
        os.rename(entry, target / entry.name)
    return target
