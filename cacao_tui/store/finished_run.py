"""Whether ``--resume`` has anything to continue in output/ (the original exits 1 when it has not).

The original's ``--resume`` collects the branches that have not finished and, finding none,
says "no valid prior run found, or all branches completed" and exits 1. Ours continues a run
in the same cases, and also when the user asked for more between runs: a steering command
queued in a branch's inbox (a message, a revert, a decision, a delete) or a retry (a retry
nonce the branch has not seen). So a run is finished for ``--resume`` only when its master
finished, every branch is in a terminal state, and nothing of that kind is pending.
"""

from __future__ import annotations

from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.inbox import has_pending
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import TERMINAL_BRANCH, BranchConfig, BranchManifest, MasterState


def nothing_to_resume(layout: RunLayout) -> str | None:
    """One line saying why ``--resume`` has nothing to do here, or None when it has (or when
    the state cannot be read: the run itself then reports what is wrong)."""
    try:
        master = read_model_or_none(layout.master, MasterState)
        if master is None or master.phase != "finished":
            return None
        names = layout.branch_names()
        for name in names:
            b = layout.branch(name)
            m = read_model_or_none(b.manifest, BranchManifest)
            if m is None or m.status not in TERMINAL_BRANCH or has_pending(b, m.applied):
                return None
            cfg = read_model_or_none(b.config, BranchConfig)
            if cfg is not None and not cfg.killed and cfg.retry_nonce > m.seen_retry_nonce:
                return None
    except (StateFileError, OSError):
        return None
    return (
        f"{layout.output}: cannot resume: the run there has finished (all {len(names)} branches completed); "
        "run without --resume to start fresh (that run is moved to archive/output_N first), or steer a branch "
        "(--branch NAME --message/--revert/--decision) and then --resume"
    )
