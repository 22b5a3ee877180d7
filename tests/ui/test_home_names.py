"""Home rows tell apart problems whose problem.yaml names collide or are cut: the directory name
comes first, problem.yaml's name after it where it differs."""

from __future__ import annotations

from pathlib import Path

from cacao_tui.runs.catalog import scan_problems
from cacao_tui.ui.home.rows import row_cells, sort_key
from tests.runs.run_files import copy_problem

LONG = "Gated DeltaNet chunked prefill, fp32"


def test_alike_names_read_apart(tmp_path: Path) -> None:
    for directory in ("gdn_chunk_fp32", "gdn_chunk_gen"):
        problem = copy_problem(tmp_path, directory)
        text = (problem / "problem.yaml").read_text().replace(f"name: {directory}", f"name: {LONG}", 1)
        (problem / "problem.yaml").write_text(text)
    copy_problem(tmp_path, "mmul")
    entries = scan_problems(tmp_path)
    cells = {e.key: row_cells(e)[0] for e in entries}
    assert str(cells["gdn_chunk_fp32"]) == f"gdn_chunk_fp32 {LONG}"
    assert str(cells["gdn_chunk_gen"]) == f"gdn_chunk_gen {LONG}"
    assert str(cells["mmul"]) == "mmul"  # the same name twice is said once
    gen = cells["gdn_chunk_gen"]
    assert [(gen.plain[s.start : s.end], str(s.style)) for s in gen.spans] == [(f" {LONG}", "dim")]
    assert [e.key for e in sorted(entries, key=lambda e: sort_key(e, "name"))] == [
        "gdn_chunk_fp32", "gdn_chunk_gen", "mmul"]  # fmt: skip
