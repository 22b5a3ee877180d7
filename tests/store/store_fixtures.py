"""Helpers for store tests: a problem directory with a run in output/, written through the state models."""

from __future__ import annotations

import shutil
from pathlib import Path

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import (
    BestResult,
    BranchManifest,
    Context,
    Decision,
    GpuInfo,
    IterState,
    MasterState,
    RunSettings,
    Strategy,
    TuneOutcome,
)

REPO = Path(__file__).resolve().parents[2]


def copy_problem(name: str, parent: Path) -> Path:
    target = parent / name
    shutil.copytree(REPO / "problems" / name, target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


def snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = None if p.is_dir() else p.read_bytes()
    return out


def write_context(layout: RunLayout, cases: list[str] | None = None, dry_run: bool = False) -> None:
    write_model(
        layout.context,
        Context(
            problem_name=layout.problem_dir.name,
            problem_dir=str(layout.problem_dir),
            description="",
            boundary_signature="const float* A, float* C",
            scalars={"N": 4},
            buffers=[],
            grid=(1, 1, 1),
            reference_type="cuda",
            reference_file="ref_kernel.cu",
            tolerance=1e-4,
            cases=cases or [],
            gpu=GpuInfo(),
            settings=RunSettings(
                max_iter=3, max_depth=1, n_strategies=2, provider="replay", model="m", dry_run=dry_run
            ),
        ),
    )


def write_branch(
    layout: RunLayout,
    name: str,
    runs: list[TuneOutcome | None],
    *,
    parent: str | None = None,
    status: str = "done",
    created_at: float = 0.0,
    best: BestResult | None = None,
    stop_reason: str | None = "plateau",
    actions: list[str] | None = None,
) -> None:
    """A branch with one decided iteration per entry of ``runs`` (None: an iteration without a tuning run);
    ``actions``, when given, the decision taken after each."""
    branch = layout.branch(name)
    write_model(
        branch.manifest,
        BranchManifest(
            name=name,
            title=f"{name} title",
            strategy=Strategy(name=name, title=name, description="d"),
            parent=parent,
            depth=0 if parent is None else 1,
            status=status,  # type: ignore[arg-type]
            iterations_done=len(runs),
            best=best,
            stop_reason=stop_reason,
            created_at=created_at,
        ),
    )
    for i, run in enumerate(runs, start=1):
        it = branch.iteration(i)
        write_model(
            it.state,
            IterState(
                branch=name,
                index=i,
                status="decided",
                run=run,
                decision=Decision(action=actions[i - 1], reason="r") if actions else None,  # type: ignore[arg-type]
                kernel_path=str(it.kernel.relative_to(layout.output)),
                spec_path=str(it.spec.relative_to(layout.output)),
            ),
        )


def tuned(ms: float, **more: object) -> TuneOutcome:
    return TuneOutcome(ran=True, best_ms=ms, speedup=10.0 / ms, reference_ms=10.0, best_config={"TILE": 16}, **more)


def write_master(layout: RunLayout, phase: str = "finished") -> None:
    write_model(layout.master, MasterState(phase=phase))  # type: ignore[arg-type]
