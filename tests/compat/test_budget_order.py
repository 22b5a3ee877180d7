"""The tuning budget of each case, from ``cacao --timeout`` down to what ktt tune uses.

The order (docs/PROBLEM_YAML_GUIDE.md, ``tuning``): ``--timeout`` for every case, else the
case's ``duration_s``, else ``tuning.duration_s``; a ``duration_s`` the model put in
tuning.yaml is ignored. The chain is followed for real: cacao's argument parser, the run
settings, the run node's per-case budgets, the ``ktt tune`` command line KttTuner builds, and
ktt's own parser and budget rule (no GPU: the tuner is only constructed, never started).
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import cacao_tui.ktt_client as ktt_client
from cacao_tui.cli import UsageError, build_parser
from cacao_tui.ktt_client import KttTuner, TuneRequest
from cacao_tui.nodes.run import case_budgets
from ktt.cli import _parser as ktt_parser
from ktt.problem import load_problem
from ktt.tune import TuneOptions, Tuner

CORPUS = Path(__file__).resolve().parent / "problems"
KERNELS = Path(__file__).resolve().parents[1] / "ktt" / "compat_gpu" / "terrain_custom"


@pytest.fixture
def terrain(tmp_path: Path) -> Path:
    """terrain_custom: tuning.duration_s 8; case 'square' has no budget of its own, 'strip' has 3."""
    target = tmp_path / "terrain_custom"
    shutil.copytree(CORPUS / "terrain_custom", target)
    return target


def _ktt_budgets(
    tmp_path: Path, problem: Path, timeout: float | None, monkeypatch: pytest.MonkeyPatch
) -> list[tuple[float | None, str]]:
    """The budgets ``ktt tune`` would use, given the command line cacao builds for this --timeout."""
    spec = tmp_path / "tuning.yaml"
    spec.write_text((KERNELS / "tuning.yaml").read_text() + "duration_s: 0.5\n")  # the model's: ignored
    captured: list[list[str]] = []

    async def fake_run_streaming(argv: list[str], **_: object) -> object:
        captured.append(argv)
        raise RuntimeError("stop here: only the command line is wanted")

    request = TuneRequest(
        problem_dir=problem, kernel=KERNELS / "kernels.cu", spec=spec, out_dir=tmp_path / "out", device=0,
        duration_s=timeout, watchdog_s=60, reference_time=tmp_path / "reference_time.json", problem_budget=True,
    )  # fmt: skip
    monkeypatch.setattr(ktt_client, "run_streaming", fake_run_streaming)
    with pytest.raises(RuntimeError, match="stop here"):
        asyncio.run(KttTuner().tune(request, lambda _: None))
    argv = captured[0]
    args = ktt_parser().parse_args(argv[argv.index("tune") :])
    opts = TuneOptions(
        problem_dir=args.problem, kernel=args.kernel, spec=args.spec, output=args.output, duration_s=args.duration,
        reference_time=args.reference_time, problem_budget=args.problem_budget, arch="sm_90",
        worker_command=["true"], cache_dir=tmp_path / "cache",
    )  # fmt: skip
    tuner = Tuner(opts, lambda _: None)
    tuner.load()  # reads the problem and the spec, builds each case's search; starts nothing
    return [tuner.case_budget(shape) for shape in tuner.problem.shapes]


def _settings(*cli: str) -> SimpleNamespace:
    args = build_parser().parse_args(["--dir", "x", *cli])
    return SimpleNamespace(timeout_s=args.timeout)


def test_without_timeout_each_case_has_its_own_else_the_problems(
    tmp_path: Path, terrain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = SimpleNamespace(settings=_settings(), problem=load_problem(terrain))
    assert case_budgets(deps) == [("square", 8.0), ("strip", 3.0)]  # type: ignore[arg-type]
    assert _ktt_budgets(tmp_path, terrain, None, monkeypatch) == [(8.0, "problem.yaml"), (3.0, "problem.yaml")]


def test_timeout_replaces_the_budget_of_every_case(
    tmp_path: Path, terrain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deps = SimpleNamespace(settings=_settings("--timeout", "2.5"), problem=load_problem(terrain))
    assert case_budgets(deps) == [("square", 2.5), ("strip", 2.5)]  # type: ignore[arg-type]
    assert _ktt_budgets(tmp_path, terrain, 2.5, monkeypatch) == [(2.5, "--duration"), (2.5, "--duration")]


def test_timeout_must_be_positive() -> None:
    with pytest.raises(UsageError, match="--timeout: must be a positive number"):
        build_parser().parse_args(["--dir", "x", "--timeout", "0"])


def test_without_any_budget_the_originals_100_s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither --timeout nor a case's duration_s nor tuning.duration_s: 100 s, as the original's config.py."""
    target = tmp_path / "terrain_custom"
    shutil.copytree(CORPUS / "terrain_custom", target)
    text = (target / "problem.yaml").read_text()
    text = re.sub(r"(?m)^tuning:\n(  .*\n)+", "", text)
    text = re.sub(r"(?m)^    duration_s: .*\n", "", text)
    (target / "problem.yaml").write_text(text)
    assert "duration_s" not in text
    deps = SimpleNamespace(settings=_settings(), problem=load_problem(target))
    assert case_budgets(deps) == [("square", 100.0), ("strip", 100.0)]  # type: ignore[arg-type]
    assert _ktt_budgets(tmp_path, target, None, monkeypatch) == [(100.0, "problem.yaml"), (100.0, "problem.yaml")]
    assert "else 100)" in build_parser().format_help()
