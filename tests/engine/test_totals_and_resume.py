"""Run totals survive --resume: tokens, cost, the call count and the --budget-usd cap are read
back from the call records; after --resume they equal those before plus the new calls,
also when the first part was SIGKILLed mid-step (its interrupted calls are kept)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.engine.control import queue_decision
from cacao_tui.engine.events import EventBus, RunStarted
from cacao_tui.engine.totals import record_paths
from cacao_tui.llm import Price
from cacao_tui.llm.recording import CallRecord
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults
from tests.engine.conftest import ROOT, make_engine
from tests.engine.scenario import Scenario

PRICE = Price(input=1.0, output=2.0, cached_input=0.0)  # USD per million tokens


class Metered(Scenario):
    """The scripted model (a FAKE), with 1000 input and 100 output tokens per call."""

    def respond(self, request):  # type: ignore[no-untyped-def]
        answer = super().respond(request)
        data = {"text": answer} if isinstance(answer, str) else dict(answer)
        data["usage"] = {"input_tokens": 1000, "output_tokens": 100}
        return data


def engine_for(problem: Path, scenario: Scenario, bus: EventBus, *, resumed: bool, budget: float | None = None):  # type: ignore[no-untyped-def]
    engine = make_engine(problem, scenario.provider(), bus=bus, max_iter=3, n_strategies=1, resumed=resumed)
    engine.deps.llm.price = PRICE
    if budget is not None:
        engine.deps.settings.budget_usd = budget
        engine.deps.llm.budget_usd = budget
    return engine


def test_totals_after_resume_are_the_earlier_ones_plus_the_new_calls(mmul_dir: Path) -> None:
    scenario = Metered(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "enough"})
    asyncio.run(engine_for(mmul_dir, scenario, EventBus(), resumed=False).run())
    layout = RunLayout(mmul_dir)
    before = read_model(layout.final_results, FinalResults)
    assert before.tokens["input"] == 1000 * len(scenario.calls) and before.cost_usd

    queue_decision(layout, "b1-alpha", "continue", default_max_iter=3)
    bus = EventBus()
    events: list[object] = []
    bus.subscribe(events.append)
    engine = engine_for(mmul_dir, scenario, bus, resumed=True)
    new_calls: list[CallRecord] = []
    engine.deps.llm.on_call = new_calls.append
    asyncio.run(engine.run())
    started = next(e for e in events if isinstance(e, RunStarted))
    assert started.input_tokens == before.tokens["input"] and started.cost_usd == pytest.approx(before.cost_usd)
    assert new_calls  # the reopened branch asked the model again
    after = read_model(layout.final_results, FinalResults)
    assert after.tokens["input"] == before.tokens["input"] + sum(r.usage.input_tokens for r in new_calls)
    assert after.tokens["output"] == before.tokens["output"] + sum(r.usage.output_tokens for r in new_calls)
    assert after.cost_usd == pytest.approx((before.cost_usd or 0) + sum(r.usage.cost_usd for r in new_calls))
    assert started.llm_calls + len(new_calls) == len(record_paths(layout.output)) == engine.deps.llm.usage.run.calls


def test_the_budget_cap_survives_resume(mmul_dir: Path) -> None:
    scenario = Metered(strategies=["alpha"], decide=lambda b, i: {"action": "stop", "reason": "enough"})
    asyncio.run(engine_for(mmul_dir, scenario, EventBus(), resumed=False, budget=1.0).run())
    layout = RunLayout(mmul_dir)
    spent = read_model(layout.final_results, FinalResults).cost_usd or 0.0
    assert 0 < spent < 1.0
    # Resume with a cap just above what was spent, then without one: the earlier cap applies.
    queue_decision(layout, "b1-alpha", "continue", default_max_iter=3)
    bus = EventBus()
    events: list[object] = []
    bus.subscribe(events.append)
    engine = engine_for(mmul_dir, scenario, bus, resumed=True)
    engine.deps.llm.budget_usd = None
    engine.deps.settings.budget_usd = None
    # The context of the first run carries the cap of 1.0; lower it there to what was spent.
    ctx_path = layout.context
    ctx = json.loads(ctx_path.read_text())
    ctx["settings"]["budget_usd"] = spent + 0.0005  # room for less than one more call (0.0012 each)
    ctx_path.write_text(json.dumps(ctx))
    finished = asyncio.run(engine.run())
    assert engine.deps.llm.budget_usd == pytest.approx(spent + 0.0005)
    assert finished.status == "budget"
    m = read_model(layout.branch("b1-alpha").manifest, BranchManifest)
    assert m.status == "stopped" and "LLM budget reached" in (m.stop_reason or "")


def _harness(problem: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tests.engine.harness", str(problem), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=240,
    )


def _tokens_on_disk(layout: RunLayout) -> int:
    return sum(CallRecord.model_validate_json(p.read_text()).usage.input_tokens for p in record_paths(layout.output))


@pytest.mark.parametrize("kill_after", [12, 47, 95])
def test_totals_survive_sigkill_mid_step(mmul_dir: Path, kill_after: int) -> None:
    session = mmul_dir / "session.jsonl"
    lines = []
    for line in session.read_text().splitlines():
        data = json.loads(line)
        if "response" in data:
            data["response"]["usage"] = {"input_tokens": 100, "output_tokens": 10}
        lines.append(json.dumps(data))
    session.write_text("\n".join(lines) + "\n")
    first = _harness(mmul_dir, "--kill-after", str(kill_after))
    assert first.returncode == -9, first.stderr[-2000:]
    layout = RunLayout(mmul_dir)
    before = _tokens_on_disk(layout)
    second = _harness(mmul_dir, "--resume")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    new_calls = sum(1 for line in second.stdout.splitlines() if line.endswith(" llm_call"))
    final = read_model(layout.final_results, FinalResults)
    assert final.tokens["input"] == before + 100 * new_calls
    assert _tokens_on_disk(layout) == final.tokens["input"]  # nothing overwritten: redone calls were set aside
