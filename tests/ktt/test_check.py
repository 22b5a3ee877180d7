"""``ktt check``: every shipped example passes without a GPU; planted mistakes are reported where they are."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from ktt_paths import PROBLEMS, ROOT

from cacao_tui.nodes.compile_check import format_report
from ktt.check import check_kernel
from ktt.cli import main
from ktt.problem import load_problem

# One line of each example replaced by a mistake: (the line's start, its replacement).
PLANTED = {
    "mmul": ("As[c + 0][r] = a.x;", "            As[c + 0][r] = a.q;"),
    "transpose": ("const int x = blockIdx.x", "    const int x = blockIdx.x * TILE + threadIdx.x + undefined_offset;"),
    "softmax": ("float m = NEG_INF;", "    float m = NEG_INF + undefined_start;"),
    "stencil": ("float up = y0 > 0", "    float up = y0 > 0 ? __ldg(&IN[(size_t)(y0 - 1) * NX + x]) : bogus;"),
}


def example(name: str) -> tuple[Path, Path, Path]:
    d = ROOT / "problems" / name
    return d, d / "example" / "kernels.cu", d / "example" / "tuning.yaml"


@pytest.mark.parametrize("name", PROBLEMS)
def test_example_passes_with_no_gpu(name: str, compile_cache: Path, capsys: pytest.CaptureFixture) -> None:
    problem_dir, kernel, spec = example(name)
    code = main(
        [
            "check",
            "--problem",
            str(problem_dir),
            "--kernel",
            str(kernel),
            "--spec",
            str(spec),
            "--json",
            "--arch",
            "sm_90",
            "--cache-dir",
            str(compile_cache),
        ]
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0, report["message"]
    assert report["ok"] and report["sampled"] >= 1 and not report["missing_kernels"]
    if name == "stencil":
        assert {c["shape"] for c in report["configs"]} == {"square", "small", "tall"}


def planted(name: str) -> tuple[str, int]:
    """The example's source with one line broken, and that line's number."""
    source = example(name)[1].read_text().splitlines()
    prefix, replacement = PLANTED[name]
    line = next(i for i, text in enumerate(source) if text.strip().startswith(prefix)) + 1
    source[line - 1] = replacement
    return "\n".join(source) + "\n", line


@pytest.mark.parametrize("name", PROBLEMS)
def test_planted_error_is_reported_at_its_line(name: str, compile_cache: Path) -> None:
    problem_dir, _, spec = example(name)
    text, line = planted(name)
    report = check_kernel(load_problem(problem_dir), text, spec, sample=2, arch="sm_90", cache_dir=compile_cache)
    assert not report.ok
    first = report.configs[0].diagnostics[0]
    assert first.file == "kernels.cu" and first.line == line, report.configs[0].diagnostics
    assert report.message and f"kernels.cu:{line}:" in report.message


def test_forbidden_pattern_stops_before_compiling(compile_cache: Path) -> None:
    problem_dir, kernel, spec = example("stencil")
    text = kernel.read_text() + "\n// comments are ignored: thrust::sort\nint dummy() { return thrust::sort(); }\n"
    report = check_kernel(load_problem(problem_dir), text, spec, cache_dir=compile_cache)
    assert not report.ok and report.sampled == 0
    n = text.count("\n")
    assert report.forbid == [
        f"line {n}: forbidden pattern /thrust::/: Thrust is not allowed; write the kernel yourself"
    ]


def test_missing_kernel_and_spec_errors(compile_cache: Path) -> None:
    problem_dir, kernel, spec = example("transpose")
    problem = load_problem(problem_dir)
    text = kernel.read_text().replace("transpose_tiled", "transpose_renamed")
    report = check_kernel(problem, text, spec, sample=1, cache_dir=compile_cache)
    assert not report.ok and report.missing_kernels == ["transpose_tiled"]
    not_extern = kernel.read_text().replace('extern "C" ', "")
    report = check_kernel(problem, not_extern, spec, sample=1, cache_dir=compile_cache)
    assert report.missing_kernels == ["transpose_tiled"] and 'extern "C"' in (report.message or "")
    report = check_kernel(problem, kernel.read_text(), "launches: [", cache_dir=compile_cache)
    assert not report.ok and "YAML" in (report.message or "")
    yaml_text = spec.read_text().replace("TILE % BLOCK_ROWS == 0", "TILE % BLOCK_ROWS == 0 && TILE > 1000")
    report = check_kernel(problem, kernel.read_text(), yaml_text, cache_dir=compile_cache)
    assert not report.ok and "no configuration satisfies" in (report.message or "")


def test_cli_exit_codes(tmp_path: Path, compile_cache: Path, capsys: pytest.CaptureFixture) -> None:
    problem_dir, kernel, spec = example("transpose")
    bad_kernel = tmp_path / "kernels.cu"
    bad_kernel.write_text(planted("transpose")[0])
    args = ["check", "--problem", str(problem_dir), "--spec", str(spec), "--cache-dir", str(compile_cache)]
    assert main([*args, "--kernel", str(bad_kernel)]) == 1
    assert main([*args, "--kernel", str(tmp_path / "missing.cu")]) == 2
    broken = tmp_path / "problem"
    shutil.copytree(problem_dir, broken, ignore=shutil.ignore_patterns("output", "example"))
    (broken / "problem.yaml").write_text("name: [oops\n")
    assert main(["check", "--problem", str(broken), "--kernel", str(kernel), "--spec", str(spec)]) == 2
    out = capsys.readouterr().out
    assert "check FAILED" in out and "kernels.cu:" in out


def _multipass_spec(restriction: str) -> str:
    """The multipass_sum example's spec with one restriction that reads the case's COLS."""
    spec = (ROOT / "problems" / "multipass_sum" / "example" / "tuning.yaml").read_text()
    return spec.replace("scratch:\n", f"restrictions:\n  - {restriction}\nscratch:\n", 1)


def test_each_case_is_checked_with_a_configuration_its_sizes_allow(compile_cache: Path) -> None:
    """A restriction on a case's sizes: the configuration compiled for that case satisfies it (the
    trial's check showed a case's sample its restriction excluded), and the case's space is counted."""
    problem = load_problem(ROOT / "problems" / "multipass_sum")
    source = (ROOT / "problems/multipass_sum/example/kernels.cu").read_text()
    spec = _multipass_spec("BS * IPT * 4 <= COLS")
    report = check_kernel(problem, source, spec, arch="sm_90", cache_dir=compile_cache)
    assert report.ok, report.message
    many = [c for c in report.configs if c.shape == "many_rows"]
    assert len(many) == 1
    assert many[0].config["BS"] * many[0].config["IPT"] * 4 <= 4096  # many_rows: COLS = 4096
    base = [c for c in report.configs if c.shape != "many_rows"]
    assert any(c.config["BS"] * c.config["IPT"] * 4 > 4096 for c in base)  # the base extreme it must not reuse
    # many_rows allows BS * IPT <= 1024 of 5 x 5 values: (64: 1..16) 5, (128: 1..8) 4, (256: 1..4) 3, (512) 2, (1024) 1
    assert report.case_sizes == {"many_rows": 15}
    head = format_report(report, source).splitlines()[0]  # what the model reads
    assert "1 for the other shapes, whose restricted spaces hold: many_rows 15" in head
    assert f"{report.restricted_size:,} in the long_rows shape's space" in head


