"""A multi-case run of the original (a problem with ``cases:``): its per-case table in ``--best``,
``--best --json`` and the app's results view.

The run is written here, in the original's layout as its newer code lays it out (facts from its
tests and utils/cases.py, not copied): each case tuned in ``iterN/case_<name>/`` with KTT's
``results.json``; ``results_summary`` with the primary case's keys flat, ``cases`` (null for a case
that did not run), ``geomean_speedup`` (= its ``speedup``), ``failed_case``, ``worst_case``;
``reference_time.json`` with ``cases``. One branch carries summaries, one only the case folders.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from cacao_tui.cli import main
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results

HERE = Path(__file__).resolve().parent
OLD_RUN = HERE / "problems" / "old_run"
REF = {"big": 800.0, "small": 200.0}  # µs per case


def _summary(best_us: float | None, ref_us: float, config: dict[str, int]) -> dict[str, Any]:
    return {
        "has_success": best_us is not None,
        "num_successful": 3 if best_us else 0,
        "num_total": 4,
        "best_config": config if best_us else None,
        "best_time_us": best_us,
        "reference_time_us": ref_us,
        "speedup": ref_us / best_us if best_us else None,
    }


def _ktt(best_us: float, config: dict[str, int]) -> dict[str, Any]:
    return {"Metadata": {"Device": "NVIDIA H200"}, "Results": [
        {"Status": "Ok", "Configuration": [{"Name": k, "Value": v} for k, v in config.items()],
         "ComputationResults": [{"Duration": best_us}], "TotalDuration": best_us},
        {"Status": "ValidationFailed", "Configuration": [], "ComputationResults": [], "TotalDuration": 0},
    ]}  # fmt: skip


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) if not isinstance(data, str) else data)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    d = tmp_path / "cases_run"
    shutil.copytree(OLD_RUN, d, ignore=shutil.ignore_patterns("output"))
    out = d / "output"
    _write(out / "context.json", {"analysis": "two shapes", "gpu_info": {"model": "NVIDIA H200"}})
    _write(out / "reference_time.json", {"reference_time_us": REF["big"], "cases": REF})
    # "tiled": summaries with cases; iteration 2 is the best (both cases timed).
    tiled = out / "branches" / "tiled"
    manifest = {"strategy": {"name": "tiled", "description": "shared tiles"}, "branch_depth": 2, "current_iter": 2,
                "max_iter": 5, "status": "success", "best_time_us": 200.0}  # fmt: skip
    _write(tiled / "branch.json", manifest)
    it1 = {"big": _summary(400.0, 800.0, {"T": 8}), "small": None}  # failed fast: small never ran
    it2 = {"big": _summary(200.0, 800.0, {"T": 16}), "small": _summary(100.0, 200.0, {"T": 16})}
    for i, cases in ((1, it1), (2, it2)):
        summary = dict(cases["big"])
        speedups = [c["speedup"] for c in cases.values() if c]
        geo = math.prod(speedups) ** (1 / len(speedups)) if None not in cases.values() else None
        failed = next((n for n, c in cases.items() if c is None), None)
        summary.update(cases=cases, geomean_speedup=geo, speedup=geo, failed_case=failed, worst_case="small")
        state = {"iter_num": i, "status": "decided", "results_summary": summary,
                 "decision": {"action": "continue" if i == 1 else "stop"}}  # fmt: skip
        _write(tiled / f"iter{i}" / "state.json", state)
        _write(tiled / f"iter{i}" / "kernels.cu", "// tiled\n")
    # "plain": no summary in state.json, only the case folders' results.json.
    plain = out / "branches" / "plain"
    _write(plain / "branch.json", {"strategy": {"name": "plain", "description": "one thread per output"},
                                   "branch_depth": 2, "current_iter": 1, "max_iter": 5, "status": "success",
                                   "best_time_us": 500.0})  # fmt: skip
    _write(plain / "iter1" / "state.json", {"iter_num": 1, "status": "decided", "decision": {"action": "stop"}})
    _write(plain / "iter1" / "case_big" / "results.json", _ktt(500.0, {"B": 128}))
    _write(plain / "iter1" / "case_small" / "results.json", _ktt(250.0, {"B": 128}))
    _write(plain / "iter1" / "kernels.cu", "// plain\n")
    return d


def test_best_prints_the_per_case_table(problem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(problem), "--best", "--no-ui"]) == 0
    out = capsys.readouterr().out
    assert "best       tiled iteration 2: 0.2 ms, 4x over the reference, score 2.83 (geometric mean over shapes)" in out
    table = out[out.index("\ncases\n") :]
    rows = {line.split()[0]: line.split() for line in table.splitlines()[2:5] if line.strip()}
    assert rows["big"][:5] == ["big", "ok", "0.2", "ms", "0.8"] and "4x" in rows["big"] and "T=16" in rows["big"]
    assert rows["small"][:5] == ["small", "ok", "0.1", "ms", "0.2"] and "2x" in rows["small"]
    assert "3/4" in rows["big"]


def test_json_carries_the_cases_and_each_iterations_score(problem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(problem), "--best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cases"] == ["big", "small"]
    best = data["best"]
    assert [(c["name"], c["status"], c["time_ms"], c["speedup"]) for c in best["cases"]] == [
        ("big", "ok", 0.2, 4.0), ("small", "ok", 0.1, 2.0)]  # fmt: skip
    assert best["score"] == pytest.approx(math.sqrt(8.0)) and data["speedup"] == pytest.approx(math.sqrt(8.0))
    tiled = next(b for b in data["branches"] if b["name"] == "tiled")
    first = tiled["timeline"][0]
    assert first["time_ms"] == 0.4 and first["score"] is None  # a case did not run: no score
    plain = next(b for b in data["branches"] if b["name"] == "plain")
    assert plain["score"] == pytest.approx(math.sqrt((800 / 500) * (200 / 250)))  # from the case folders


async def test_the_apps_results_view_shows_the_case_table(problem: Path) -> None:
    from rich.console import Console
    from textual.widgets import Static

    from cacao_tui.ui.app import ResultsApp

    loaded = load_results(RunLayout(problem))
    assert loaded.results is not None and loaded.results.best is not None
    app = ResultsApp(RunLayout(problem))
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        console = Console(width=200, record=True, color_system=None)
        console.print(app.screen.query_one("#results-cases", Static).content)
        text = console.export_text()
        assert "big" in text and "small" in text and "T=16" in text
