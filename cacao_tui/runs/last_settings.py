"""The settings of a problem's last run (its first ``run_started`` event), to run it again."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from cacao_tui.engine.events import RunStarted, parse_event
from cacao_tui.runs.launcher import RunOptions
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.phases import read_phase_state

HEAD_BYTES = 256 * 1024


def last_run_started(problem_dir: Path) -> RunStarted | None:
    path = RunLayout(problem_dir).run_log
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        head = os.pread(fd, HEAD_BYTES, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    for raw in head.split(b"\n"):
        if b'"run_started"' in raw:
            with contextlib.suppress(ValueError):
                event = parse_event(raw.decode("utf-8", errors="replace"))
                if isinstance(event, RunStarted):
                    return event
    return None


def options_like_last_run(problem_dir: Path, *, resume: bool = False) -> RunOptions:
    """The run dialog's preset: what the last run was started with (what its log records); a
    resume of a split run whose last phase left work for the other runs that phase (--phase)."""
    started = last_run_started(problem_dir)
    state = read_phase_state(RunLayout(problem_dir)) if resume else None
    phase = state.next_phase if state is not None else None
    if started is None:
        return RunOptions(resume=resume, phase=phase)
    return RunOptions(
        provider=started.provider,
        model=None if started.provider == "replay" else started.model,
        strategies=started.n_strategies,
        max_iter=started.max_iter,
        max_depth=started.max_depth,
        gpus=list(started.gpus),
        budget_usd=started.budget_usd,
        dry_run=started.dry_run,
        resume=resume,
        phase=phase,
    )