def test_a_case_its_restrictions_empty_fails_the_check(compile_cache: Path) -> None:
    problem = load_problem(ROOT / "problems" / "multipass_sum")
    source = (ROOT / "problems/multipass_sum/example/kernels.cu").read_text()
    spec = _multipass_spec("BS * IPT * 1024 <= COLS")
    report = check_kernel(problem, source, spec, arch="sm_90", cache_dir=compile_cache)
    assert not report.ok
    assert report.message is not None and report.message.startswith("case many_rows: no configuration satisfies")
    assert "COLS=4096" in report.message
    assert format_report(report, source).splitlines()[1] == report.message  # what the model reads


def test_the_cli_names_each_case_space(tmp_path: Path, compile_cache: Path, capsys: pytest.CaptureFixture) -> None:
    spec = tmp_path / "tuning.yaml"
    spec.write_text(_multipass_spec("BS * IPT * 4 <= COLS"))
    problem_dir = ROOT / "problems" / "multipass_sum"
    argv = ["check", "--problem", str(problem_dir), "--kernel", str(problem_dir / "example" / "kernels.cu")]
    code = main([*argv, "--spec", str(spec), "--arch", "sm_90", "--cache-dir", str(compile_cache)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  other cases' restricted spaces: many_rows 15\n" in out
