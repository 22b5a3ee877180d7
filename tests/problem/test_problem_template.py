"""The new-problem writer: a validated directory, or nothing at all."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from problem_fixtures import snapshot

from cacao_tui.cli import main
from cacao_tui.problem.template import new_problem_from_fields, render_problem_files, write_problem
from ktt.problem import ProblemError, load_problem


def fields(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "vadd",
        "description": "c = a + b",
        "args": [
            {"kind": "scalar", "name": "LEN", "value": "1 << 20"},
            {"kind": "buffer", "name": "a", "size": "LEN", "seed": 1},
            {"kind": "buffer", "name": "b", "size": "LEN", "seed": 2},
            {"kind": "buffer", "name": "c", "size": "LEN", "access": "write", "validate": True},
        ],
        "grid": {"x": "(LEN + 255) / 256"},
        "block": {"x": 256},
        "floor_bytes": "3 * 4 * LEN",
        "rules_text": ["Keep fp32."],
        "forbid": [{"pattern": "cublas", "reason": "no libraries"}],
    }
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("rtype", "filename"), [("cuda", "ref_kernel.cu"), ("cpu_c", "ref_cpu.c"), ("python", "ref.py")]
)
def test_writes_a_problem_that_checks(
    tmp_path: Path, rtype: str, filename: str, capsys: pytest.CaptureFixture[str]
) -> None:
    new = new_problem_from_fields(fields(reference_type=rtype), tmp_path)
    target, problem = write_problem(new, tmp_path)
    assert target == tmp_path / "vadd"
    assert sorted(p.name for p in target.iterdir()) == sorted(["problem.yaml", "inputs.yaml", filename])
    assert problem.boundary_signature() == "const float* a, const float* b, float* c"
    assert problem.reference.type == rtype and problem.reference.function == "vadd_ref"
    assert problem.floor_bytes is not None and problem.rules_text == ["Keep fp32."]
    assert main(["--dir", str(target), "--check"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["vadd"]  # no staging directory left
    assert capsys.readouterr().out


def test_stub_references_fail_loudly() -> None:
    files = {
        t: render_problem_files(new_problem_from_fields(fields(reference_type=t), Path("x")))
        for t in ("cuda", "cpu_c", "python")
    }
    assert "__trap();" in files["cuda"]["ref_kernel.cu"]
    assert "abort();" in files["cpu_c"]["ref_cpu.c"]
    assert "raise NotImplementedError" in files["python"]["ref.py"]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_stub_compiles(tmp_path: Path) -> None:
    target, _ = write_problem(new_problem_from_fields(fields(reference_type="cpu_c"), tmp_path), tmp_path)
    subprocess.run(
        [
            "cc",
            "-std=c99",
            "-Wall",
            "-Werror",
            "-c",
            "-DLEN=16",
            str(target / "ref_cpu.c"),
            "-o",
            str(tmp_path / "r.o"),
        ],
        check=True,
    )


def test_given_reference_source_is_used(tmp_path: Path) -> None:
    source = 'extern "C" __global__ void vadd_ref(const float* a, const float* b, float* c) { }\n'
    target, _ = write_problem(new_problem_from_fields(fields(reference_source=source), tmp_path), tmp_path)
    assert (target / "ref_kernel.cu").read_text() == source


def test_runtime_scalars_join_the_stub_signature(tmp_path: Path) -> None:
    args = fields()["args"]
    args[0]["placements"] = ["host", "runtime"]
    target, problem = write_problem(new_problem_from_fields(fields(args=args), tmp_path), tmp_path)
    assert problem.boundary_signature() == "int LEN, const float* a, const float* b, float* c"  # args order
    assert "vadd_ref(int LEN, const float* a," in (target / "ref_kernel.cu").read_text()


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"grid": {"x": "LEN / 0"}}, "vadd/problem.yaml: grid.x: division by zero"),
        ({"forbid": [{"pattern": "(", "reason": ""}]}, "vadd/problem.yaml: rules.forbid[0].pattern: invalid regular"),
        ({"reference_source": "// nothing here\n"}, "vadd/problem.yaml: reference.function: no __global__ function"),
        ({"name": "../escape"}, "escape: name: '../escape' must be a plain directory name"),
    ],
)
def test_a_bad_problem_writes_nothing(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    before = snapshot(tmp_path)
    with pytest.raises(ProblemError) as info:
        write_problem(new_problem_from_fields(fields(**changes), tmp_path), tmp_path)
    assert expected in str(info.value)
    assert ".new-" not in str(info.value)
    assert snapshot(tmp_path) == before


def test_bad_fields_are_one_line(tmp_path: Path) -> None:
    bad = fields()
    bad["args"][1]["dtype"] = "half"
    with pytest.raises(ProblemError) as info:
        new_problem_from_fields(bad, tmp_path / "vadd")
    assert str(info.value).endswith("args[1] (a).dtype: unknown dtype 'half' (allowed: int, float, double)")


def test_refuses_an_existing_target(tmp_path: Path) -> None:
    (tmp_path / "vadd").mkdir()
    (tmp_path / "vadd" / "mine.txt").write_text("keep")
    before = snapshot(tmp_path)
    with pytest.raises(ProblemError, match="already exists"):
        write_problem(new_problem_from_fields(fields(), tmp_path), tmp_path)
    assert snapshot(tmp_path) == before


def test_written_problem_round_trips(tmp_path: Path) -> None:
    target, problem = write_problem(new_problem_from_fields(fields(), tmp_path), tmp_path)
    again = load_problem(target)
    assert again.primary.sizes == problem.primary.sizes == {"a": 1 << 20, "b": 1 << 20, "c": 1 << 20}
    assert "init" not in (target / "inputs.yaml").read_text().splitlines()[-1]  # an output's init is not written
