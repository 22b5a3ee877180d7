"""The one reference-stub generator (cacao_tui.problem.writer.reference_stub): a new problem of
each reference type saves, passes --check, and its reference fails loudly until it is written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cacao_tui.cli import main
from cacao_tui.problem.writer import check_source, new_source, reference_stub, save_problem
from ktt.problem import load_problem

LOUD = {"cuda": "__trap();", "cpu_c": "abort();", "python": "raise NotImplementedError"}
FILES = {"cuda": "ref_kernel.cu", "cpu_c": "ref_cpu.c", "python": "ref.py"}


@pytest.mark.parametrize("rtype", ["cuda", "cpu_c", "python"])
def test_a_new_problem_of_each_type_checks_and_its_stub_fails_loudly(
    tmp_path: Path, rtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = new_source("vadd", rtype)
    assert LOUD[rtype] in (source.reference_text or "")
    save_problem(source, tmp_path / "vadd", existing=False)
    target = tmp_path / "vadd"
    assert sorted(p.name for p in target.iterdir()) == sorted(["problem.yaml", "inputs.yaml", FILES[rtype]])
    problem = load_problem(target)
    assert problem.reference.type == rtype and problem.reference.function == "vadd_ref"
    assert main(["--dir", str(target), "--check"]) == 0
    assert capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["vadd"]  # nothing else left behind


def test_runtime_scalars_join_the_stub_signature_in_args_order(tmp_path: Path) -> None:
    source = new_source("vadd")
    source.inputs["args"][0]["placements"] = ["host", "runtime"]
    source.reference_text = reference_stub("cuda", "vadd_ref", source.inputs)
    assert 'void vadd_ref(int LEN, const float* x, float* y)' in source.reference_text
    result = check_source(source, tmp_path / "vadd", existing=False)
    assert result.ok, result.error
    assert result.signature == 'extern "C" __global__ void vadd_ref(int LEN, const float* x, float* y)'
    # The C reference takes the buffers only; scalars arrive as -D macros.
    assert "void vadd_ref(const float* x, float* y)" in reference_stub("cpu_c", "vadd_ref", source.inputs)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_stub_compiles_cleanly(tmp_path: Path) -> None:
    stub = tmp_path / "ref_cpu.c"
    stub.write_text(reference_stub("cpu_c", "vadd_ref", new_source("vadd").inputs))
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-c", "-DLEN=16", str(stub), "-o", str(tmp_path / "r.o")],
                   check=True)  # fmt: skip


@pytest.mark.parametrize("rtype", ["cuda", "cpu_c", "python"])
def test_check_warns_about_a_stub_reference_and_a_run_refuses_it(
    tmp_path: Path, rtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A problem saved with the editor's stub as its reference: --check passes with a warning that
    names the file; a run refuses it in one line (exit 2) before anything is written."""
    save_problem(new_source("vadd", rtype), tmp_path / "vadd", existing=False)
    target = tmp_path / "vadd"
    assert main(["--dir", str(target), "--check"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the warnings section wraps its lines
    assert f"{FILES[rtype]}: the reference is still the editor's stub: it fails when run; write it first" in out
    assert "is a valid problem (1 warning)" in out
    before = sorted(p.name for p in target.iterdir())
    assert main(["--dir", str(target), "--provider", "replay", "--no-ui", "--dry-run"]) == 2
    err = capsys.readouterr().err.splitlines()
    stub = "the reference is still the editor's stub: it fails when run; write it first"
    assert len(err) == 1 and f"{FILES[rtype]}: {stub}" in err[0]  # one line (a hint may follow on it)
    assert "Traceback" not in "\n".join(err)
    assert sorted(p.name for p in target.iterdir()) == before  # nothing written
    # Written, the reference passes without the warning.
    ref = target / FILES[rtype]
    ref.write_text(ref.read_text().replace(LOUD[rtype], "//" if rtype != "python" else "pass  #"))
    assert main(["--dir", str(target), "--check"]) == 0
    assert "editor's stub" not in capsys.readouterr().out
