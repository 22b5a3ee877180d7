"""Issue 20's model-behaviour suite: what real models do, against a whole run.

Each scenario plays one habit of real models (tests/llm/conformance/fake_model.py, a FAKE
behind the loopback wire servers) in a replay-sized run of mmul: ``cacao --no-ui --dry-run``
with one strategy, two iterations and one level, through the real SDK of a provider. Every
scenario must end with the run finished (exit 0) and what the agent did about the habit
(a repair, a retry, a fallback) in the run's records.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cacao_tui.llm.recording import CallRecord, read_records
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState, MasterState
from tests.llm.conformance.fake_model import ROOT, Answer, FakeModel, Habit, Request
from tests.llm.wire_servers import DIALECTS, Reply, WireServer, cli_env
from tests.pathenv import child_pythonpath

PROVIDERS = ("openai", "anthropic", "gemini", "cerit")
BRANCH = "b1-tiling"


@dataclass
class Run:
    problem: Path
    out: str
    code: int
    model: FakeModel

    @property
    def layout(self) -> RunLayout:
        return RunLayout(self.problem)

    def records(self, node: str | None = None) -> list[CallRecord]:
        found = read_records(self.layout.output)
        return [r for r in found if node is None or r.node == node]

    def state(self, iteration: int) -> IterState:
        return read_model(self.layout.branch(BRANCH).iteration(iteration).state, IterState)

    def master(self) -> MasterState:
        return read_model(self.layout.master, MasterState)


def run_cacao(provider: str, habits: list[Habit], tmp_path: Path, *extra: str) -> Run:
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    model = FakeModel(provider, habits)
    server = WireServer().start()
    server.responder = model
    env = cli_env(provider, server, str(tmp_path / "config"))
    env.update(PYTHONPATH=child_pythonpath(), PYTHONUNBUFFERED="1")
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", provider,
            "--model", DIALECTS[provider].model, "--no-ui", "--dry-run", "--strategies", "1", "--max-iter", "2",
            "--max-depth", "1", *extra]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=240)
    finally:
        server.stop()
    return Run(problem, done.stdout + done.stderr, done.returncode, model)


def finished(run: Run) -> None:
    assert run.code == 0, run.out[-4000:]
    assert "Traceback" not in run.out, run.out[-4000:]
    assert "run ok" in run.out, run.out[-4000:]
    assert run.model.played, "the habit was never played: the scenario tested nothing"


# -- the habits -------------------------------------------------------------------------------


def wrap(before: str = "", after: str = "") -> Callable[[Request, Answer], Answer]:
    def behave(req: Request, good: Answer) -> Answer:
        return Answer(before + good.text + after, good.tools, good.reasoning)

    return behave


def think_block(req: Request, good: Answer) -> Answer:
    thought = "<think>The user wants {JSON}. Options: {a: 1, b: [2, 3]}. I will answer now.</think>\n"
    return Answer(thought + good.text, good.tools)


def truncated(req: Request, good: Answer) -> Answer:
    return Answer(good.text[: len(good.text) // 2], truncated=True)


def refusal_text(req: Request, good: Answer) -> Answer:
    return Answer("I'm sorry, I can't help with that.")


def provider_refusal(req: Request, good: Answer) -> Answer:
    return Answer("I can't help with that request.", refusal=True)


def bad_decision(req: Request, good: Answer) -> Answer:
    return Answer(json.dumps({"action": "maybe", "why": "unsure"}))


def one_bad_strategy(req: Request, good: Answer) -> Answer:
    items = json.loads(good.text)["strategies"] + [{"name": "broken"}]
    return Answer(json.dumps({"strategies": items}))


def context_400(provider: str) -> Callable[[Request, Answer], Reply]:
    messages = {
        "openai": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens.",
        "cerit": "This model's maximum context length is 8192 tokens. However, you requested 9100 tokens.",
        "anthropic": "prompt is too long: 9100 tokens > 8192 maximum",
        "gemini": "The input token count (9100) exceeds the maximum number of tokens allowed (8192).",
    }

    def behave(req: Request, good: Answer) -> Reply:
        reply = DIALECTS[provider].error(400, messages[provider])
        if provider in ("openai", "cerit"):
            reply.body["error"]["code"] = "context_length_exceeded"
        return reply

    return behave


def rate_limited(provider: str) -> Callable[[Request, Answer], Reply]:
    def behave(req: Request, good: Answer) -> Reply:
        return DIALECTS[provider].error(429, "max_parallel_requests exceeded", {"retry-after": "3600"})

    return behave


def reread(req: Request, good: Answer) -> Answer:
    return Answer(tools=[("read_file", {"path": "kernels.cu"})])


def stall(provider: str) -> Callable[[Request, Answer], Reply]:
    def behave(req: Request, good: Answer) -> Reply:
        from tests.llm.conformance.fake_model import render

        reply = render(provider, req, Answer("Tile A and B through shared memory so each value is read once."), 0)
        reply.stall_after = 3  # a few events, then silence
        return reply

    return behave


def reasoning_only(req: Request, good: Answer) -> Answer:
    return Answer("", good.tools, reasoning=good.text)


@dataclass
class Scenario:
    name: str
    habits: Callable[[str], list[Habit]]
    check: Callable[[Run], None]
    flags: tuple[str, ...] = ()
    providers: tuple[str, ...] = PROVIDERS
    marks: list = field(default_factory=list)


def _notes(records: list[CallRecord]) -> str:
    return " | ".join(n for r in records for n in r.notes)


def check_repaired(what: str) -> Callable[[Run], None]:
    def check(run: Run) -> None:
        notes = _notes(run.records("strategize") + run.records("decide"))
        assert "JSON read after repairs" in notes and what in notes, notes
        assert run.master().strategies[0].name == "tiling" and not run.master().fallbacks
        assert run.state(1).decision is not None and run.state(1).decision.fallback is None

    return check


def check_think(run: Run) -> None:
    check_repaired("a reasoning block removed")(run)
    assert "<think>" not in (run.master().analysis or "")  # kept without the reasoning block
    assert "memory bound" in (run.master().analysis or "")


def check_truncated(run: Run) -> None:
    decide = run.records("decide")
    assert [r.purpose for r in decide] == ["structured", "reask"], [r.purpose for r in decide]
    assert decide[0].response is not None and decide[0].response.stop_reason == "max_tokens"
    sent = " ".join(m.content for m in decide[1].messages if m.role == "user")
    assert "cut off at the output token limit" in sent
    assert run.state(1).decision is not None and run.state(1).decision.fallback is None


def check_refusal(run: Run) -> None:
    plans = run.records("plan")
    assert [r.purpose for r in plans] == ["chat", "retry"], [r.purpose for r in plans]
    assert "legitimate performance-engineering task" in plans[1].messages[-1].content
    plan = run.state(1).plan or ""
    assert plan.startswith("Start from one thread") and "sorry" not in plan.lower()


def check_schema(run: Run) -> None:
    master = run.master()
    assert [s.name for s in master.strategies] == ["tiling"]  # the valid one of the two: fewer
    assert master.fallbacks and "kept the 1 strategies" in master.fallbacks[0], master.fallbacks
    decision = run.state(1).decision
    assert decision is not None and decision.fallback and decision.automatic, decision
    assert decision.reason.startswith("rule-based fallback") and decision.action == "stop"
    assert [r.purpose for r in run.records("decide")] == ["structured", "reask"]


def check_context(run: Run) -> None:
    [first] = [r for r in run.records("author") if (r.iteration, r.index) == (1, 1)]
    assert first.attempts and first.attempts[0].status == 400, first.attempts
    assert "context length exceeded" in _notes([first]) and "sent again" in _notes([first])
    assert first.response is not None and run.state(1).author is not None and run.state(1).author.ok


def check_429(run: Run) -> None:
    [analyze] = run.records("analyze")
    assert [a.status for a in analyze.attempts] == [429] and analyze.attempts[0].retry_after_s == 3600
    assert analyze.attempts[0].delay_s is not None and analyze.attempts[0].delay_s < 10
    assert "asked to wait 3600 s" in _notes([analyze]) and analyze.response is not None
    assert "retry 1 in" in run.out  # the wait is shown


def check_repeat(run: Run) -> None:
    author = run.state(1).author
    assert author is not None and author.ok, author
    assert "repeated read_file with the same arguments 4 times" in (author.message or ""), author
    told = [
        r
        for r in run.records("author")
        if any("made this exact read_file call 3 times" in m.content for m in r.messages if m.role == "tool")
    ]
    assert told, "the model was not told it repeats itself"


def check_stall(run: Run) -> None:
    [propose] = [r for r in run.records("propose")]
    assert propose.attempts and propose.attempts[0].kind == "timeout", propose.attempts
    assert propose.response is not None and "shared memory" in propose.response.text


def check_reasoning_only(run: Run) -> None:
    analyze = run.records("analyze")[0]
    assert "reasoning text is used as the content" in _notes([analyze])
    assert "memory bound" in (run.master().analysis or "")
    decide = run.records("decide")[0]
    assert decide.response is not None and decide.response.reasoning
    assert run.state(1).decision is not None and run.state(1).decision.action == "continue"


SCENARIOS = [
    Scenario(
        "think-blocks",
        lambda p: [Habit("analyze", think_block), Habit("strategize", think_block), Habit("decide", think_block)],
        check_think,
    ),
    Scenario(
        "fences",
        lambda p: [
            Habit("strategize", wrap("```json\n", "\n```")),
            Habit("decide", wrap("Here you go:\n```\n", "\n```")),
        ],
        check_repaired("the code fence removed"),
    ),
    Scenario(
        "trailing-text",
        lambda p: [
            Habit("strategize", wrap("", "\nHope this helps! {more}")),
            Habit("decide", wrap("Decision: ", " ok?")),
        ],
        check_repaired("text around the JSON ignored"),
    ),
    Scenario("truncated-at-max-tokens", lambda p: [Habit("decide", truncated)], check_truncated),
    Scenario(
        "refusal",
        lambda p: [Habit("plan", refusal_text if p in ("cerit", "openai") else provider_refusal)],
        check_refusal,
    ),
    Scenario(
        "schema-violation",
        lambda p: [Habit("strategize", one_bad_strategy, times=2), Habit("decide", bad_decision, times=2)],
        check_schema,
    ),
    Scenario("context-length-400", lambda p: [Habit("author", context_400(p), nth=1)], check_context),
    Scenario("429-retry-after-3600", lambda p: [Habit("analyze", rate_limited(p))], check_429),
    Scenario("repeating-tool-loop", lambda p: [Habit("author", reread, nth=1, times=4)], check_repeat),
    Scenario("stalled-stream", lambda p: [Habit("propose", stall(p))], check_stall, flags=("--llm-timeout", "4")),
    Scenario(
        "reasoning-content-only",
        lambda p: [Habit("analyze", reasoning_only), Habit("decide", reasoning_only)],
        check_reasoning_only,
    ),
]

CASES = [pytest.param(s, p, id=f"{s.name}-{p}") for s in SCENARIOS for p in s.providers]


@pytest.mark.parametrize(("scenario", "provider"), CASES)
def test_the_run_survives(scenario: Scenario, provider: str, tmp_path: Path) -> None:
    run = run_cacao(provider, scenario.habits(provider), tmp_path, *scenario.flags)
    finished(run)
    scenario.check(run)


def test_a_well_behaved_model_needs_no_fallback(tmp_path: Path) -> None:
    """The baseline: the FAKE model without habits gives a clean run (no repair, retry or fallback)."""
    run = run_cacao("openai", [], tmp_path)
    assert run.code == 0 and "run ok" in run.out, run.out[-3000:]
    records = run.records()
    assert records and all(not r.notes and not r.attempts for r in records), [(r.node, r.notes) for r in records]
    assert {r.purpose for r in records} <= {"chat", "structured"}
    assert not run.master().fallbacks and run.state(1).decision is not None and not run.state(1).decision.fallback
    assert os.path.exists(run.layout.final_results)
