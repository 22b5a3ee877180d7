"""Every user mistake in a problem directory: exit 2, one line FILE: FIELD: message, nothing written."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from problem_fixtures import edit_yaml, snapshot

from cacao_tui.cli import main


def _arg(index: int, **changes: object) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        edit_yaml(d / "inputs.yaml", lambda data: data["args"][index].update(changes))

    return change


def _problem(**changes: object) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        edit_yaml(d / "problem.yaml", lambda data: data.update(changes))

    return change


def _reference(**changes: object) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        edit_yaml(d / "problem.yaml", lambda data: data["reference"].update(changes))

    return change


def _write(name: str, text: str | bytes) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        if isinstance(text, bytes):
            (d / name).write_bytes(text)
        else:
            (d / name).write_text(text)

    return change


def _remove(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).unlink()


def _lowercase_define(d: Path) -> None:
    def change(data: dict) -> None:
        data["args"][0]["name"] = "count"
        for a in data["args"][1:]:
            a["size"] = "count"

    edit_yaml(d / "inputs.yaml", change)


def _file_init(size_bytes: int) -> Callable[[Path], None]:
    def change(d: Path) -> None:
        (d / "inputs").mkdir()
        (d / "inputs" / "x.bin").write_bytes(b"\0" * size_bytes)
        _arg(1, init="file", file="x.bin")(d)

    return change


def _symlinked_reference(d: Path) -> None:
    outside = d.parent / "elsewhere.cu"
    outside.write_text((d / "ref_kernel.cu").read_text())
    (d / "ref_kernel.cu").unlink()
    (d / "ref_kernel.cu").symlink_to(outside)


def _case(**case: object) -> Callable[[Path], None]:
    return _problem(cases=[case])


# (id, change, file, field, words in the message)
CASES: list[tuple[str, Callable[[Path], None], str, str, str]] = [
    (
        "yaml-syntax",
        _write("problem.yaml", "name: tiny\ngrid: {x: 1\n"),
        "problem.yaml",
        "line 2, column 7",  # where the unclosed { is, not where the end of the file noticed it
        "YAML syntax error",
    ),
    (
        "yaml-syntax-inputs",
        _write("inputs.yaml", "args:\n  - [kind: scalar\n"),
        "inputs.yaml",
        "line 2, column 5",
        "YAML syntax error",
    ),
    (
        "top-level-list",
        _write("problem.yaml", "- grid\n- reference\n"),
        "problem.yaml",
        "(top level)",
        "expected a mapping of keys, got a list",
    ),
    ("top-level-number", _write("inputs.yaml", "42\n"), "inputs.yaml", "(top level)", "got a number"),
    ("empty-file", _write("inputs.yaml", ""), "inputs.yaml", "(top level)", "the file is empty"),
    ("not-utf8", _write("inputs.yaml", b"\xff\xfe\x00args"), "inputs.yaml", "", "not UTF-8 text"),
    ("unknown-dtype", _arg(1, dtype="float8"), "inputs.yaml", "args[1] (X).dtype", "unknown dtype 'float8'"),
    ("unknown-name-size", _arg(1, size="COUNT * ROWS"), "inputs.yaml", "args[1] (X).size", "unknown name 'ROWS'"),
    ("unknown-name-grid", _problem(grid={"x": "COUNT / TILE"}), "problem.yaml", "grid.x", "unknown name 'TILE'"),
    ("unknown-function", _problem(grid={"x": "exp(COUNT)"}), "problem.yaml", "grid.x", "unknown function 'exp'"),
    (
        "division-by-zero-grid",
        _problem(grid={"x": "COUNT / (COUNT - COUNT)"}),
        "problem.yaml",
        "grid.x",
        "division by zero",
    ),
    ("division-by-zero-size", _arg(1, size="COUNT % 0"), "inputs.yaml", "args[1] (X).size", "division by zero"),
    ("size-zero", _arg(1, size="COUNT - COUNT"), "inputs.yaml", "args[1] (X).size", "evaluates to 0 elements"),
    ("size-negative", _arg(1, size="-COUNT"), "inputs.yaml", "args[1] (X).size", "evaluates to -1024 elements"),
    (
        "size-too-large",
        _arg(1, size="COUNT * COUNT * COUNT * 100"),
        "inputs.yaml",
        "args[1] (X).size",
        "107,374,182,400 float elements = 429,496,729,600 bytes, larger than any GPU's memory",
    ),
    (
        "sizes-too-large-together",
        lambda d: [_arg(i, size="COUNT * COUNT * COUNT * 40")(d) for i in (1, 2)],
        "inputs.yaml",
        "args",
        "all buffers together take 343,597,383,680 bytes",
    ),
    (
        "size-overflow",
        _arg(1, size="COUNT * COUNT * COUNT * COUNT * COUNT * COUNT * COUNT"),
        "inputs.yaml",
        "args[1] (X).size",
        "does not fit in 64 bits",
    ),
    ("grid-zero", _problem(grid={"x": "COUNT / 4096"}), "problem.yaml", "grid.x", "evaluates to 0"),
    ("grid-fraction", _problem(grid={"x": "COUNT / 1000.0"}), "problem.yaml", "grid.x", "expected an integer"),
    ("duplicate-arg", _arg(2, name="X"), "inputs.yaml", "args[2] (X).name", "duplicate arg name 'X' (also args[1])"),
    ("lowercase-define", _lowercase_define, "inputs.yaml", "args[0] (count).name", "must be UPPERCASE"),
    ("empty-placements", _arg(0, placements=[]), "inputs.yaml", "args[0] (COUNT).placements", "at least one of host"),
    ("unknown-placement", _arg(0, placements=["device"]), "inputs.yaml", "args[0] (COUNT).placements[0]", "'device'"),
    ("no-validated-buffer", _arg(2, validate=False), "inputs.yaml", "args", "no buffer has validate: true"),
    ("validated-input", _arg(1, validate=True), "inputs.yaml", "args[1] (X).validate", "write or readwrite"),
    (
        "missing-reference",
        _remove("ref_kernel.cu"),
        "problem.yaml",
        "reference.file",
        "'ref_kernel.cu': file not found",
    ),
    (
        "reference-leaves-dir",
        _reference(file="../../outside.cu"),
        "problem.yaml",
        "reference.file",
        "leaves the problem directory",
    ),
    ("reference-absolute", _reference(file="/etc/hostname"), "problem.yaml", "reference.file", "is absolute"),
    ("reference-symlink-out", _symlinked_reference, "problem.yaml", "reference.file", "leaves the problem directory"),
    (
        "input-file-leaves-dir",
        _arg(1, init="file", file="../../secret.bin"),
        "inputs.yaml",
        "args[1] (X).file",
        "contains '..'",
    ),
    (
        "file-name-absolute",
        _arg(1, init="file", file_name="/etc/hostname"),
        "inputs.yaml",
        "args[1] (X).file_name",
        "is absolute",
    ),
    (
        "cuda-without-function",
        lambda d: edit_yaml(d / "problem.yaml", lambda p: p["reference"].pop("function")),
        "problem.yaml",
        "reference.function",
        "required for a cuda reference",
    ),
    (
        "function-not-in-file",
        _reference(function="other"),
        "problem.yaml",
        "reference.function",
        "no __global__ function 'other'",
    ),
    (
        "bad-case-name",
        _case(name="big one", scalars={"COUNT": 4096}),
        "problem.yaml",
        "cases[0].name",
        "must match [A-Za-z0-9_-]+",
    ),
    (
        "case-unknown-scalar",
        _case(name="big", scalars={"ROWS": 4}),
        "problem.yaml",
        "cases[0] (big).scalars.ROWS",
        "unknown scalar",
    ),
    (
        "case-zero-grid",
        _case(name="small", scalars={"COUNT": 0}),
        "problem.yaml",
        "cases[0] (small)",
        "a buffer needs at least 1",
    ),
    ("file-size-mismatch", _file_init(100), "inputs.yaml", "args[1] (X).file", "x.bin holds 100 bytes, expected 4,096"),
    ("missing-input-file", _arg(1, init="file", file="x.bin"), "inputs.yaml", "args[1] (X).file", "x.bin: not found"),
    (
        "missing-file-name",
        _arg(1, init="file", file_name="x.bin"),
        "inputs.yaml",
        "args[1] (X).file_name",
        "inputs/x.bin: not found (this shape needs 1,024 float elements = 4,096 bytes",
    ),
    ("missing-inputs-yaml", _remove("inputs.yaml"), "inputs.yaml", "", "file not found"),
    ("missing-problem-yaml", _remove("problem.yaml"), "problem.yaml", "", "file not found"),
    (
        "missing-grid",
        lambda d: edit_yaml(d / "problem.yaml", lambda p: p.pop("grid")),
        "problem.yaml",
        "grid",
        "missing (required)",
    ),
    ("bad-reference-type", _reference(type="opencl"), "problem.yaml", "reference.type", "'cuda', 'cpu_c' or 'python'"),
    ("negative-tolerance", _problem(validation={"tolerance": -1}), "problem.yaml", "validation.tolerance", "(got -1)"),
    (
        "arg-without-kind",
        lambda d: edit_yaml(d / "inputs.yaml", lambda p: p["args"][1].pop("kind")),
        "inputs.yaml",
        "args[1] (X)",
        "missing 'kind'",
    ),
]


@pytest.mark.parametrize(("change", "file", "field", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    tiny: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[Path], None],
    file: str,
    field: str,
    words: str,
) -> None:
    (tiny.parent.parent / "outside.cu").write_text("// a file outside the problem directory\n")
    change(tiny)
    before = snapshot(tiny.parent)
    monkeypatch.chdir(tiny.parent)
    for mode in (["--check"], ["--no-ui", "--dry-run"], []):
        code = main(["--dir", "tiny", *mode])
        out, err = capsys.readouterr()
        assert code == 2, err
        assert out == ""
        lines = err.splitlines()
        assert 1 <= len(lines) <= 2, err
        if len(lines) == 2:
            assert lines[1].startswith("hint: ")
        prefix = f"tiny/{file}: {field}: " if field else f"tiny/{file}: "
        assert lines[0].startswith(prefix), lines[0]
        assert words in lines[0]
        assert "Traceback" not in err
        assert snapshot(tiny.parent) == before


def test_size_error_states_the_bytes(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _arg(1, size="COUNT * 1000000000")(tiny)
    assert main(["--dir", str(tiny), "--check"]) == 2
    err = capsys.readouterr().err
    assert "4,096,000,000,000 bytes" in err and "288,000,000,000 bytes" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--dir", "does-not-exist"], "does-not-exist: no such directory"),
        (["--dir", "a-file"], "a-file: not a directory"),
        (["--dir", "."], "problem.yaml: file not found"),
    ],
)
def test_bad_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], words: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    for mode in (["--check"], ["--best"], ["--prune-archives"], ["--clone", "x"], []):
        assert main([*argv, *mode]) == 2
        err = capsys.readouterr().err
        assert words in err.splitlines()[0], (mode, err)
    assert snapshot(tmp_path) == before


def test_no_engine_is_called_for_a_bad_problem(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cacao_tui.cli as cli

    _arg(1, dtype="float8")(tiny)
    monkeypatch.setattr(cli, "load_engine", lambda: pytest.fail("the engine must not start"))
    assert main(["--dir", str(tiny), "--no-ui"]) == 2


def test_error_paths_are_relative_to_the_working_directory(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _arg(1, dtype="float8")(tiny)
    monkeypatch.chdir(tiny)
    assert main(["--dir", ".", "--check"]) == 2
    assert capsys.readouterr().err.startswith("inputs.yaml: args[1] (X).dtype: ")
    monkeypatch.chdir(tiny.parent.parent)
    assert main(["--dir", str(tiny), "--check"]) == 2
    assert capsys.readouterr().err.startswith(os.path.join(tiny.parent.name, "tiny", "inputs.yaml: "))
    monkeypatch.chdir("/")  # from the root, a path is clearer absolute
    assert main(["--dir", str(tiny), "--check"]) == 2
    assert capsys.readouterr().err.startswith(f"{tiny}/inputs.yaml: ")
