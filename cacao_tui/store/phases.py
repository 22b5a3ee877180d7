"""Split runs (``--phase``): which phase a run's work waits for, and ``output/phase.json``.

A run can be split between two kinds of process that never need each other's resources: the
model phase (``--phase llm``: every LLM step, where the key and the network are) and the GPU
phase (``--phase gpu``: tuning and profiling, and the device table on first use, where the GPU
is). Each phase does its steps of every branch until each branch's next step needs the other
phase, then ends; ``--resume --phase X`` continues from the files alone, so output/ may travel
between machines in between (every path in the state files is relative to output/).

What a live branch waits for follows from its current iteration's state.json: an authored
kernel that is not yet tuned, or tuned and not yet profiled, waits for the GPU; anything else
(a new iteration, a plan, an authoring, a proposal, a decision) waits for the model.
``output/phase.json`` is written by the engine at the end of each phase (one writer) and says
which phase ran, what waits for which phase and so which phase comes next; a run without
``--phase`` removes it. ``--best``, the app and the home screen read it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cacao_tui.store.atomic import StateFileError, read_model_or_none, write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState

Phase = Literal["llm", "gpu"]
PHASES: tuple[Phase, ...] = ("llm", "gpu")
PHASE_FILE = "phase.json"
WHAT: dict[str, str] = {"llm": "the model", "gpu": "the GPU"}


class WaitsForPhase(Exception):
    """The next step needs the other phase: this process's part ends here (not an error)."""

    def __init__(self, phase: Phase) -> None:
        super().__init__(f"waits for {WHAT[phase]}")
        self.phase: Phase = phase


class PhaseState(BaseModel):
    """output/phase.json: how the last phase of a split run ended."""

    model_config = ConfigDict(extra="ignore")
    schema_version: int = 1
    phase: Phase  # the phase that ran last
    ended_at: float = Field(default_factory=time.time)
    waiting: dict[str, Phase] = Field(default_factory=dict)  # live branch -> what its next step needs
    master: Phase | None = None  # the master's next step (None: it has dispatched its branches)
    polish: bool = False  # every branch has ended; the polish iteration is still to be written

    @property
    def next_phase(self) -> Phase | None:
        """The phase to run next: the GPU's while a branch waits for it, else the model's."""
        if "gpu" in self.waiting.values():
            return "gpu"
        if self.waiting or self.master is not None or self.polish:
            return "llm"
        return None

    def count(self, phase: Phase) -> int:
        return sum(1 for p in self.waiting.values() if p == phase)


def next_step_phase(st: IterState | None) -> Phase:
    """What the next step of a live branch needs, from its current iteration's state (None: a new
    iteration, which starts with the model's steps)."""
    if st is None or st.decision is not None or st.error is not None:
        return "llm"
    authored = st.author is not None and st.author.ok
    return "gpu" if authored and (st.run is None or st.profile is None) else "llm"


def phase_path(layout: RunLayout) -> Path:
    return layout.output / PHASE_FILE


def read_phase_state(layout: RunLayout) -> PhaseState | None:
    """The last phase's account, or None (no split run, or a file that cannot be read)."""
    try:
        return read_model_or_none(phase_path(layout), PhaseState)
    except StateFileError:
        return None


def write_phase_state(layout: RunLayout, state: PhaseState) -> None:
    write_model(phase_path(layout), state)


def clear_phase_state(layout: RunLayout) -> None:
    """A run without --phase: no phase waits any more."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(phase_path(layout))


def shown_dir(problem_dir: Path, cwd: Path | None = None) -> str:
    """The problem directory as a command line should name it: relative to ``cwd`` when inside it."""
    here = Path.cwd() if cwd is None else cwd
    try:
        rel = Path(os.path.relpath(problem_dir, here))
    except ValueError:
        return str(problem_dir)
    return str(rel) if not str(rel).startswith("..") else str(problem_dir)


def phase_command(problem_dir: Path, phase: Phase, cwd: Path | None = None) -> str:
    """The command that runs ``phase`` of the run in ``problem_dir``."""
    return shlex.join(["cacao", "--dir", shown_dir(problem_dir, cwd), "--resume", "--phase", phase])


def _branches(n: int) -> str:
    return f"{n} branch{'es' if n != 1 else ''}"


def waiting_line(state: PhaseState, problem_dir: Path, cwd: Path | None = None) -> str:
    """One line: what waits for which phase, and the command that continues it."""
    nxt = state.next_phase
    if nxt is None:
        return "nothing waits: the run has ended"
    parts = []
    for phase in ("gpu", "llm"):
        n = state.count(phase)  # type: ignore[arg-type]
        if n:
            parts.append(f"{_branches(n)} wait{'s' if n == 1 else ''} for {WHAT[phase]}")
    if state.master is not None:
        parts.append(f"the master waits for {WHAT[state.master]}")
    if state.polish:
        parts.append("the polish iteration waits for the model")
    return f"{'; '.join(parts)}; continue with: {phase_command(problem_dir, nxt, cwd)}"
