"""Context in tokens, the token budget, refusals and the user's llm.toml: the tracked wrapper
with the scripted FAKE provider (and one real SDK for the token-counting endpoint)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from wire_servers import DIALECTS, Reply, WireServer

from cacao_tui.llm import (
    BudgetExceeded,
    CallContext,
    ChatResponse,
    LLMError,
    Message,
    ModelInfo,
    ProviderChoice,
    ReplyUnusable,
    ScriptedProvider,
    TrackedLLM,
    Usage,
    create_llm,
)
from cacao_tui.llm.context_fit import context_window_in, fit_messages, is_context_length_error
from cacao_tui.llm.refusals import refusal_reason, unusable_reason
from cacao_tui.llm.user_config import load_llm_settings
from cacao_tui.nodes.replies import ask_text
from tests.pathenv import child_pythonpath

CTX = CallContext("b1", 1, "author")
ROOT = Path(__file__).resolve().parents[2]


def tool_loop(turns: int, result_chars: int = 4000) -> list[Message]:
    messages = [Message(role="user", content="the task")]
    for n in range(turns):
        messages += [
            Message(role="assistant", content="", tool_calls=[{"id": f"t{n}", "name": "read_file", "arguments": {}}]),
            Message(role="tool", tool_call_id=f"t{n}", content=f"result {n} " + "x" * result_chars),
        ]
    return messages


def count(ms: list[Message]) -> int:
    return sum(len(m.content) + 10 for m in ms) // 4


def test_fit_drops_older_tool_results_first_and_keeps_the_turn_in_progress() -> None:
    messages = tool_loop(8)
    fitted = fit_messages(messages, budget_tokens=4000, count=count)
    assert count(fitted.messages) <= 4000
    assert fitted.messages[0].content == "the task"
    assert fitted.messages[-1].content == messages[-1].content  # the newest result is whole
    assert "dropped to fit the model's context window" in fitted.messages[2].content  # the oldest went first
    assert fitted.notes and "older tool results dropped" in fitted.notes[0]
    assert fit_messages(messages, budget_tokens=10**9, count=count).notes == []


def test_fit_cuts_history_then_the_task_as_a_last_resort() -> None:
    messages = [Message(role="user", content="t" * 40_000), Message(role="assistant", content="a" * 40_000),
                Message(role="user", content="now")]  # fmt: skip
    fitted = fit_messages(messages, budget_tokens=3000, count=count)
    assert "the task cut" in fitted.notes[0] and len(fitted.messages[0].content) < 40_000
    assert fitted.messages[-1].content == "now"


def test_context_length_errors_and_the_window_they_name() -> None:
    assert is_context_length_error(400, "This model's maximum context length is 32768 tokens")
    assert is_context_length_error(400, "prompt is too long: 210000 tokens > 200000 maximum")
    assert not is_context_length_error(400, "invalid tool schema") and not is_context_length_error(
        500, "context window"
    )
    assert context_window_in("This model's maximum context length is 32,768 tokens.") == 32768
    assert context_window_in("prompt is too long: 210000 tokens > 200000 maximum") == 200000


async def test_a_request_over_the_window_is_shrunk_before_it_is_sent() -> None:
    provider = ScriptedProvider(["ok"])
    records = []
    llm = TrackedLLM(provider, info=ModelInfo(context_window=8_000, max_output=2_000), on_call=records.append)
    await llm.chat(tool_loop(12), ctx=CTX)
    sent = provider.requests[0]
    assert sent.max_tokens == 2_000
    assert sum(len(m.content) for m in sent.messages) / 3.5 < 8_000 - 2_000
    assert "context shrunk" in records[0].notes[0]
    assert records[0].messages == sent.messages  # the record holds what was sent


async def test_the_estimate_is_calibrated_on_the_providers_counts() -> None:
    usage = Usage(input_tokens=1000, output_tokens=10)
    llm = TrackedLLM(ScriptedProvider([ChatResponse(text="ok", usage=usage)] * 3))
    for _ in range(3):
        await llm.chat([Message(role="user", content="y" * 6000)], ctx=CTX)
    assert 5.0 < llm.estimator.chars_per_token < 6.5  # ~6000 characters per 1000 tokens


async def test_the_counting_endpoint_is_asked_near_the_limit(server: WireServer) -> None:
    d = DIALECTS["anthropic"]
    server.push(Reply(body={"input_tokens": 1234}), d.text("ok"))
    records = []
    llm = TrackedLLM(d.build(server), info=ModelInfo(context_window=6_000, max_output=1_000), on_call=records.append)
    await llm.chat([Message(role="user", content="z" * 15_000)], ctx=CTX)
    assert server.requests[0].path == "/v1/messages/count_tokens"
    assert "counted by the provider: 1,234 tokens" in records[0].notes[0]
    assert not any("shrunk" in n for n in records[0].notes)  # the exact count showed it fits
    await llm.aclose()


async def test_a_token_budget_stops_new_calls_even_without_a_price() -> None:
    llm = TrackedLLM(ScriptedProvider([ChatResponse(text="ok", usage=Usage(input_tokens=600, output_tokens=50))] * 3),
                     budget_tokens=1000)  # fmt: skip
    assert not llm.priced
    await llm.chat([Message(role="user", content="x")], ctx=CTX)
    await llm.chat([Message(role="user", content="x")], ctx=CTX)
    with pytest.raises(BudgetExceeded, match=r"1,300 tokens used of 1,000 \(--budget-tokens\)"):
        await llm.chat([Message(role="user", content="x")], ctx=CTX)


# -- refusals and empty replies ---------------------------------------------------------------


def test_refusals_per_provider_and_by_content() -> None:
    assert refusal_reason(ChatResponse(text="I'm sorry, I can't help with that."))
    assert refusal_reason(ChatResponse(text="", stop_reason="other", raw_stop_reason="SAFETY"))
    assert refusal_reason(ChatResponse(text="no", stop_reason="other", raw_stop_reason="refusal"))
    assert refusal_reason(ChatResponse(stop_reason="other", raw_stop_reason="PROMPT_BLOCKED:OTHER"))
    assert not refusal_reason(ChatResponse(text="I can't be sure, but tiling should help: use 32x32 tiles."))
    assert not refusal_reason(ChatResponse(text="I'm sorry, I can't help with that. " + "Tile it. " * 200))
    assert unusable_reason(ChatResponse(text="<think>hmm</think>  ")) == "the reply was empty"
    assert "raise --max-tokens" in (unusable_reason(ChatResponse(text="", stop_reason="max_tokens")) or "")


async def test_a_refusal_is_asked_again_once_with_the_task_restated_then_fails_the_step() -> None:
    provider = ScriptedProvider(["I'm sorry, I can't help with that.", "The plan: tile it."])
    llm = TrackedLLM(provider)
    resp = await ask_text(llm, [Message(role="user", content="plan")], ctx=CTX, system=None, task="write the plan.")
    assert resp.text == "The plan: tile it."
    assert "write the plan." in provider.requests[1].messages[-1].content
    refusing = TrackedLLM(ScriptedProvider(["I cannot assist with that."] * 2))
    with pytest.raises(ReplyUnusable, match="refused") as info:
        await ask_text(refusing, [Message(role="user", content="plan")], ctx=CTX, system=None, task="plan.")
    assert "also after the task was restated" in str(info.value) and "\n" not in str(info.value)


# -- the user's llm.toml ------------------------------------------------------------------------


def test_llm_toml_sets_steps_models_and_prices(tmp_path: Path) -> None:
    path = tmp_path / "llm.toml"
    path.write_text(
        'reasoning = "medium"\nmax_tokens = 9000\nconcurrency = 3\nbudget_tokens = 50000\n'
        '[steps.decide]\nreasoning = "low"\n'
        '[models."openai/Local-Coder"]\ncontext_window = 32768\nmax_output = 4096\nstructured = "prompt"\n'
        "input_price = 0.1\noutput_price = 0.4\n"
    )
    settings = load_llm_settings(path)
    assert settings.reasoning_for("decide") == "low" and settings.reasoning_for("plan") == "medium"
    assert settings.max_tokens_for("author") == 9000
    cli = settings.with_cli(reasoning="high", max_tokens=None)
    assert cli.reasoning_for("plan") == "high" and cli.reasoning_for("decide") == "low"
    choice = ProviderChoice("openai", "local-coder", "test", None, base_url="http://127.0.0.1:9/v1")
    llm = create_llm(choice, settings=settings, env={})
    assert llm.price is not None and llm.price.input == 0.1 and llm.price.cached_input == 0.1
    assert llm.info.context_window == 32768 and llm.info.structured == "prompt"
    assert llm.budget_tokens == 50000 and llm._semaphore._value == 3


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('reasoning = "extreme"\n', "reasoning: expected 'low', 'medium' or 'high'"),
        ("[steps.decid]\nreasoning = 'low'\n", "steps.decid"),
        ("colour = 1\n", "colour: unknown key"),
        ('[models."gpt-x"]\ncontext_window = 9000\n', "name it provider/model"),
        ("max_tokens = [\n", "not valid TOML"),
    ],
)
def test_a_bad_llm_toml_is_one_line_naming_the_file_and_the_key(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "llm.toml"
    path.write_text(content)
    with pytest.raises(LLMError) as info:
        load_llm_settings(path)
    assert str(path) in str(info.value) and error in str(info.value) and "\n" not in str(info.value)


def test_the_cli_refuses_a_bad_llm_toml_and_bad_flags_with_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config" / "cacao_tui"
    config.mkdir(parents=True)
    (config / "llm.toml").write_text('reasoning = "extreme"\n')
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    base = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui", "--dry-run"]
    done = subprocess.run(base, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "llm.toml: reasoning" in done.stderr and "Traceback" not in done.stderr
    assert not (problem / "output").exists()  # nothing written
    for flags in (
        ["--reasoning", "extreme"],
        ["--max-tokens", "0"],
        ["--llm-concurrency", "x"],
        ["--budget-tokens", "-5"],
    ):
        done = subprocess.run([*base, *flags], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (flags, done.stderr)


def test_the_new_flags_reach_the_request() -> None:
    from cacao_tui.run_options import parse_args, run_request

    args = parse_args(["--dir", str(ROOT / "problems" / "mmul"), "--reasoning", "high", "--max-tokens", "8000",
                       "--llm-concurrency", "2", "--budget-tokens", "100000"])  # fmt: skip
    request = run_request(args, problem=None)  # type: ignore[arg-type]
    assert (request.reasoning, request.max_tokens, request.llm_concurrency, request.budget_tokens) == (
        "high", 8000, 2, 100000
    )  # fmt: skip


# -- what a user sees of a call ------------------------------------------------------------------


def test_headless_prints_a_line_per_call_and_one_while_a_long_call_streams() -> None:
    import io

    from cacao_tui.engine.events import LLMCallEvent, LLMCallProgress
    from cacao_tui.headless import LLM_PROGRESS_EVERY_S, HeadlessRenderer
    from cacao_tui.llm.progress import CallProgress
    from cacao_tui.llm.recording import CallRecord

    out = io.StringIO()
    render = HeadlessRenderer(out)
    early = CallProgress(branch="b1", iteration=2, node="author", index=3, elapsed_s=1.0, output_tokens=40)
    late = early.model_copy(update={"elapsed_s": LLM_PROGRESS_EVERY_S + 1, "output_tokens": 900, "tokens_per_s": 45})
    render(LLMCallProgress(progress=early))
    render(LLMCallProgress(progress=late))
    render(LLMCallProgress(progress=late))  # within the interval: no second line
    usage = Usage(input_tokens=12000, cached_tokens=9000, output_tokens=900, reasoning_tokens=300)
    record = CallRecord(branch="b1", iteration=2, node="author", index=3, provider="p", model="m", usage=usage,
                        latency_s=20.0, response=ChatResponse(text="x", usage=usage))  # fmt: skip
    render(LLMCallEvent.of(record))
    lines = out.getvalue().splitlines()
    assert lines == [
        "b1 #2: LLM author#3 streaming: ~900 tokens, 45 tok/s, 11 s",
        "b1 #2: LLM author#3: 12,000 in (9,000 cached) / 900 out (300 reasoning), 20.0 s, 45 tok/s",
    ]
