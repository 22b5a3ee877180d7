"""The original's defaults and exit statuses on the command line (docs/compatibility.md):
``--path-budget`` with ``--max-iter`` warns that max-iter is ignored, the header shows the path
budget, CERIT's default model is the original's, ``--best`` with no results exits 0."""

from __future__ import annotations

import io
import sys
import types
from pathlib import Path

import pytest

from cacao_tui.cli import ENGINE_MODULE, main
from cacao_tui.engine.events import RunStarted
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.llm.registry import PROVIDERS
from cacao_tui.run_request import RunRequest

REPO = Path(__file__).resolve().parents[2]


class _FakeEngine(types.ModuleType):
    """The engine module's seam (cli.load_engine): records the request, runs nothing."""

    def __init__(self) -> None:
        super().__init__(ENGINE_MODULE)
        self.calls: list[RunRequest] = []

    def main(self, request: RunRequest) -> int:
        self.calls.append(request)
        return 0


def _started(**changes: object) -> RunStarted:
    base = dict(problem="mmul", problem_dir="/p", provider="replay", model="replay", gpus=[0], dry_run=True,
                max_iter=3, max_depth=2, n_strategies=4)  # fmt: skip
    return RunStarted(**{**base, **changes})


def test_path_budget_with_max_iter_warns_that_max_iter_is_ignored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, engine)
    mmul = str(REPO / "problems" / "mmul")
    assert main(["--dir", mmul, "--no-ui", "--dry-run", "--path-budget", "6", "--max-iter", "3"]) == 0
    err = capsys.readouterr().err
    assert "cacao: warning: --max-iter 3 is ignored with --path-budget 6" in err
    assert engine.calls[-1].path_budget == 6
    assert main(["--dir", mmul, "--no-ui", "--dry-run", "--path-budget", "6"]) == 0
    assert main(["--dir", mmul, "--no-ui", "--dry-run", "--max-iter", "3"]) == 0
    assert "ignored" not in capsys.readouterr().err


def test_the_header_shows_the_path_budget_instead_of_max_iter() -> None:
    out = io.StringIO()
    HeadlessRenderer(out)(_started(path_budget=6))
    HeadlessRenderer(out)(_started())
    first, second = out.getvalue().splitlines()
    assert "4 strategies, path budget 6 iterations, depth 2" in first and "3 iterations" not in first
    assert "4 strategies, 3 iterations, depth 2" in second


def test_cerit_default_model_is_the_originals() -> None:
    assert next(p for p in PROVIDERS if p.name == "cerit").default_model == "glm-5.2"


def test_best_without_results_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = tmp_path / "p"
    problem.mkdir()
    (problem / "problem.yaml").write_text("name: p\n")
    assert main(["--dir", str(problem), "--best", "--no-ui"]) == 0
    assert "has not been run yet" in capsys.readouterr().out
    assert sorted(p.name for p in problem.iterdir()) == ["problem.yaml"]  # nothing written
