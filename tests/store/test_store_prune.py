"""--prune-archives: only regenerable files under archive/ go; results, kernels and logs stay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from store_fixtures import copy_problem, snapshot

from cacao_tui.cli import main
from cacao_tui.store.prune import prune_archives

KEPT = [
    "output_1/context.json",
    "output_1/run.jsonl",
    "output_1/branches/b1/branch.json",
    "output_1/branches/b1/iter1/kernels.cu",
    "output_1/branches/b1/iter1/tuning.yaml",
    "output_1/branches/b1/iter1/state.json",
    "output_1/branches/b1/iter1/tune/results.jsonl",
    "output_1/branches/b1/iter1/tune/summary.json",
    "output_1/branches/b1/iter1/tune/work/logs/worker.log",
    "output_1/branches/b1/iter1/tune/work/shapes/default/inputs.hpp",
    "output_1/branches/b1/iter1/tune/cache/README.txt",  # protected by its suffix even inside the cache
    "output_1/branches/b1/iter1/llm/plan_000.json",
    "output_2/final_results.json",
]
REMOVED = {
    "output_1/branches/b1/iter1/tune/cache/3f/ab12": 1000,
    "output_1/branches/b1/iter1/tune/cache/index": 10,
    "output_1/branches/b1/iter1/tune/work/kernel.cubin": 2000,
    "output_1/branches/b1/iter1/tune/work/host/libref.so": 300,
    "output_1/branches/b1/iter1/tune/work/reference/default/set0/C.npy": 4096,
    "output_2/inputs_dump.npz": 50,
    "output_2/kernel.ptx": 70,
    "output_2/driver": 64,  # an ELF binary without a suffix: a compiled driver of the original tool
}


def _archive(problem: Path) -> None:
    root = problem / "archive"
    for rel in KEPT:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"keep {rel}\n")
    for rel, size in REMOVED.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        data = b"\x7fELF" + b"\0" * (size - 4) if rel.endswith("driver") else b"x" * size
        (root / rel).write_bytes(data)
    # output/ is never touched, whatever it holds
    (problem / "output").mkdir(exist_ok=True)
    (problem / "output" / "kernel.cubin").write_bytes(b"c" * 10)


def test_prune_removes_exactly_the_regenerable_files(tmp_path: Path) -> None:
    problem = copy_problem("mmul", tmp_path)
    _archive(problem)
    definition = {k: v for k, v in snapshot(problem).items() if not k.startswith("archive")}
    report = prune_archives(problem)
    assert sorted(str(p.relative_to(problem / "archive")) for p, _ in report.removed) == sorted(REMOVED)
    assert report.bytes_freed == sum(REMOVED.values())
    assert report.per_run == {"output_1": 7406, "output_2": 184}
    for rel in KEPT:
        assert (problem / "archive" / rel).read_text() == f"keep {rel}\n"
    for rel in REMOVED:
        assert not (problem / "archive" / rel).exists()
    assert not (problem / "archive/output_1/branches/b1/iter1/tune/cache/3f").exists()  # emptied cache dir
    assert {k: v for k, v in snapshot(problem).items() if not k.startswith("archive")} == definition


def test_dry_run_lists_but_keeps(tmp_path: Path) -> None:
    problem = copy_problem("mmul", tmp_path)
    _archive(problem)
    before = snapshot(problem)
    report = prune_archives(problem, dry_run=True)
    assert report.bytes_freed == sum(REMOVED.values())
    assert snapshot(problem) == before


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    problem = copy_problem("mmul", tmp_path)
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.npy").write_bytes(b"1234")
    (problem / "archive" / "output_1").mkdir(parents=True)
    os.symlink(outside, problem / "archive" / "output_1" / "linked")
    os.symlink(outside / "data.npy", problem / "archive" / "output_1" / "link.npy")
    report = prune_archives(problem)
    assert report.removed == []
    assert (outside / "data.npy").read_bytes() == b"1234"
    assert (problem / "archive" / "output_1" / "link.npy").is_symlink()


def test_cli_prints_what_it_freed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = copy_problem("mmul", tmp_path)
    assert main(["--dir", str(problem), "--prune-archives"]) == 0
    assert "nothing to prune" in capsys.readouterr().out
    _archive(problem)
    assert main(["--dir", str(problem), "--prune-archives"]) == 0
    out = capsys.readouterr().out
    assert f"freed {sum(REMOVED.values()):,} bytes" in out and "8 regenerable files" in out
    assert "output_1: 7,406 bytes" in out
    assert main(["--dir", str(problem), "--prune-archives"]) == 0
    assert "holds no regenerable files" in capsys.readouterr().out
