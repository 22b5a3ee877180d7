"""Every call recorded beside its iteration; a run replayed from its records or a session file."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cacao_tui.llm import (
    CallContext,
    CallRecord,
    LLMError,
    Message,
    ProviderChoice,
    ProviderError,
    ReplayMismatch,
    RetryPolicy,
    ScriptedProvider,
    ToolSpec,
    TrackedLLM,
    create_llm,
)
from cacao_tui.llm.recording import read_records
from cacao_tui.llm.session_file import export_session, main, read_session_file

WRITE = ToolSpec(name="write_file", description="Write a file.")
REPLAY = ProviderChoice("replay", "replay", "--provider")


async def record_a_run(output: Path) -> list[CallRecord]:
    """A small run: two master calls, a branch tool loop, one failure. Returns on_call's records."""
    script = [
        "The problem is a matrix product.",
        '{"name": "tiled", "blocks": 4}',
        {"text": "", "tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "k.cu", "text": "x"}}]},
        "Kernel written.",
        ProviderError("HTTP 400: prompt too long", status=400),
    ]
    seen: list[CallRecord] = []
    llm = TrackedLLM(ScriptedProvider(script, model="claude-test"), record_root=output, on_call=seen.append)
    await llm.chat([Message(role="user", content="analyze")], ctx=CallContext(None, None, "analyze"))
    await llm.chat([Message(role="user", content="strategize")], ctx=CallContext(None, None, "strategize"))
    ctx = CallContext("tiled", 0, "author")
    messages = [Message(role="user", content="write it")]
    first = await llm.chat(messages, [WRITE], ctx=ctx)
    messages += [first.to_message(), Message(role="tool", tool_call_id="c1", content="written")]
    await llm.chat(messages, [WRITE], ctx=ctx)
    with pytest.raises(LLMError):
        await llm.chat([Message(role="user", content="propose")], ctx=CallContext("tiled", 0, "propose"))
    return seen


async def test_recording_layout_and_contents(tmp_path: Path) -> None:
    output = tmp_path / "output"
    seen = await record_a_run(output)
    files = sorted(str(p.relative_to(output)) for p in output.rglob("*.json"))
    assert files == [
        "branches/tiled/iter0/llm/author_000.json",
        "branches/tiled/iter0/llm/author_001.json",
        "branches/tiled/iter0/llm/propose_000.json",
        "llm/analyze_000.json",
        "llm/strategize_000.json",
    ]
    assert not list(output.rglob("*.tmp"))

    data = json.loads((output / "branches/tiled/iter0/llm/author_001.json").read_text())
    assert data["provider"] == "scripted" and data["model"] == "claude-test"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "tool"]
    assert data["tools"][0]["name"] == "write_file"
    assert data["response"]["text"] == "Kernel written." and data["error"] is None
    assert {"usage", "latency_s", "attempts", "retries", "started_at", "system"} <= set(data)

    failed = json.loads((output / "branches/tiled/iter0/llm/propose_000.json").read_text())
    assert failed["response"] is None and "HTTP 400" in failed["error"]

    # on_call saw every call, the failure too, with the path it was written to.
    assert [(r.node, r.index, r.error is None) for r in seen] == [
        ("analyze", 0, True),
        ("strategize", 0, True),
        ("author", 0, True),
        ("author", 1, True),
        ("propose", 0, False),
    ]
    assert seen[0].path == output / "llm/analyze_000.json"


async def test_retries_are_recorded(tmp_path: Path) -> None:
    busy = ProviderError("HTTP 529: overloaded", status=529, retryable=True, retry_after_s=0.0)
    llm = TrackedLLM(ScriptedProvider([busy, "ok"]), record_root=tmp_path, retry=RetryPolicy(base_delay_s=0))
    await llm.chat([Message(role="user", content="x")], ctx=CallContext("b", 2, "plan"))
    [record] = read_records(tmp_path)
    assert record.retries == 1 and record.attempts[0].status == 529 and record.attempts[0].delay_s == 0.0


async def replay_run(llm: TrackedLLM) -> list[str]:
    texts = []
    texts.append(
        (await llm.chat([Message(role="user", content="anything")], ctx=CallContext(None, None, "analyze"))).text
    )
    texts.append((await llm.chat([], ctx=CallContext(None, None, "strategize"))).text)
    ctx = CallContext("tiled", 0, "author")
    first = await llm.chat([], [WRITE], ctx=ctx)
    texts.append(json.dumps(first.tool_calls[0].arguments))
    texts.append((await llm.chat([], [WRITE], ctx=ctx)).text)
    return texts


EXPECTED = [
    "The problem is a matrix product.",
    '{"name": "tiled", "blocks": 4}',
    '{"path": "k.cu", "text": "x"}',
    "Kernel written.",
]


