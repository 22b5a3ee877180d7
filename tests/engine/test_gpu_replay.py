"""On a GPU: the mmul demo session replayed through the real command WITHOUT --dry-run. Every
kernel is compiled, validated and tuned by ktt (and profiled where ncu is usable): the retry
story of the "quad" branch is real (its first kernel fails validation everywhere, the retry's
one-line fix validates), the configuration-only iteration re-tunes the same kernel over a wider
space, and the run ends with a valid best faster than the reference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults, IterState
from tests.engine.conftest import ROOT
from tests.pathenv import child_pythonpath

pytestmark = pytest.mark.gpu


def test_the_demo_session_tunes_real_kernels(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui"]
    done = subprocess.run(
        [*argv, "--timeout", "4"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    layout = RunLayout(problem)

    def state(branch: str, i: int) -> IterState:
        return read_model(layout.branch(branch).iteration(i).state, IterState)

    quad1, quad2 = state("b3-quad", 1), state("b3-quad", 2)
    assert quad1.run is not None and quad1.run.ran and quad1.run.best_ms is None
    assert quad1.run.by_status.get("validation_failed", 0) > 0 and quad1.decision and quad1.decision.action == "retry"
    assert quad2.mode == "retry" and quad2.run is not None and quad2.run.best_ms is not None
    tiled2, tiled3 = state("b1-tiling", 2), state("b1-tiling", 3)
    assert tiled3.mode == "configure" and tiled3.run is not None and tiled3.run.best_ms is not None
    assert tiled3.run.space_size > (tiled2.run.space_size if tiled2.run else 0)  # the wider space
    final = read_model(layout.final_results, FinalResults)
    assert final.best is not None and final.best.speedup is not None and final.best.speedup > 1.0
