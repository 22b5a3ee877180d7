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


def test_clone_copies_the_definition_only(tmp_path: Path) -> None:
    source = copy_problem("mmul", tmp_path)
    _with_extras(source)
    before = snapshot(source)
    cloned = clone_problem(source, "mmul_v2")
    target = tmp_path / "mmul_v2"
    assert cloned.target == target and cloned.renamed
    copied = snapshot(target)
    expected = {k: v for k, v in before.items() if not k.startswith(("output", "archive", "__pycache__"))}
    expected["problem.yaml"] = None  # compared below: only the name line differs
    copied["problem.yaml"] = None
    assert copied == expected
    assert snapshot(source) == before
    assert load_problem(target).name == "mmul_v2"


def test_name_line_changes_and_comments_stay(tmp_path: Path) -> None:
    source = copy_problem("mmul", tmp_path)
    clone_problem(source, "2024")
    old = (source / "problem.yaml").read_text().splitlines()
    new = (tmp_path / "2024" / "problem.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(old, new, strict=True) if a != b]
    assert changed == [("name: mmul", "name: '2024'")]
    assert load_problem(tmp_path / "2024").name == "2024"


def test_without_a_name_key_the_directory_name_is_used(tmp_path: Path) -> None:
    source = copy_problem("stencil", tmp_path)
    text = (source / "problem.yaml").read_text().replace("name: stencil\n", "")
    (source / "problem.yaml").write_text(text)
    cloned = clone_problem(source, "stencil-b")
    assert not cloned.renamed
    assert load_problem(cloned.target).name == "stencil-b"


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
    assert "problem.yaml: name: set to transpose_v2" in out
    assert main(["--dir", "transpose_v2", "--check"]) == 0
    assert main(["--dir", "transpose", "--clone", "../up"]) == 2
    assert "must be a plain directory name" in capsys.readouterr().err
