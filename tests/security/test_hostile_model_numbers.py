"""Issue 27, items 4 and 8: numbers and nesting in what a model or an endpoint sends.

Before: a 5,000-digit integer or arrays 4,000 deep in a model's JSON crashed the run with a
traceback or ended it at strategize instead of the documented fallback (a default strategy, a
rule-based decision), and in tool-call arguments failed the author's call instead of returning a
tool error; negative completion counts from the endpoint defeated ``--budget-tokens`` (7 requests
where honest counts stop at 3) and 10^30 input tokens were shown.

Now every JSON a model writes is read by one bounded parser (``ktt.capped_read.parse_json``,
strict: numbers of at most 40 characters, finite, 100 levels), and one call's token counts are
clamped where the tracked wrapper takes them (``llm.usage.call_usage``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cacao_tui.llm import BudgetExceeded, CallContext, Message, RetryPolicy, ToolSpec, TrackedLLM
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState, MasterState
from tests.engine.conftest import make_engine, mmul_dir  # noqa: F401  (a fixture)
from tests.engine.scenario import Scenario
from tests.llm.wire_servers import DIALECTS, Reply, WireServer

pytestmark = pytest.mark.timeout(300)
DEEP = "[" * 4000 + "]" * 4000
HUGE = "9" * 5000
CTX = CallContext(branch="b1", iteration=1, node="author")
WRITE = ToolSpec(name="write_file", description="write a file",
                 parameters={"type": "object", "properties": {"content": {"type": "string"}}})  # fmt: skip


@pytest.fixture
def server() -> Iterator[WireServer]:
    srv = WireServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def _answering(scenario: Scenario, answers: dict[str, str]) -> Scenario:
    original = scenario.respond

    def respond(request):  # type: ignore[no-untyped-def]
        if request.key.node in answers:
            return answers[request.key.node]
        return original(request)

    scenario.respond = respond  # type: ignore[method-assign]
    return scenario


@pytest.mark.parametrize(
    "reply",
    [
        '{"strategies": [{"name": "a", "title": ' + HUGE + ', "description": "d"}]}',
        '{"strategies": ' + DEEP + "}",
    ],
    ids=["5000-digits", "4000-deep"],
)
def test_a_strategy_reply_out_of_bounds_takes_the_documented_fallback(reply: str, mmul_dir: Path) -> None:  # noqa: F811
    scenario = _answering(Scenario(strategies=["alpha"]), {"strategize": reply, "decide": reply})
    engine = make_engine(mmul_dir, scenario.provider(), max_iter=2, n_strategies=1)
    finished = asyncio.run(engine.run())
    assert finished.status in ("ok", "no_result"), finished  # the run went on past strategize
    layout = RunLayout(mmul_dir)
    master = read_model(layout.master, MasterState)
    assert [s.name for s in master.strategies] == ["baseline"]  # the default strategy
    assert any("out of bounds" in f for f in master.fallbacks), master.fallbacks
    first = read_model(layout.branch("b1-baseline").iteration(1).state, IterState)
    assert first.decision is not None and first.decision.fallback, first.decision  # the rule-based decision


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("arguments", ['{"content": ' + DEEP + "}", '{"content": ' + HUGE + "}",
                                       '{"content": NaN}', '{"content": 1e400}'])  # fmt: skip
async def test_tool_arguments_out_of_bounds_are_a_tool_error(provider: str, arguments: str, server: WireServer) -> None:
    dialect = DIALECTS[provider]
    reply = dialect.tool_call("write_file", {}, call_id="c1")
    _raw_arguments(reply, provider, arguments)
    server.push(reply)
    llm = TrackedLLM(dialect.build(server), retry=RetryPolicy(retries=0))
    response = await llm.chat([Message(role="user", content="write")], [WRITE], ctx=CTX)  # not a failed call
    [call] = response.tool_calls
    assert call.arguments == {} and call.error is not None and "out of bounds" in call.error, call
    await llm.aclose()


async def test_gemini_arguments_its_sdk_parsed_are_held_to_the_same_bounds(server: WireServer) -> None:
    dialect = DIALECTS["gemini"]
    for value in (json.loads("[" * 150 + "]" * 150), 10**400):
        server.push(dialect.tool_call("write_file", {"content": value}, call_id="c1"))
        llm = TrackedLLM(dialect.build(server), retry=RetryPolicy(retries=0))
        response = await llm.chat([Message(role="user", content="write")], [WRITE], ctx=CTX)
        [call] = response.tool_calls
        assert call.arguments == {} and "out of bounds" in str(call.error), call
        await llm.aclose()


def _raw_arguments(reply: Reply, provider: str, raw: str) -> None:
    """Put ``raw`` (text that is not the JSON of a dict) as the call's arguments on the wire."""
    if provider == "openai":
        reply.body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = raw
    else:
        block = next(b for b in reply.body["content"] if b["type"] == "tool_use")
        block["input"] = raw  # streamed as input_json_delta pieces of this text


# -- item 8: token counts from the endpoint --------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_negative_token_counts_do_not_give_budget_back(provider: str, server: WireServer) -> None:
    dialect = DIALECTS[provider]
    server.repeat = dialect.text("ok", usage=(100, -1_000_000, 0))
    llm = TrackedLLM(dialect.build(server), budget_tokens=300, retry=RetryPolicy(retries=0))
    made = 0
    with pytest.raises(BudgetExceeded):
        for _ in range(10):
            await llm.chat([Message(role="user", content="hi")], ctx=CTX)
            made += 1
    assert made == 3  # 100 input tokens each, nothing given back: as honest counts stop
    assert llm.usage.run.output_tokens == 0
    await llm.aclose()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_an_impossible_token_count_is_clamped_and_noted(provider: str, server: WireServer) -> None:
    dialect = DIALECTS[provider]
    server.push(dialect.text("ok", usage=(10**30, 20, 0)))
    records = []
    llm = TrackedLLM(dialect.build(server), retry=RetryPolicy(retries=0), on_call=records.append)
    await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    assert llm.usage.run.input_tokens <= 100_000_000
    assert any("impossible token counts" in n for n in records[0].notes), records[0].notes
    await llm.aclose()
