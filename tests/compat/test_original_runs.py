"""A CACAO user's old runs: an output/ laid out by the original (problems/old_run/output, written by
make_original_output.py from the original's state models) is shown by --best, --export and the app's
results view; --resume and --branch refuse it in one line and write nothing; a fresh run archives it;
--prune-archives removes the original's regenerable files from an archived one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from make_original_output import stale

from cacao_tui.cli import main
from cacao_tui.store.archive import prepare_output
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.original_run import collect_original_results, is_original_output
from cacao_tui.store.prune import prune_archives
from cacao_tui.store.results import FROM_ORIGINAL, load_results

HERE = Path(__file__).resolve().parent
OLD_RUN = HERE / "problems" / "old_run"


def snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    d = tmp_path / "old_run"
    shutil.copytree(OLD_RUN, d)
    return d


def test_the_fixture_is_what_the_generator_writes() -> None:
    assert stale() == []


def test_our_own_runs_are_not_taken_for_the_originals(tmp_path: Path) -> None:
    assert is_original_output(OLD_RUN / "output")
    assert not is_original_output(tmp_path)  # empty
    ours = tmp_path / "output"
    (ours / "branches" / "b1").mkdir(parents=True)
    (ours / "context.json").write_text('{"problem_name": "x", "analysis": "a"}')
    (ours / "branches" / "b1" / "branch.json").write_text('{"name": "b1", "current_iter": 1}')
    assert not is_original_output(ours)


def test_best_prints_its_branches_and_timeline(problem: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(problem)
    assert main(["--dir", str(problem), "--best", "--no-ui"]) == 0
    out = capsys.readouterr().out
    assert FROM_ORIGINAL in out and "no branches yet" not in out
    assert "best       vectorized_unroll iteration 2: 0.25 ms, 9.6x over the reference" in out
    assert "kernel     output/branches/vectorized/branches/vectorized_unroll/iter2/kernels.cu" in out
    assert "config     BLOCK=256, UNROLL=4" in out and "reference  2.4 ms (seeded)" in out
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line for line in out.splitlines()
            if "original status" in line}  # fmt: skip
    assert set(rows) == {"grid_stride", "vectorized", "vectorized_unroll", "warp_tiles"}
    assert rows["vectorized_unroll"].startswith("*    vectorized_unroll  done")  # nested: indented under its parent
    assert "0.3105 ms" in rows["vectorized"] and "7.73x" in rows["vectorized"]
    assert rows["grid_stride"].split()[:4] == ["grid_stride", "failed", "2", "-"]
    timeline = out[out.index("iteration timeline") :]
    assert "[vectorized_unroll]" in timeline and "iter 2:      0.25 ms  [" + "#" * 32 + "]  stop      *" in timeline
    assert "iter 3:         -     [" in timeline and "branch    (no result)" in timeline
    assert snapshot(problem) == before  # nothing written


def test_best_json_and_export(problem: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(problem), "--best", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best_branch"] == "vectorized_unroll" and data["best_time_us"] == 250.0
    assert data["speedup"] == pytest.approx(9.6) and data["total_branches"] == 4
    assert [b["name"] for b in data["branches"]] == ["grid_stride", "vectorized", "vectorized_unroll", "warp_tiles"]
    nested = data["branches"][2]
    assert (nested["parent"], nested["depth"]) == ("vectorized", 1)
    # the original's merge counts only success and branching branches: warp_tiles (running) is not the best
    assert data["branches"][3]["best_ms"] == 0.26 and data["best"]["branch"] != "warp_tiles"
    for suffix in (".md", ".csv"):
        target = tmp_path / f"old{suffix}"
        assert main(["--dir", str(problem), "--best", "--export", str(target)]) == 0
        text = target.read_text()
        assert "vectorized_unroll" in text and "grid_stride" in text


@pytest.mark.parametrize(
    ("flags", "what"),
    [
        (["--resume", "--provider", "replay", "--no-ui"], "cannot continue it"),
        (["--no-clean", "--provider", "replay", "--no-ui"], "cannot add a run to it"),
        (["--branch", "vectorized", "--message", "try float4"], "cannot steer it"),
        (["--branch", "vectorized", "--decision", "stop"], "cannot steer it"),
    ],
)
def test_resume_and_branch_refuse_in_one_line_and_write_nothing(
    problem: Path, capsys: pytest.CaptureFixture[str], flags: list[str], what: str
) -> None:
    before = snapshot(problem)
    assert main(["--dir", str(problem), *flags]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.out == "", captured.err
    assert "written by the original CACAO" in lines[0] and what in lines[0]
    assert f"Start fresh with 'cacao --dir {problem}'" in lines[0]
    assert snapshot(problem) == before


def test_a_fresh_run_archives_it_and_the_archive_still_reads(problem: Path) -> None:
    layout = RunLayout(problem)
    prepared = prepare_output(problem, resume=False, no_clean=False)
    archived = problem / "archive" / "output_1"
    assert prepared.archived_to == archived and prepared.reference_time_carried
    assert sorted(p.name for p in layout.output.iterdir()) == ["reference_time.json"]
    assert is_original_output(archived) and not is_original_output(layout.output)
    results, notes = collect_original_results(archived, "old_run", 2.4, "seeded")
    assert not notes and results.best is not None and results.best.branch == "vectorized_unroll"
    assert len(results.branches) == 4 and results.complete
    assert load_results(layout).results is None  # output/ holds no run now


def test_prune_archives_removes_the_originals_regenerable_files(problem: Path) -> None:
    archived = problem / "archive" / "output_1"
    shutil.copytree(problem / "output", archived)
    it = archived / "branches" / "vectorized" / "iter2"
    made = {
        it / "cacao_in_0.bin": 4096,
        it / "cacao_ref_Y.bin": 4096,
        it / "__pycache__" / "ref.cpython-311.pyc": 1000,
        archived / ".staging" / "branch.json.part": 300,
    }
    for path, size in made.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * size)
    kept_json = archived / ".staging" / "state.json"
    kept_json.write_text("{}")
    report = prune_archives(problem)
    assert sorted(p for p, _ in report.removed) == sorted(made)
    assert report.bytes_freed == sum(made.values())
    assert not (it / "__pycache__").exists()  # emptied: removed
    assert kept_json.exists() and (it / "kernels.cu").exists() and (it / "results.json").exists()


async def test_the_apps_results_view_shows_it(problem: Path) -> None:
    from textual.widgets import DataTable

    from cacao_tui.ui.app import ResultsApp

    app = ResultsApp(RunLayout(problem))
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()  # the results are loaded in a worker
        await pilot.pause()
        table = app.screen.query_one("#results-branches", DataTable)
        assert table.row_count == 4
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert set(names) == {"grid_stride", "vectorized", "vectorized_unroll", "warp_tiles"}
        app.screen.show_kernel_of("vectorized_unroll")  # type: ignore[attr-defined]
        await pilot.pause()
        header = str(app.screen.query_one("#results-kernel-header").render())
        assert "vectorized/branches/vectorized_unroll/iter2/kernels.cu" in header
