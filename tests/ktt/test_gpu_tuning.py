"""GPU tests: every shipped example tunes to a valid best; hostile kernels are classified and never best.

They run ``python -m ktt tune`` as the engine does (a subprocess, JSON lines on stdout).
Set KTT_GPU_TEST_OUT to a directory to keep summaries, results and the ncu CSV there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ktt.protocol import ConfigResult, ProfileReport, TuneSummary

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).parent / "data" / "hostile"
pytestmark = pytest.mark.gpu


def _keep(path: Path, name: str) -> None:
    dest = os.environ.get("KTT_GPU_TEST_OUT")
    if dest and path.exists():
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(dest) / name)


def run_ktt(*args: str | Path, timeout: float = 300) -> tuple[int, list[dict]]:
    proc = subprocess.run(
        [sys.executable, "-m", "ktt", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode not in (0, 1):
        print(proc.stdout[-4000:], proc.stderr[-4000:])
    return proc.returncode, lines


def tune(
    problem: Path, kernel: Path, spec: Path, out: Path, *extra: str, timeout: float = 300
) -> tuple[int, TuneSummary]:
    code, lines = run_ktt(
        "tune", "--problem", problem, "--kernel", kernel, "--spec", spec, "--output", out, *extra, timeout=timeout
    )
    assert lines, "ktt tune printed nothing"
    assert lines[-1]["type"] == "result", lines[-1]
    summary = TuneSummary.model_validate(lines[-1])
    assert (out / "summary.json").exists()
    assert any(ln["type"] == "progress" for ln in lines)
    return code, summary


def results(out: Path) -> list[ConfigResult]:
    return [ConfigResult.model_validate_json(ln) for ln in (out / "results.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, TuneSummary, Path]]:
    done: dict[str, tuple[int, TuneSummary, Path]] = {}
    for name in ("mmul", "transpose", "softmax", "stencil"):
        example = ROOT / "problems" / name / "example"
        out = tmp_path_factory.mktemp(f"tune-{name}")
        code, summary = tune(
            ROOT / "problems" / name,
            example / "kernels.cu",
            example / "tuning.yaml",
            out,
            "--duration",
            "12",
            "--reference-time",
            str(out / "reference_time.json"),
        )
        _keep(out / "summary.json", f"summary_{name}.json")
        _keep(out / "results.jsonl", f"results_{name}.jsonl")
        done[name] = (code, summary, out)
    return done


@pytest.mark.parametrize("name", ["mmul", "transpose", "softmax", "stencil"])
def test_example_tunes_to_a_valid_best(tuned: dict, name: str) -> None:
    code, summary, out = tuned[name]
    assert code == 0, summary.message
    assert summary.ok and summary.best is not None
    assert summary.best.status == "ok" and summary.best.confirmed
    assert summary.best.time_ms and summary.best.time_ms > 0
    assert summary.reference_ms and summary.speedup and summary.speedup > 0
    assert summary.reference_source == "measured"
    written = json.loads((out / "reference_time.json").read_text())  # the original's form: microseconds
    assert written["reference_time_us"] / 1e3 == pytest.approx(summary.reference_ms)
    primary = "square" if name == "stencil" else "default"  # stencil declares cases; the first is the primary
    rows = [r for r in results(out) if r.shape == primary]
    assert len(rows) == next(c.evaluated for c in summary.cases if c.name == primary)
    assert all(r.status != "suspect" for r in rows)
    cases = {c.name: c for c in summary.cases}
    assert primary in cases
    if name == "stencil":
        assert set(cases) == {"square", "small", "tall"}
        assert all(c.status == "ok" and c.speedup for c in cases.values()), cases
        assert summary.score is not None


def test_seeded_reference_time_is_used_and_kept(tmp_path: Path) -> None:
    example = ROOT / "problems" / "transpose" / "example"
    ref = tmp_path / "reference_time.json"
    ref.write_text(json.dumps({"ms": 100.0, "source": "seeded"}))
    code, summary = tune(
        ROOT / "problems" / "transpose",
        example / "kernels.cu",
        example / "tuning.yaml",
        tmp_path / "out",
        "--max-configs",
        "3",
        "--reference-time",
        str(ref),
    )
    assert code == 0
    assert summary.reference_source == "seeded"
    assert summary.reference_ms == 100.0
    assert summary.speedup == pytest.approx(100.0 / summary.best.time_ms)
    assert json.loads(ref.read_text()) == {"ms": 100.0, "source": "seeded"}


def test_profile_the_best_mmul(tuned: dict, tmp_path: Path) -> None:
    _, _summary, out = tuned["mmul"]
    example = ROOT / "problems" / "mmul" / "example"
    code, lines = run_ktt(
        "profile",
        "--problem",
        ROOT / "problems" / "mmul",
        "--kernel",
        example / "kernels.cu",
        "--spec",
        example / "tuning.yaml",
        "--from-summary",
        out / "summary.json",
        "--output",
        tmp_path,
    )
    report = ProfileReport.model_validate(lines[-1])
    if report.error_kind in ("ncu_missing", "no_permission"):
        pytest.skip(f"ncu cannot profile here: {report.error}")
    assert code == 0, report.error
    _keep(tmp_path / "profile_raw.csv", "ncu_raw_mmul.csv")
    _keep(tmp_path / "profile.json", "profile_mmul.json")
    assert report.ok and len(report.kernels) == 1
    k = report.kernels[0]
    assert k.kernel == "mmul_tiled"
    assert len([m for m in k.metrics if m.value is not None]) >= 20
    assert k.roofline in ("memory-bound", "compute-bound", "latency-bound")
    assert k.duration_ms and k.duration_ms > 0


def _hostile_spec(tmp_path: Path, variants: list[int] | None = None) -> Path:
    from ktt.inputs import make_buffer
    from ktt.problem import load_problem

    problem = load_problem(HOSTILE)
    x = next(b for b in problem.buffers if b.name == "X")
    x0 = make_buffer(problem, problem.primary, x, 0, 0, tmp_path)[:1].view(np.int32)[0]
    text = (HOSTILE / "tuning.yaml.in").read_text().replace("@X0BITS@", str(int(x0)))
    if variants is not None:
        text = text.replace("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]", str(variants))
    spec = tmp_path / "tuning.yaml"
    spec.write_text(text)
    return spec


EXPECTED = {
    0: "ok",
    1: "compile_failed",
    2: "runtime_error",
    3: "runtime_error",
    4: "timeout",
    5: "validation_failed",
    6: "validation_failed",
    7: "validation_failed",
    8: "validation_failed",
    9: "validation_failed",
    10: "ok",
    11: "validation_failed",
    12: "launch_failed",
    13: "compile_failed",
    14: "compile_failed",
    15: "validation_failed",
}


def test_hostile_kernels_are_classified_and_never_best(tmp_path: Path) -> None:
    spec = _hostile_spec(tmp_path)
    out = tmp_path / "out"
    code, summary = tune(
        HOSTILE,
        HOSTILE / "kernels.cu",
        spec,
        out,
        "--duration",
        "0",
        "--config-timeout",
        "5",
        "--reference-time",
        str(tmp_path / "ref.json"),
        timeout=600,
    )
    _keep(out / "results.jsonl", "results_hostile.jsonl")
    _keep(out / "summary.json", "summary_hostile.json")
    rows = results(out)
    by_variant = {int(r.config["VARIANT"]): r for r in rows}
    assert len(rows) == 16 and set(by_variant) == set(EXPECTED), "a result was lost"
    got = {v: r.status for v, r in by_variant.items()}
    assert got == EXPECTED, {v: (r.status, r.error) for v, r in by_variant.items()}
    assert code == 0 and summary.best is not None
    assert summary.best.config["VARIANT"] == 0 and summary.best.confirmed
    reasons = {v: (by_variant[v].error or "") for v in by_variant}
    assert "out-of-bounds" in reasons[5]
    assert "never written" in reasons[6]
    assert "input X was modified" in reasons[8]
    assert "fresh input" in reasons[9] and "fresh input" in reasons[11]
    assert "NaN" in reasons[15]
    # The side-stream work (about 5 ms of spinning) is inside the measured time.
    assert by_variant[10].time_ms and by_variant[10].time_ms > 3.0
    assert summary.worker_restarts >= 3


def _output_equals_init(tmp_path: Path, poison: bool) -> Path:
    """The hostile problem where the right answer is the output's init data: X zeros, so Y = 2X + 1 = 1,
    and Y starts each run as ones. A kernel that writes nothing (variant 6) is then right."""
    problem = tmp_path / ("poisoned" if poison else "plain")
    shutil.copytree(HOSTILE, problem)
    inputs = problem / "inputs.yaml"
    text = inputs.read_text().replace("access: read, init: random, seed: 1", "access: read, init: zeros")
    text = text.replace("access: write, validate: true", 'access: write, init: custom, validate: true, '
                        'body: "return std::vector<float>(N, 1.0f);"')  # fmt: skip
    inputs.write_text(text)
    if poison:
        yaml_path = problem / "problem.yaml"
        text = yaml_path.read_text().replace("  tolerance: 1e-6\n", "  tolerance: 1e-6\n  poison_outputs: true\n")
        yaml_path.write_text(text)
    return problem


@pytest.mark.parametrize("poison", [False, True])
def test_an_output_that_equals_its_init_is_warned_of_and_caught_by_the_poison(tmp_path: Path, poison: bool) -> None:
    """Under the init contract no comparison can tell "wrote the right values" from "wrote nothing"
    when the right values are the init data. The run says so (a warning naming Y and the fix); the
    physical floor cannot be counted on (on the H200 launching 2^25 idle threads takes 0.087 ms, above
    the 0.065 ms floor of 8 N bytes). With validation.poison_outputs the do-nothing kernel fails."""
    problem = _output_equals_init(tmp_path, poison)
    spec = _hostile_spec(tmp_path, [0, 6])
    _, summary = tune(problem, problem / "kernels.cu", spec, tmp_path / "out", "--duration", "0",
                      "--reference-time", str(tmp_path / "ref.json"))  # fmt: skip
    by_variant = {int(r.config["VARIANT"]): r for r in results(tmp_path / "out")}
    assert by_variant[0].status == "ok" and summary.best is not None
    warned = [w for w in summary.warnings if w.startswith("Y: the reference leaves this output equal to its init")]
    if poison:
        assert by_variant[6].status == "validation_failed"
        assert "never written (still poisoned)" in (by_variant[6].error or "")
        assert summary.best.config["VARIANT"] == 0 and not warned
    else:
        assert warned and "poison_outputs: true" in warned[0], summary.warnings
        assert by_variant[6].status in ("ok", "suspect")  # the limit the warning names


def test_time_below_the_physical_floor_is_suspect(tmp_path: Path) -> None:
    problem = tmp_path / "hostile"
    shutil.copytree(HOSTILE, problem)
    yaml_path = problem / "problem.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("bytes: 8 * N", "bytes: 1000 * 8 * N"))
    spec = _hostile_spec(tmp_path, [0])
    code, summary = tune(
        problem,
        problem / "kernels.cu",
        spec,
        tmp_path / "out",
        "--duration",
        "0",
        "--reference-time",
        str(tmp_path / "ref.json"),
    )
    assert code == 1 and summary.best is None
    assert results(tmp_path / "out")[0].status == "suspect"


PIPELINE = """
tune_params: {BLOCK: [64, 256], SPILL: [0, 1]}
scratch:
  - {name: tmp, dtype: float, size: N}
