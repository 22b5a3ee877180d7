"""The real app streams a reply in its LLM tab: ``cacao --dry-run`` on mmul, in tmux, against a
loopback OpenAI-compatible server (the FAKE model of tests/llm/conformance) whose analysis
streams in pieces and holds half way until the test has seen it on the screen.

Needs tmux (skipped with that reason when it is missing).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.llm.conformance.fake_model import Answer, FakeModel, Habit, Request, render
from tests.llm.wire_servers import Reply, WireServer, cli_env
from tests.pathenv import child_pythonpath
from tests.ui.test_tmux import MMUL, Tmux

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
]

FIRST = "FIRST-HALF the reference reads every value of B once per row of C"
SECOND = "SECOND-HALF so it is memory bound; tile it"


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(width=120, height=34)
    yield t
    t.kill()


def test_the_llm_tab_shows_a_reply_as_it_streams(tmux: Tmux, tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    gate = threading.Event()

    def slow_analysis(req: Request, good: Answer) -> Reply:
        reply = render("openai", req, Answer(f"{FIRST} {SECOND}"), 0)
        reply.gate, reply.gate_after = gate, 6  # role, then the first half, then wait for the test
        return reply

    server = WireServer().start()
    server.responder = FakeModel("openai", [Habit("analyze", slow_analysis)])
    try:
        env = cli_env("openai", server, str(tmp_path / "config"))
        env = {k: v for k, v in env.items() if k.isidentifier() and k not in ("TERM", "COLUMNS", "LINES", "TMUX")}
        env.update(TERM="xterm-256color", COLORTERM="truecolor", LANG="C.UTF-8", TZ="UTC")
        env["PYTHONPATH"] = child_pythonpath()
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        done = tmp_path / "exit_code"
        cli = f"{shlex.quote(sys.executable)} -m cacao_tui"
        command = (
            f"env -i {exports} {cli} --dir {shlex.quote(str(problem))} --provider openai --model gpt-6.1-sol "
            f"--dry-run --strategies 1 --max-iter 1 --max-depth 1; echo $? > {done}"
        )
        tmux.start(command, tmp_path)
        tmux.wait_text(" cacao ", timeout=60)  # the status bar: the app is up
        tmux.wait_text("Log  LLM  Kernel")
        tmux.keys("2")  # the LLM tab of the run: the master's calls
        screen = tmux.wait_text("▶ analyze #0 · streaming", timeout=60)
        assert "FIRST-HALF" in screen and "SECOND-HALF" not in screen, screen
        assert "tokens" in screen
        gate.set()  # the rest of the reply streams in; the call ends and its record arrives
        tmux.wait_for(
            lambda s: "▶ analyze" not in s and re.search(r"analyze\s+0\s+\S+", s) is not None,
            timeout=60,
            what="the call in the table, streaming no more",
        )
        tmux.wait_text("mmul · finished", timeout=120)
        record = json.loads((problem / "output" / "llm" / "analyze_000.json").read_text())
        assert record["response"]["text"] == f"{FIRST} {SECOND}"  # what streamed is the whole reply
        tmux.keys("q")
        tmux.wait_for(lambda s: done.exists(), timeout=30, what="the app to exit")
    finally:
        gate.set()
        server.stop()
    assert done.read_text().strip() == "0", tmux.screen()
