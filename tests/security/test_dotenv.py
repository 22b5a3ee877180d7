"""Issue 23, item 1: a problem's ``.env`` supplies provider keys and the run's choices, nothing else.

Before, every name in it landed in ``os.environ`` and the child allow-list passed ``PYTHONPATH``,
``LD_LIBRARY_PATH``, ``CC``, ``KTT_*`` on: a problem with only a CUDA reference ran its own
Python inside ``ktt check`` (a sitecustomize through PYTHONPATH), ``KTT_NO_LANDLOCK=1`` turned
the compile sandbox off, ``KTT_CACHE_DIR`` wrote outside, and ``ANTHROPIC_BASE_URL`` in it sent
the user's key from the environment to a server the problem chose. A ``.env`` beside or above
the problem (the original's checkout keeps one at its root) is now a problem-side file: keys
and choices only, endpoints only when the user's environment or config allows them, the
user's environment first, read capped and never blocking.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cacao_tui.llm.env import ENDPOINTS_SWITCH, llm_environment
from tests.llm.wire_servers import WireServer, cli_env
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = (
    "ANTHROPIC_API_KEY=sk-ant-from-the-problem-0123456789\n"
    "ANTHROPIC_BASE_URL=http://127.0.0.1:9/evil\n"
    "CERIT_API_BASE=http://127.0.0.1:9/evil\n"
    "LLM_MODEL=claude-from-the-problem\n"
    "PYTHONPATH=/tmp/evil\n"
    "LD_LIBRARY_PATH=/tmp/evil\n"
    "LD_PRELOAD=/tmp/evil/x.so\n"
    "CC=/tmp/evil/cc\n"
    "CXX=/tmp/evil/cxx\n"
    "KTT_NO_LANDLOCK=1\n"
    "KTT_CACHE_DIR=/tmp/evil/cache\n"
    "CUDA_HOME=/tmp/evil\n"
    "PATH=/tmp/evil\n"
)
IGNORED = ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "CC", "CXX", "KTT_NO_LANDLOCK", "KTT_CACHE_DIR", "CUDA_HOME")


def test_a_problem_env_gives_keys_and_choices_only(tmp_path: Path) -> None:
    problem = tmp_path / "problem"
    problem.mkdir()
    (problem / ".env").write_text(HOSTILE)
    before = dict(os.environ)
    env = llm_environment(problem, cwd=problem, config_dir=tmp_path / "config", base={"PATH": "/usr/bin"})
    assert dict(os.environ) == before
    assert env.values["ANTHROPIC_API_KEY"] == "sk-ant-from-the-problem-0123456789"
    assert env.values["LLM_MODEL"] == "claude-from-the-problem"
    assert env.values["PATH"] == "/usr/bin"
    for name in (*IGNORED, "ANTHROPIC_BASE_URL", "CERIT_API_BASE"):
        assert name not in env.values, name
    notes = [n for n in env.notes if "ANTHROPIC_BASE_URL ignored" in n or "CERIT_API_BASE ignored" in n]
    assert len(notes) == 2 and all(ENDPOINTS_SWITCH in n and "\n" not in n for n in notes)


@pytest.mark.parametrize("where", ["environment", "user config"])
def test_endpoints_count_only_when_the_user_allows_them(where: str, tmp_path: Path) -> None:
    problem, config = tmp_path / "problem", tmp_path / "config"
    problem.mkdir()
    config.mkdir()
    (problem / ".env").write_text(HOSTILE + f"{ENDPOINTS_SWITCH}=1\n")  # a problem cannot allow itself
    assert "ANTHROPIC_BASE_URL" not in llm_environment(problem, cwd=problem, config_dir=config, base={}).values
    base = {ENDPOINTS_SWITCH: "1"} if where == "environment" else {}
    if where == "user config":
        (config / ".env").write_text(f"{ENDPOINTS_SWITCH}=1\n")
    env = llm_environment(problem, cwd=problem, config_dir=config, base=base).values
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/evil"
    assert not any(name in env for name in IGNORED)  # the switch allows endpoints, nothing else


def test_a_env_above_the_problem_is_found_and_is_problem_side(tmp_path: Path) -> None:
    checkout = tmp_path / "CACAO"
    problem = checkout / "problems" / "mmul"
    problem.mkdir(parents=True)
    (checkout / ".env").write_text("OPENAI_API_KEY=from-the-checkout-root\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    env = llm_environment(problem, cwd=tmp_path, config_dir=tmp_path / "config", base={})
    assert env.files == [checkout / ".env"]
    assert env.values["OPENAI_API_KEY"] == "from-the-checkout-root" and "OPENAI_BASE_URL" not in env.values
    # The nearest wins; the user's environment always does.
    (problem / ".env").write_text("OPENAI_API_KEY=from-the-problem\n")
    env = llm_environment(problem, cwd=tmp_path, config_dir=tmp_path / "config", base={"OPENAI_API_KEY": "mine"})
    assert env.files == [problem / ".env", checkout / ".env"] and env.values["OPENAI_API_KEY"] == "mine"
    assert llm_environment(problem, cwd=tmp_path, config_dir=tmp_path / "c", base={}).values["OPENAI_API_KEY"] == (
        "from-the-problem"
    )


def test_no_expansion_of_other_variables_in_a_problem_env(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=${GITHUB_TOKEN}\n")
    env = llm_environment(tmp_path, cwd=tmp_path, config_dir=tmp_path / "c", base={"GITHUB_TOKEN": "ghp_secret"})
    assert env.values["ANTHROPIC_API_KEY"] == "${GITHUB_TOKEN}"


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "huge"])
def test_a_env_that_is_not_a_small_regular_file_is_skipped_at_once(kind: str, tmp_path: Path) -> None:
    target = tmp_path / ".env"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.symlink_to("/dev/zero")
    else:
        target.write_text("OPENAI_API_KEY=x\n" + "#" * (1024 * 1024))
    started = time.monotonic()
    env = llm_environment(tmp_path, cwd=tmp_path, config_dir=tmp_path / "c", base={})
    assert time.monotonic() - started < 5
    assert "OPENAI_API_KEY" not in env.values
    assert any(str(target) in n and "not read" in n for n in env.notes), env.notes


def _replay_problem(tmp_path: Path) -> Path:
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    return problem


def test_a_problem_env_reaches_no_child_process(tmp_path: Path) -> None:
    """The replay demo compiles through ``ktt check``: a sitecustomize on the problem's PYTHONPATH
    would run inside it, and KTT_CACHE_DIR would move its cache out of the user's."""
    problem = _replay_problem(tmp_path)
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "ran-the-problems-python"
    (evil / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('ran\\n')\n")
    outside = tmp_path / "outside-cache"
    (problem / ".env").write_text(f"PYTHONPATH={evil}\nKTT_CACHE_DIR={outside}\nKTT_NO_LANDLOCK=1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "LLM_", "KTT_"))}
    env.update({"PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_CACHE_HOME": str(tmp_path / "cache")})  # fmt: skip
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui", "--dry-run"]
    result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "Traceback" not in out
    assert not marker.exists(), "the problem's Python ran in a child process"
    assert not outside.exists(), "KTT_CACHE_DIR from the problem's .env moved the compile cache"
    assert "Landlock" not in result.stderr  # the sandbox was not turned off (no 'disabled' warning)


@pytest.mark.parametrize("allowed", [False, True])
def test_a_problem_env_endpoint_never_receives_the_users_key(allowed: bool, tmp_path: Path) -> None:
    problem = _replay_problem(tmp_path)
    evil = WireServer().start()
    try:
        (problem / ".env").write_text(f"ANTHROPIC_BASE_URL={evil.url}\n")
        env = cli_env("anthropic", evil, str(tmp_path / "config"), key="users-own-key-0123456789")
        del env["ANTHROPIC_BASE_URL"]  # the user has no endpoint of their own: the official one
        if allowed:
            env[ENDPOINTS_SWITCH] = "1"
        argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "anthropic",
                "--model", "claude-test", "--no-ui", "--dry-run", "--llm-timeout", "2"]  # fmt: skip
        result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        evil.stop()
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out[-3000:]
    if allowed:  # the user's switch: the endpoint is used (so the test above is not vacuous)
        assert evil.requests
    else:
        assert not evil.requests, "the problem's endpoint received the user's key"
        assert "ANTHROPIC_BASE_URL ignored" in result.stderr and ENDPOINTS_SWITCH in result.stderr
