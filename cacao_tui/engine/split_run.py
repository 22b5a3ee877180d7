"""The engine's side of a split run (``--phase``, ``--gpu-submit``; store/phases.py): which
branches a phase left waiting, and what a GPU phase in another process did.

A --gpu-submit run waits while the GPU phase runs elsewhere (a batch job), then reads its
files back; the tunings and profiles it finds are told to this run's front end and run log as
the events the GPU phase would have emitted here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from cacao_tui.engine.branch_files import RunFiles
from cacao_tui.engine.events import EventBus, NewBest, ProfileMetrics, TuningFinished
from cacao_tui.store.state import BestResult

Step = tuple[str, int, str]  # (branch, iteration, "run" | "profile")


class _Waits(Protocol):
    waiting: str | None


def waiting_branches(workers: Mapping[str, _Waits], tasks: Mapping[str, asyncio.Task[None]]) -> dict[str, str]:
    """Branch -> the phase its ended worker waits for."""
    out: dict[str, str] = {}
    for name, worker in workers.items():
        task = tasks.get(name)
        if worker.waiting is not None and task is not None and task.done():
            out[name] = worker.waiting
    return out


def gpu_steps_done(files: RunFiles) -> set[Step]:
    """The tunings and profiles on disk (a submitted GPU phase adds some)."""
    done: set[Step] = set()
    for name in files.names():
        branch = files.branch(name)
        for i in branch.indices():
            st = branch.peek_state(i)
            if st is not None and st.run is not None:
                done.add((name, i, "run"))
            if st is not None and st.profile is not None:
                done.add((name, i, "profile"))
    return done


def tell_gpu_results(bus: EventBus, files: RunFiles, run_best: BestResult | None, new: set[Step]) -> None:
    """The events of the steps ``new`` that a GPU phase in another process took."""
    told_best: set[str] = set()
    for name, index, step in sorted(new):
        st = files.branch(name).peek_state(index)
        if st is None:
            continue
        if step == "run" and st.run is not None:
            bus.emit(TuningFinished(branch=name, iteration=index, outcome=st.run))
            m = files.peek_manifest(name)
            best = m.best if m is not None else None
            if best is not None and best.branch == name and best.iteration == index and name not in told_best:
                told_best.add(name)
                of_run = run_best is not None and (run_best.branch, run_best.iteration) == (name, index)
                bus.emit(NewBest(branch=name, iteration=index, time_ms=best.time_ms, speedup=best.speedup,
                                 score=best.score, run_best=of_run))  # fmt: skip
        elif step == "profile" and st.profile is not None:
            bus.emit(ProfileMetrics(branch=name, iteration=index, outcome=st.profile))
