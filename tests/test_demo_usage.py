"""The demo shows money (issue 32 item 13): the shipped sessions carry realistic usage, named
illustrative; the replay provider reports it as any provider reports usage (each response's
``usage``, costed by the tracked wrapper at a price), and wherever a replay's cost is shown or
recorded it is marked illustrative, so nobody takes it for spending."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.llm import create_llm
from cacao_tui.llm.selection import ProviderChoice
from cacao_tui.llm.types import CallContext, Message
from cacao_tui.llm.usage import ILLUSTRATIVE
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import load_results, render_results
from cacao_tui.suite.collect import collect_row
from tests.pathenv import child_pythonpath

REPO = Path(__file__).resolve().parents[1]
SESSIONS = sorted(REPO.glob("problems/*/session.jsonl"))


def test_every_shipped_session_carries_illustrative_usage() -> None:
    assert len(SESSIONS) == 6
    for session in SESSIONS:
        lines = [json.loads(line) for line in session.read_text().splitlines() if line.strip()]
        header, calls = lines[0], lines[1:]
        assert ILLUSTRATIVE in header["usage"] and header["priced_as"].startswith("anthropic:"), session
        for call in calls:
            usage = call["response"]["usage"]
            assert 1_000 < usage["input_tokens"] < 100_000 and 50 < usage["output_tokens"] < 20_000, (session, call)


def test_replay_reports_the_recorded_usage_as_a_real_provider_does(tmp_path: Path) -> None:
    session = REPO / "problems" / "mmul" / "session.jsonl"
    recorded = json.loads(session.read_text().splitlines()[1])["response"]["usage"]
    llm = create_llm(ProviderChoice("replay", "replay", "--provider"), record_root=tmp_path, replay_from=session)

    async def one() -> None:
        response = await llm.chat([Message(role="user", content="x")], ctx=CallContext(None, None, "analyze"))
        assert response.usage.input_tokens == recorded["input_tokens"]
        assert response.usage.cost_usd > 0  # costed at the session's price, as a priced model's call is

    asyncio.run(one())
    assert llm.usage.run.input_tokens == recorded["input_tokens"] and llm.usage.run.cost_usd > 0


@pytest.mark.slow
def test_a_replay_runs_cost_is_shown_and_recorded_as_illustrative(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": child_pythonpath(), "HOME": str(tmp_path)}
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui", "--dry-run",
            "--strategies", "1", "--max-iter", "1"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "in / " in done.stdout and " 0 in / 0 out" not in done.stdout  # each LLM line has its tokens
    layout = RunLayout(problem)
    final = json.loads(layout.final_results.read_text())
    assert final["cost_usd"] > 0 and final["tokens"]["input"] > 0 and final["illustrative_usage"] is True
    text = render_results(load_results(layout), layout)
    llm_line = next(line for line in text.splitlines() if line.startswith("llm "))
    assert "cost $" in llm_line and f"({ILLUSTRATIVE}" in llm_line, llm_line
    assert f"({ILLUSTRATIVE})" in collect_row(problem).cells()[7]