async def test_replay_from_an_output_directory(tmp_path: Path) -> None:
    await record_a_run(tmp_path / "output")
    again = tmp_path / "again"
    llm = create_llm(REPLAY, replay_from=tmp_path / "output", record_root=again, budget_usd=0.01)
    assert await replay_run(llm) == EXPECTED
    assert llm.model == "claude-test" and llm.usage.run.cost_usd == 0.0
    # The replayed run is recorded too, so it can be replayed in turn.
    assert len(read_records(again)) == 4
    # A recorded failure replays as the same failure.
    with pytest.raises(LLMError, match="HTTP 400"):
        await llm.chat([], ctx=CallContext("tiled", 0, "propose"))


async def test_replay_from_an_exported_session_file(tmp_path: Path) -> None:
    await record_a_run(tmp_path / "output")
    session = tmp_path / "session.jsonl"
    assert main([str(tmp_path / "output"), str(session)]) == 0
    lines = session.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "cacao-llm-session" and len(lines) == 6
    llm = create_llm(REPLAY, replay_from=session)
    assert await replay_run(llm) == EXPECTED


async def test_replay_from_a_hand_written_session(tmp_path: Path) -> None:
    session = tmp_path / "session.jsonl"
    session.write_text(
        textwrap.dedent(
            """\
            # the mmul demo, written by hand
            {"node": "analyze", "response": {"text": "The problem is a matrix product."}}
            {"node": "strategize", "response": {"text": "{\\"name\\": \\"tiled\\", \\"blocks\\": 4}"}}

            {"branch": "tiled", "iteration": 0, "node": "author", "response": {"tool_calls": [CALL]}}
            {"branch": "tiled", "iteration": 0, "node": "author", "response": {"text": "Kernel written."}}
            """
        ).replace("CALL", '{"name": "write_file", "arguments": {"path": "k.cu", "text": "x"}}')
    )
    entries = read_session_file(session)
    [author0] = [e for k, e in entries.items() if k.node == "author" and k.index == 0]
    assert author0.response.stop_reason == "tool_use" and author0.response.tool_calls[0].id
    assert await replay_run(create_llm(REPLAY, replay_from=session)) == EXPECTED


async def test_replay_mismatch_names_the_key_and_the_source(tmp_path: Path) -> None:
    await record_a_run(tmp_path / "output")
    llm = create_llm(REPLAY, replay_from=tmp_path / "output")
    await llm.chat([], ctx=CallContext("tiled", 0, "author"))
    await llm.chat([], ctx=CallContext("tiled", 0, "author"))
    with pytest.raises(ReplayMismatch) as info:
        await llm.chat([], ctx=CallContext("tiled", 0, "author"))
    message = str(info.value)
    assert "branch tiled, iteration 0, node author, call 2" in message and str(tmp_path / "output") in message
    assert "recorded calls of this node: 0, 1" in message and "\n" not in message
    with pytest.raises(ReplayMismatch, match="nothing recorded for this branch"):
        await llm.chat([], ctx=CallContext("other", 3, "plan"))


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"node": "a", "response": {"text": "x"}}\nnot json\n', "session.jsonl:2: not a JSON object"),
        ('{"node": "a"}\n', "needs 'response' or 'error'"),
        ('{"node": "a", "iter": 1, "response": {}}\n', "iter: Extra inputs are not permitted"),
        ('{"node": "a", "response": {}}\n{"node": "a", "index": 0, "response": {}}\n', "a second line for"),
    ],
)
def test_session_file_errors_name_the_line(tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(content)
    with pytest.raises(LLMError, match=error):
        read_session_file(path)


def test_replay_without_a_source_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match="replay source not found"):
        create_llm(REPLAY, replay_from=tmp_path / "missing")
    with pytest.raises(LLMError, match="--from PATH"):
        create_llm(REPLAY)
    with pytest.raises(LLMError, match="no LLM call records"):
        create_llm(REPLAY, replay_from=tmp_path)
    with pytest.raises(LLMError, match="no LLM call records"):
        export_session(tmp_path, tmp_path / "s.jsonl")


def test_replay_and_import_load_no_sdk(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_text('{"node": "analyze", "response": {"text": "hello"}}\n')
    code = f"""
import asyncio, sys
from cacao_tui.llm import CallContext, ProviderChoice, create_llm
llm = create_llm(ProviderChoice("replay", "replay", "test"), replay_from={str(session)!r})
resp = asyncio.run(llm.chat([], ctx=CallContext(None, None, "analyze")))
assert resp.text == "hello"
sdks = ("anthropic", "openai", "google", "httpx", "httpx2", "textual")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in sdks)
loaded += sorted(m for m in sys.modules if m.startswith(("cacao_tui.ui", "cacao_tui.engine", "cacao_tui.nodes")))
print(loaded)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
