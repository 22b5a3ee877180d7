"""The problem writer (cacao_tui.problem.writer): YAML from the typed model, round trips that keep
the meaning, and saves that are all or nothing."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from cacao_tui.problem.summary import render_check
from cacao_tui.problem.writer import (
    ProblemSource,
    check_data_file,
    check_source,
    new_source,
    read_problem_source,
    render_files,
    save_problem,
)
from ktt.problem import ProblemError, load_problem
from ktt.problem.preflight import preflight

COMPAT = Path(__file__).resolve().parents[1] / "compat" / "problems"
PROBLEMS = sorted(p.name for p in COMPAT.iterdir() if (p / "problem.yaml").is_file())


def _report(directory: Path) -> str:
    problem = load_problem(directory)
    text = render_check(problem, preflight(problem))
    return re.sub(r"\((?:\d+\.\d s|cached)", "(T s", text)  # build times vary; a cold compile cache warms up


def _tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _without_warnings(report: str) -> str:
    return report.split("\nwarnings ")[0]


@pytest.mark.parametrize("name", PROBLEMS)
def test_load_edit_nothing_save_means_the_same(tmp_path: Path, name: str) -> None:
    """Every compat problem, saved unchanged through the writer, gives the same --check report."""
    work = tmp_path / name
    shutil.copytree(COMPAT / name, work)
    before = _report(work)
    run_files = {k: v for k, v in _tree(work).items() if k.startswith("output/")}
    source = read_problem_source(work)
    save_problem(source, work, existing=True)
    after = _report(work)
    if source.converted_inline:
        # Saved in the newer form: the conversion's warnings go, the meaning stays. A Python size
        # (N // 2, floor division) is written as C++ that means the same (N / 2).
        assert _without_warnings(after) == _without_warnings(before).replace(" // ", " / ")
        assert "converted from the older inline form" in before
        assert "converted" not in after
    else:
        assert after == before
    # The run's files are carried over untouched.
    assert {k: v for k, v in _tree(work).items() if k.startswith("output/")} == run_files
    # Saving twice is a fixed point: the writer's own output reads back to the same text.
    again = read_problem_source(work)
    assert render_files(again, work) == render_files(read_problem_source(work), work)
    assert render_files(again, work)["problem.yaml"] == (work / "problem.yaml").read_text()


def test_yaml_is_the_original_format(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "spmv_files", tmp_path / "p")
    files = render_files(read_problem_source(tmp_path / "p"), tmp_path / "p")
    inputs = files["inputs.yaml"]
    assert inputs.startswith("# The defaults below")  # the leading comment is kept
    assert "placements: [host, runtime]" in inputs
    assert "  body: |\n    std::vector<float> v" in inputs  # a multi-line body is a literal block
    data = yaml.safe_load(files["problem.yaml"])
    assert list(data)[:6] == ["name", "description", "gpu", "global_size_type", "grid", "reference"]
    assert data["gpu"]["memory_bandwidth_gb"] == 4800  # advisory keys survive
    assert data["cases"][1] == {
        "name": "wide",
        "scalars": {"NROWS": 3, "NCOLS": 9, "NNZ": 12, "XMOD": 3},
        "files": {"row_offsets": "wide.rowptr.bin", "col_indices": "wide.col.bin", "values": "wide.val.bin"},
        "duration_s": 5,
    }
    assert "tolerance" not in yaml.safe_load(files["inputs.yaml"])  # nothing invented


def test_new_problem_saved_only_when_it_passes_check(tmp_path: Path) -> None:
    source = new_source("scale")
    target = tmp_path / "scale"
    result = check_source(source, target, existing=False)
    assert result.ok, result.error
    assert result.signature == 'extern "C" __global__ void scale_ref(const float* x, float* y)'
    assert "#define LEN 1048576" in result.inputs_hpp
    save_problem(source, target, existing=False)
    assert load_problem(target).reference.function == "scale_ref"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scale"]  # no staging left behind


def test_refused_save_writes_nothing(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "terrain_custom", tmp_path / "p")
    before = _tree(tmp_path / "p")
    source = read_problem_source(tmp_path / "p")
    source.problem["grid"]["x"] = "MAP_W / 100000"  # rounds down to 0 blocks
    with pytest.raises(ProblemError, match=r"p/problem\.yaml: cases\[0\] \(square\): grid\.x: evaluates to 0"):
        save_problem(source, tmp_path / "p", existing=True)
    assert _tree(tmp_path / "p") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]
    # A new problem that fails is not created at all.
    new = new_source("broken")
    new.inputs["args"][2]["validate"] = False
    with pytest.raises(ProblemError, match="no buffer has validate: true"):
        save_problem(new, tmp_path / "broken", existing=False)
    assert not (tmp_path / "broken").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]


def test_refused_when_the_reference_does_not_compile(tmp_path: Path) -> None:
    source = new_source("bad")
    source.reference_text = 'extern "C" __global__ void bad_ref(const float* x, float* y) { y[0] = z; }\n'
    result = check_source(source, tmp_path / "bad", existing=False)
    assert not result.ok and "ref_kernel.cu: line 1" in (result.error or "")
    with pytest.raises(ProblemError):
        save_problem(source, tmp_path / "bad", existing=False)
    assert list(tmp_path.iterdir()) == []


def test_data_file_picked_from_disk_is_size_checked_and_copied(tmp_path: Path) -> None:
    source = new_source("fromfile")
    source.inputs["args"][0]["value"] = 16
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "short.bin").write_bytes(b"\0" * 60)
    (elsewhere / "x.bin").write_bytes(b"\0" * 64)
    why = check_data_file(source, "x", elsewhere / "short.bin")
    assert why == "short.bin holds 60 bytes; buffer x needs 64 at the inputs.yaml values"
    assert check_data_file(source, "x", elsewhere / "x.bin") is None
    source.inputs["args"][1].update({"init": "file", "file_name": "x.bin"})
    source.data_files["x.bin"] = elsewhere / "x.bin"
    target = tmp_path / "problems" / "fromfile"
    target.parent.mkdir()
    save_problem(source, target, existing=False)
    assert (target / "inputs" / "x.bin").read_bytes() == b"\0" * 64
    assert load_problem(target).primary.files["x"] == (target / "inputs" / "x.bin").resolve()


def test_edit_keeps_runs_and_refuses_while_a_run_holds_the_lock(tmp_path: Path) -> None:
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    (tmp_path / "p" / "archive" / "output_1").mkdir(parents=True)
    (tmp_path / "p" / "archive" / "output_1" / "final_results.json").write_text("{}")
    source = read_problem_source(tmp_path / "p")
    source.problem["validation"]["tolerance"] = 1e-3
    fd = os.open(tmp_path / "p" / "output.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ProblemError, match="a run is using this problem"):
            save_problem(source, tmp_path / "p", existing=True)
        assert load_problem(tmp_path / "p").tolerance == 1e-5
    finally:
        os.close(fd)
    save_problem(source, tmp_path / "p", existing=True)
    assert load_problem(tmp_path / "p").tolerance == 1e-3
    assert (tmp_path / "p" / "archive" / "output_1" / "final_results.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]


def test_source_of_a_problem_that_does_not_load_can_be_read(tmp_path: Path) -> None:
    """The editor opens a broken problem to fix it."""
    shutil.copytree(COMPAT / "softmax_rows_py", tmp_path / "p")
    text = (tmp_path / "p" / "problem.yaml").read_text().replace("x: ROWS", "x: ROWZ")
    (tmp_path / "p" / "problem.yaml").write_text(text)
    with pytest.raises(ProblemError):
        load_problem(tmp_path / "p")
    source = read_problem_source(tmp_path / "p")
    assert isinstance(source, ProblemSource) and source.problem["grid"]["x"] == "ROWZ"
    result = check_source(source, tmp_path / "p", existing=True)
    assert not result.ok and "grid.x: unknown name 'ROWZ'" in (result.error or "")
    source.problem["grid"]["x"] = "ROWS"
    assert check_source(source, tmp_path / "p", existing=True).ok
