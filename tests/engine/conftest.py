"""Engine test fixtures: a copy of a shipped problem, and an engine on test fakes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cacao_tui.engine.engine import Engine
from cacao_tui.engine.events import EventBus
from cacao_tui.engine.scheduler import GpuScheduler
from cacao_tui.llm import Provider, TrackedLLM
from cacao_tui.nodes.context import RunDeps
from cacao_tui.settings import DEFAULTS, Defaults
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import GpuInfo, RunSettings
from ktt.problem import load_problem
from tests.fake_tuner import FakeTuner

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def mmul_dir(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


def make_engine(
    problem_dir: Path,
    provider: Provider,
    *,
    tuner: object | None = None,
    bus: EventBus | None = None,
    defaults: Defaults = DEFAULTS,
    concurrency: int = 4,
    resumed: bool = False,
    **settings: object,
) -> Engine:
    problem = load_problem(problem_dir)
    layout = RunLayout(problem.directory)
    # A replay's recorded usage is costed at its own price, as the command's factory does.
    llm = TrackedLLM(provider, record_root=layout.output, price=getattr(provider, "price", None))
    base = {"max_iter": 3, "max_depth": 1, "n_strategies": 2, "provider": provider.name, "model": provider.model}
    base.update(settings)
    run_settings = RunSettings(**base)  # type: ignore[arg-type]
    deps = RunDeps(
        problem=problem,
        layout=layout,
        llm=llm,
        tuner=tuner or FakeTuner(),  # type: ignore[arg-type]
        settings=run_settings,
        defaults=defaults,
        gpu=GpuInfo(name="fake", arch="sm_90"),
        devices=GpuScheduler([0]),
    )
    return Engine(deps, bus or EventBus(), concurrency=concurrency, resumed=resumed)
