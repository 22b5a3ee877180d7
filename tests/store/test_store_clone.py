"""--clone NAME: the definition is copied to a sibling; runs are not; an existing target is never touched."""

from __future__ import annotations

from pathlib import Path

import pytest
from store_fixtures import copy_problem, snapshot

from cacao_tui.cli import main
from cacao_tui.store.clone import CloneError, clone_problem
from ktt.problem import load_problem


def _with_extras(problem: Path) -> None:
    (problem / "inputs").mkdir()
    (problem / "inputs" / "a.bin").write_bytes(b"\1\2\3")
    (problem / "example").mkdir(exist_ok=True)
    (problem / "example" / "kernels.cu").write_text("// example\n")
    (problem / "NOTES.md").write_text("notes\n")
    for run in ("output", "archive/output_1", "__pycache__"):
        (problem / run).mkdir(parents=True, exist_ok=True)
        (problem / run / "x.json").write_text("{}")


def test_clone_copies_the_definition_only_verbatim(tmp_path: Path) -> None:
    """As the original's: problem.yaml keeps its name; runs and generated files stay behind."""
    source = copy_problem("mmul", tmp_path)
    _with_extras(source)
    (source / "inputs.hpp").write_text("// inputs.hpp: generated from inputs.yaml of problem 'mmul'. Do not edit:\n")
    for leftover in ("run.pid", "run.log"):
        (source / leftover).write_text("1234\n")
    before = snapshot(source)
    cloned = clone_problem(source, "mmul_v2")
    target = tmp_path / "mmul_v2"
    assert cloned.target == target and cloned.generated == 1
    expected = {k: v for k, v in before.items()
                if not k.startswith(("output", "archive", "__pycache__", "inputs.hpp", "run."))}  # fmt: skip
    assert snapshot(target) == expected  # byte for byte, problem.yaml's name: included
    assert snapshot(source) == before
    assert load_problem(target).name == load_problem(source).name == "mmul"


def test_a_hand_written_inputs_hpp_is_copied(tmp_path: Path) -> None:
    source = copy_problem("mmul", tmp_path)
    (source / "inputs.hpp").write_text("// my own header\n")
    assert clone_problem(source, "mine").generated == 0
    assert (tmp_path / "mine" / "inputs.hpp").read_text() == "// my own header\n"


def test_a_read_only_problem_clones_writable(tmp_path: Path) -> None:
    source = copy_problem("transpose", tmp_path)
    for p in [*source.rglob("*"), source]:
        if not p.is_symlink():
            p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        target = clone_problem(source, "transpose_rw").target
        for p in [*target.rglob("*"), target]:
            assert p.stat().st_mode & 0o200, p
        (target / "problem.yaml").write_text((target / "problem.yaml").read_text() + "# edited\n")
    finally:
        for p in [source, *source.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize("name", ["Mmul_V2", "mmul-v2", "mmul.v2", "MMUL"])
def test_the_originals_name_rule(tmp_path: Path, name: str) -> None:
    source = copy_problem("mmul", tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(CloneError, match="lowercase letters, digits and '_'"):
        clone_problem(source, name)
    assert snapshot(tmp_path) == before
    assert clone_problem(source, "mmul_v2_2024").target.name == "mmul_v2_2024"


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden", "..", "trailing.", "-dash", "x" * 101, "a\\b"])
def test_bad_names_are_refused(tmp_path: Path, name: str) -> None:
    source = copy_problem("mmul", tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(CloneError, match="--clone"):
        clone_problem(source, name)
    assert snapshot(tmp_path) == before


def test_existing_target_is_refused_and_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = copy_problem("mmul", tmp_path)
    copy_problem("stencil", tmp_path)
    before = snapshot(tmp_path)
    assert main(["--dir", str(source), "--clone", "stencil"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already exists" in err
    assert snapshot(tmp_path) == before


def test_cli_clone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    copy_problem("transpose", tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--dir", "transpose", "--clone", "transpose_v2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cloned transpose -> transpose_v2 (")
    assert main(["--dir", "transpose_v2", "--check"]) == 0
    assert main(["--dir", "transpose", "--clone", "../up"]) == 2
    assert "lowercase letters, digits and '_'" in capsys.readouterr().err
