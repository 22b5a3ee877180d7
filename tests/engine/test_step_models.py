"""Models per step (issue 21): --model-plan and --model-decide give those steps a model of
their own (any registry provider), recorded as such, sharing the run's totals and budget."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from cacao_tui.launch import build_engine
from cacao_tui.run_request import RunRequest
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import Context
from ktt.problem import load_problem


def test_the_plan_and_decide_steps_use_their_own_models(mmul_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(mmul_dir.parent)
    request = RunRequest(problem=load_problem(mmul_dir), front_end="lines", dry_run=True, provider="replay",
                         model_plan=(None, "a-cheaper-planner"), model_decide=("replay", "a-decider"))  # fmt: skip
    engine, _bus = build_engine(request)
    deps = engine.deps
    assert deps.step_llms["plan"].model == "a-cheaper-planner" and deps.step_llms["decide"].model == "a-decider"
    assert deps.step_llms["plan"].usage is deps.llm.usage  # one run's totals and one budget
    finished = asyncio.run(engine.run())
    assert finished.status == "ok", finished
    layout = RunLayout(mmul_dir)
    it = layout.branch("b1-tiling").iteration(1).llm
    model = {node: json.loads((it / f"{node}_000.json").read_text())["model"] for node in ("plan", "author", "decide")}
    assert model["plan"] == "a-cheaper-planner" and model["decide"] == "a-decider" and model["author"] == deps.llm.model
    settings = read_model(layout.context, Context).settings
    assert (settings.model_plan, settings.model_decide) == ("replay:a-cheaper-planner", "replay:a-decider")
    assert deps.llm.usage.run.calls == len(list(layout.output.rglob("llm/*.json")))  # every step's calls counted


def test_a_step_model_without_its_providers_key_is_one_line_before_anything_is_written(
    mmul_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cacao_tui.launch import main

    for var in ("ANTHROPIC_API_KEY", "CLAUDE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(mmul_dir.parent)
    request = RunRequest(problem=load_problem(mmul_dir), front_end="lines", dry_run=True, provider="replay",
                         model_plan=("anthropic", "claude-haiku-4-5"))  # fmt: skip
    assert main(request) == 2
    assert not (mmul_dir / "output").exists()
