"""A run's state read back whole before ``--resume`` writes anything (docs/SECURITY.md, round 4).

Everything under output/ is anyone's text by the time a run continues in it. Each state file a
resumed run will read goes once through the one reader of run state (``store.atomic.read_model``:
a regular file, no link on the way, within its cap, parsed as its pydantic model, whose names,
paths and numbers are checked where they are declared: store/layout.py, ktt/checked_numbers.py).
The first file that does not pass is a ``StateFileError``, one line naming the file and field,
and the run is refused (exit 2) before its first write, instead of failing, or writing where a
name points, half way through.
"""

from __future__ import annotations

from cacao_tui.store.atomic import StateFileError, read_model, read_model_or_none
from cacao_tui.store.layout import ITER_DIR, RunLayout, is_branch_name
from cacao_tui.store.state import BranchConfig, BranchManifest, Context, IterState, MasterState, PoolState

MAX_ITERATION_DIRS = 100_000  # iterN directories looked at in one branch (check_contained bounds the whole)


def check_run_state(layout: RunLayout) -> None:
    """Read every state file of the run in ``layout``; StateFileError at the first that is unusable."""
    read_model_or_none(layout.context, Context)
    read_model_or_none(layout.master, MasterState)
    read_model_or_none(layout.pool, PoolState)
    if not layout.branches.is_dir():
        return
    for entry in sorted(layout.branches.iterdir()):
        if not (entry / "branch.json").exists() and not (entry / "branch.json").is_symlink():
            continue  # not a branch (the engine makes none without its branch.json)
        if not is_branch_name(entry.name):
            raise StateFileError(entry, "not a branch name: a run names its branch directories itself")
        _check_branch(layout, entry.name)


def _check_branch(layout: RunLayout, name: str) -> None:
    branch = layout.branch(name)
    manifest = read_model(branch.manifest, BranchManifest)
    if manifest.name != name:
        raise StateFileError(branch.manifest, f"name: {manifest.name!r} is not its directory's name {name!r}")
    read_model_or_none(branch.config, BranchConfig)
    seen = 0
    for entry in sorted(branch.root.iterdir()):
        match = ITER_DIR.match(entry.name)
        if match is None or len(entry.name) > 12:
            continue
        seen += 1
        if seen > MAX_ITERATION_DIRS:
            raise StateFileError(branch.root, f"more than {MAX_ITERATION_DIRS:,} iteration directories")
        state = read_model_or_none(entry / "state.json", IterState)
        if state is not None and (state.branch != name or state.index != int(match.group(1))):
            where = f"{state.branch!r} #{state.index} is not {name!r} #{match.group(1)}"
            raise StateFileError(entry / "state.json", f"branch, index: {where}")
