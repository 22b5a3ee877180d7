"""``cacao collect`` with the original's columns (model, GPU, throughput, iterations to the best,
correctness, API calls) and experiment folders; ``cacao suite --models A,B`` and ``--path-budget``."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results
from cacao_tui.suite.collect import COLUMNS, collect_row
from cacao_tui.suite.collect_runs import FACT_COLUMNS, experiment_runs
from cacao_tui.suite.models import model_list
from tests.cluster.suite_helpers import cacao, mmul_copies
from tests.compat.original_collector import collect as original_collect
from tests.compat.test_original_files import measured_run  # noqa: F401  (the module's fixture: one run)


def test_the_original_columns_of_a_measured_run(measured_run: Path) -> None:  # noqa: F811
    facts = collect_row(measured_run).facts
    row = original_collect(measured_run / "output")
    assert facts.model == "replay/replay" and facts.gpu == row["gpu"] == "FAKE GPU (tests/ui/fake_run_site)"
    assert facts.iters_to_best == row["iters_to_best_path"]
    assert facts.correct == row["correctness_rate"] and facts.api_calls == row["api_calls"]
    best = load_results(RunLayout(measured_run)).results.best  # type: ignore[union-attr]
    flops = 2 * 2048**3  # mmul's physical floor: 2 M N K flops (problem.yaml)
    assert best is not None and facts.throughput == f"{flops / (best.time_ms * 1e-3) / 1e9:.4g} GFLOP/s"
    assert COLUMNS[-len(FACT_COLUMNS) :] == FACT_COLUMNS


def test_an_experiments_folder(measured_run: Path, tmp_path: Path) -> None:  # noqa: F811
    """The original's layout: experiments/<name>/<problem>/; and a folder of problems is one experiment."""
    exp = tmp_path / "experiments"
    shutil.copytree(measured_run, exp / "glm_week" / "mmul_glm")
    shutil.copytree(measured_run, exp / "kimi_week" / "mmul_kimi")
    (exp / "notes").mkdir()
    assert [(p.name, e) for p, e in experiment_runs(exp)] == [("mmul_glm", "glm_week"), ("mmul_kimi", "kimi_week")]
    done = cacao("collect", str(exp), str(exp / "glm_week" / "mmul_glm"), "--output", str(tmp_path / "t"),
                 cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "given twice" in done.stderr  # the same run named twice
    done = cacao("collect", str(exp), "--output", str(tmp_path / "t"), cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert [(r["problem"], r["experiment"]) for r in rows] == [("mmul_glm", "glm_week"), ("mmul_kimi", "kimi_week")]
    assert all(r["gpu"] == "FAKE GPU (tests/ui/fake_run_site)" and r["throughput"].endswith("GFLOP/s") for r in rows)
    empty = tmp_path / "empty"
    empty.mkdir()
    done = cacao("collect", str(empty), cwd=tmp_path, timeout=60)
    assert done.returncode == 2 and "neither a problem directory nor an experiments folder" in done.stderr


def test_suite_sweeps_models_and_passes_the_path_budget(tmp_path: Path) -> None:
    (problem,) = mmul_copies(tmp_path, 1)
    out = tmp_path / "results"
    done = cacao("suite", str(problem), "--dry-run", "--provider", "replay", "--models", "m-one,m_two",
                 "--path-budget", "2", "--jobs", "2", "--output", str(out), cwd=tmp_path, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    copies = [out / "models" / "m_one" / "mmul1", out / "models" / "m_two" / "mmul1"]
    for copy in copies:
        assert (copy / "output" / "final_results.json").is_file()
        assert (copy / "problem.yaml").read_text() == (problem / "problem.yaml").read_text()
    log = (out / "logs" / "mmul1@m_one.log").read_text()
    assert "replay/m-one" in log.splitlines()[0] and "path budget 2 iterations" in log.splitlines()[0]
    assert not (problem / "output").exists()  # the problem itself does not run: its copies do
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(r["problem"], r["experiment"], r["model"]) for r in rows] == [
        ("mmul1", "m-one", "replay/m-one"), ("mmul1", "m_two", "replay/m_two")]  # fmt: skip
    again = cacao("collect", str(out / "models"), "--output", str(tmp_path / "c"), cwd=tmp_path, timeout=120)
    assert again.returncode == 0 and len(list(csv.DictReader((tmp_path / "c.csv").open()))) == 2
    bad = cacao("suite", str(problem), "--models", "a,a", "--dry-run", cwd=tmp_path, timeout=60)
    assert bad.returncode == 2 and "listed twice" in bad.stderr
    bad = cacao("suite", str(problem), "--models", "a", "--model", "b", "--dry-run", cwd=tmp_path, timeout=60)
    assert bad.returncode == 2 and "give one" in bad.stderr
    assert model_list("glm-5.2, kimi-k2.6") == ["glm-5.2", "kimi-k2.6"]