launches:
  - kernel: stage1
    grid: {x: (N + BLOCK - 1) / BLOCK}
    block: {x: BLOCK}
    args: [X, tmp, {value: N, dtype: int}]
  - kernel: stage2
    grid: {x: (N + BLOCK - 1) / BLOCK}
    block: {x: BLOCK}
    args: [tmp, Y]
"""


def test_pipeline_with_scratch_is_timed_per_launch_and_guarded(tmp_path: Path) -> None:
    tiny = Path(__file__).parent / "data" / "tiny"
    spec = tmp_path / "tuning.yaml"
    spec.write_text(PIPELINE)
    code, summary = tune(
        tiny,
        tiny / "pipeline.cu",
        spec,
        tmp_path / "out",
        "--duration",
        "0",
        "--reference-time",
        str(tmp_path / "ref.json"),
    )
    rows = [r for r in results(tmp_path / "out") if r.shape == "default"]
    assert code == 0 and summary.best is not None and summary.best.config["SPILL"] == 0
    assert summary.best.launch_ms is not None and len(summary.best.launch_ms) == 2
    spilled = [r for r in rows if r.config["SPILL"] == 1]
    assert spilled and all(r.status == "validation_failed" and "scratch tmp" in (r.error or "") for r in spilled)
    assert [c.name for c in summary.cases] == ["default", "half"] and all(c.speedup for c in summary.cases)


def test_a_guard_hit_does_not_leak_into_the_next_configuration(tmp_path: Path) -> None:
    """The out-of-bounds writer runs first (one compile worker, exhaustive order); the honest
    kernel after it must see freshly written canaries, not the previous configuration's hit."""
    spec = _hostile_spec(tmp_path, variants=[5, 0])
    out = tmp_path / "out"
    code, summary = tune(
        HOSTILE,
        HOSTILE / "kernels.cu",
        spec,
        out,
        "--duration",
        "0",
        "--strategy",
        "exhaustive",
        "--compile-workers",
        "1",
        "--reference-time",
        str(tmp_path / "ref.json"),
    )
    rows = sorted(results(out), key=lambda r: r.index)
    assert [int(r.config["VARIANT"]) for r in rows if r.shape == "default"][:2] == [5, 0]
    by_variant = {int(r.config["VARIANT"]): r for r in rows}
    assert by_variant[5].status == "validation_failed" and "out-of-bounds" in (by_variant[5].error or "")
    assert by_variant[0].status == "ok", by_variant[0].error
    assert code == 0 and summary.best is not None and summary.best.config["VARIANT"] == 0
