"""SIGKILL at many points of a run, then --resume: the run completes, no decided iteration
is redone, every JSON file parses, and no branch is created twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults, IterState
from tests.engine.conftest import ROOT

# The five branches of the session, and the polish of the run's best (b1-tiling under the FAKE tuner's times).
EXPECTED = {"b1-tiling", "b1-tiling.1-vec-dbuf", "b1-tiling.2-vec-smem", "b2-strip", "b3-quad", "b1-tiling.polish"}


def harness(problem: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tests.engine.harness", str(problem), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=240,
    )


def decided_iterations(layout: RunLayout) -> dict[tuple[str, int], float]:
    out = {}
    for name in layout.branch_names():
        b = layout.branch(name)
        for i in b.iteration_indices():
            st = read_model(b.iteration(i).state, IterState)
            if st.decision is not None:
                out[(name, i)] = st.started_at
    return out


def all_json_parses(output: Path) -> None:
    for path in output.rglob("*.json"):
        json.loads(path.read_text())  # raises on a torn file


@pytest.mark.parametrize("kill_after", [2, 5, 9, 17, 25, 40, 60, 80, 97, 120, 140, 150])
def test_sigkill_then_resume_completes(mmul_dir: Path, kill_after: int) -> None:
    first = harness(mmul_dir, "--kill-after", str(kill_after))
    assert first.returncode == -9, first.stderr[-2000:]
    layout = RunLayout(mmul_dir)
    all_json_parses(layout.output)
    before = decided_iterations(layout)

    second = harness(mmul_dir, "--resume")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "FINISHED ok" in second.stdout
    all_json_parses(layout.output)
    assert set(layout.branch_names()) == EXPECTED
    after = decided_iterations(layout)
    for key, started in before.items():
        assert after[key] == started, f"decided iteration {key} was redone"
    for name in EXPECTED:
        m = read_model(layout.branch(name).manifest, BranchManifest)
        assert m.status in ("done", "stopped"), (name, m.status)
    final = read_model(layout.final_results, FinalResults)
    assert final.best is not None and {b.name for b in final.branches} == EXPECTED
