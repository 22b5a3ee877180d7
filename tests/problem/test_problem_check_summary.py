"""`cacao --check`: the summary, from any working directory, for every shipped problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from problem_fixtures import REPO, edit_yaml

from cacao_tui.cli import main
from cacao_tui.problem import load_problem
from cacao_tui.problem.summary import human_bytes, render_check

SHIPPED = sorted(p.name for p in (REPO / "problems").iterdir() if (p / "problem.yaml").is_file())


def test_mmul_summary_names_everything() -> None:
    text = render_check(load_problem(REPO / "problems" / "mmul"))
    for expected in (
        "boundary   (const float* A, const float* B, float* C)",
        "A  DIM_M * DIM_K = 4,194,304 float = 16,777,216 bytes (16.0 MiB)",
        "total  50,331,648 bytes (48.0 MiB)",
        "grid (128, 128, 1) blocks",
        "reference  cuda  ref_kernel.cu  function mmul_ref  block (16, 16, 1)",
        "forbid /\\bcublas/",
        "default: 50,331,648 bytes moved (48.0 MiB), 17,179,869,184 flops",
        "-DDIM_M, -DDIM_N, -DDIM_K",
    ):
        assert expected in text, expected


def test_args_are_listed_in_order() -> None:
    text = render_check(load_problem(REPO / "problems" / "stencil"))
    rows = [line.split() for line in text.splitlines()]
    names = [r[1] for r in rows if len(r) > 2 and r[0].isdigit() and r[2] in ("scalar", "buffer")]
    assert names == ["NX", "NY", "IN", "OUT"]


def test_cases_and_rules_in_the_summary() -> None:
    text = render_check(load_problem(REPO / "problems" / "stencil"))
    assert "square (primary): the inputs.yaml values; budget 15 s" in text
    assert "small: NX=1024, NY=1024" in text
    assert "tall: NX=512 NY=32768" in text and "grid (32, 2048, 1) blocks" in text
    assert "tuning budget 10 s" in text
    assert "forbid /thrust::/  (Thrust is not allowed; write the kernel yourself)" in text
    assert "- NX and NY change between cases" in text


def test_opencl_grid_is_explained(tiny: Path) -> None:
    edit_yaml(tiny / "problem.yaml", lambda d: d.update(global_size_type="opencl", grid={"x": "COUNT"}))
    text = render_check(load_problem(tiny))
    assert "grid (1024, 1, 1) threads (opencl): the reference launches (8, 1, 1) blocks of (128, 1, 1)" in text


def test_check_prints_warnings_and_ok(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_yaml(tiny / "problem.yaml", lambda d: d.update(colour="blue"))
    assert main(["--dir", str(tiny), "--check"]) == 0
    out = capsys.readouterr().out
    assert "- problem.yaml: colour: unknown key (ignored)" in out
    assert out.rstrip().splitlines()[-1].endswith("is a valid problem (1 warning)")


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 bytes"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024**3) == "3.0 GiB"


@pytest.mark.parametrize("name", SHIPPED)
def test_check_passes_for_shipped_problems_from_any_directory(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = REPO / "problems" / name
    for cwd, given in ((tmp_path, os.path.relpath(target, tmp_path)), (Path("/"), str(target)), (target, ".")):
        monkeypatch.chdir(cwd)
        assert main(["--dir", given, "--check"]) == 0
        out = capsys.readouterr().out
        assert f"problem    {load_problem(target).name}" in out
        assert "is a valid problem" in out


def test_console_script_and_module_from_another_directory(tmp_path: Path) -> None:
    """The installed `cacao` command and `python -m cacao_tui`, run from outside the repository."""
    cacao = Path(sys.executable).parent / "cacao"
    commands = [[sys.executable, "-m", "cacao_tui"]]
    if cacao.exists():
        commands.append([str(cacao)])
    for command in commands:
        done = subprocess.run(
            [*command, "--dir", str(REPO / "problems" / "mmul"), "--check"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert "OK: " in done.stdout
        bad = subprocess.run(
            [*command, "--dir", "nowhere", "--check"], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 2
        assert bad.stderr.splitlines()[0].startswith("cacao: error: --dir nowhere: no such directory")
        assert "Traceback" not in bad.stderr
