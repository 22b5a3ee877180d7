"""Class 4 of the containment issue, LLM side: a hung endpoint cannot hold cacao.

A whole ``cacao --no-ui --dry-run`` process talks to a loopback server that never answers.
A clean stop (SIGINT) while the master's analyze call is in flight ends the process within
seconds; with ``--llm-timeout`` (or CACAO_LLM_TIMEOUT) the call fails on its own as one clear
line; a bad CACAO_LLM_TIMEOUT is one line, exit 2, nothing written.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.llm.wire_servers import DIALECTS, WireServer, cli_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    target = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", target, ignore=shutil.ignore_patterns("output", "archive"))
    return target


@pytest.fixture
def hung_server() -> WireServer:
    server = WireServer().start()
    never = DIALECTS["anthropic"].text("too late")
    never.delay_s = 120.0  # far past every limit below
    server.repeat = never
    try:
        yield server
    finally:
        server.stop()


def _cacao(problem: Path, *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "anthropic"]
    return [*argv, "--no-ui", "--dry-run", *extra]


def _wait_for_request(server: WireServer, process: subprocess.Popen[str], limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not server.requests:
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"cacao ended before calling the model:\n{out}\n{err}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("cacao never called the model")
        time.sleep(0.05)


def test_a_clean_stop_cancels_the_masters_call_within_seconds(
    problem: Path, hung_server: WireServer, tmp_path: Path
) -> None:
    env = cli_env("anthropic", hung_server, str(tmp_path / "config"))
    process = subprocess.Popen(
        _cacao(problem), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for_request(hung_server, process)
        time.sleep(0.3)  # the call is in flight, not just sent
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("a clean stop did not end the run within 10 s: the master's LLM call was not cancelled")
        took = time.monotonic() - stopped_at
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert took < 5.0, took
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert "stopping cleanly" in out and "run interrupted" in out, out
    assert [r.path for r in hung_server.requests] == ["/v1/messages"]  # one call, never retried after the stop


@pytest.mark.parametrize("how", ["flag", "environment", "dotenv"])
def test_a_call_past_the_timeout_fails_as_one_line(
    how: str, problem: Path, hung_server: WireServer, tmp_path: Path
) -> None:
    env = cli_env("anthropic", hung_server, str(tmp_path / "config"))
    extra: list[str] = []
    if how == "flag":
        extra = ["--llm-timeout", "1"]
    elif how == "environment":
        env["CACAO_LLM_TIMEOUT"] = "1"
    else:
        (problem / ".env").write_text("CACAO_LLM_TIMEOUT=1\n")
    started = time.monotonic()
    result = subprocess.run(_cacao(problem, *extra), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "Traceback" not in out
    # The call gets 3 x 1 s in all: an attempt of 1 s, a wait, then nothing left.
    finished = [line for line in out.splitlines() if line.startswith("run failed")]
    assert len(finished) == 1, out
    assert "node analyze" in finished[0] and "no answer within the call's limit of 3 s" in finished[0], finished[0]
    assert took < 30.0, took


def test_a_bad_timeout_variable_is_one_line_and_writes_nothing(problem: Path, tmp_path: Path) -> None:
    server = WireServer().start()
    try:
        env = cli_env("anthropic", server, str(tmp_path / "config"))
        env["CACAO_LLM_TIMEOUT"] = "soon"
        result = subprocess.run(_cacao(problem), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.stop()
    assert result.returncode == 2
    assert result.stderr.strip() == "cacao: CACAO_LLM_TIMEOUT='soon': expected a number of seconds, e.g. 300"
    assert not (problem / "output").exists() and not server.requests
