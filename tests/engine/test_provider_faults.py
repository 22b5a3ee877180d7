"""The LLM issue's end-to-end fault run: `cacao --no-ui --dry-run` against a loopback server
that answers 429, then 500, then useless text, for each of the four providers. The run
must end cleanly: the retries recorded, the master falling back to a default strategy
(the text holds no strategy list), the branch's decisions made by rule (retry the failed
iteration once, then stop), and the run finishing without a traceback — as failed (exit 1): the
model never wrote a kernel, so there is nothing to show (issue 30: the verdict follows from
what the run produced, not from its reaching the end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm.wire_servers import DIALECTS, WireServer
from tests.pathenv import child_pythonpath

ENV_PREFIXES = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CERIT_", "LLM_")


def provider_env(name: str, server: WireServer, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIXES)}
    env.update({"XDG_CONFIG_HOME": str(tmp / "config"), "PYTHONPATH": child_pythonpath()})
    if name == "anthropic":
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.url)
    elif name == "openai":
        env.update(OPENAI_API_KEY="test-key", OPENAI_BASE_URL=server.url + "/v1")
    elif name == "cerit":
        env.update(CERIT_API_KEY="test-key", CERIT_API_BASE=server.url + "/v1")
    elif name == "gemini":
        env.update(GEMINI_API_KEY="test-key", GOOGLE_GEMINI_BASE_URL=server.url)
    return env


@pytest.mark.parametrize("name", ["anthropic", "openai", "cerit", "gemini"])
def test_fault_run_ends_cleanly(name: str, mmul_dir: Path, tmp_path: Path) -> None:
    dialect = DIALECTS[name]
    server = WireServer().start()
    try:
        server.push(dialect.error(429, "slow down", {"retry-after": "0"}), dialect.error(500, "server broke"))
        server.repeat = dialect.text("I am not going to answer that properly.")
        argv = [
            sys.executable,
            "-m",
            "cacao_tui",
            "--dir",
            str(mmul_dir),
            "--provider",
            name,
            "--model",
            dialect.model,
            "--no-ui",
            "--dry-run",
        ]
        result = subprocess.run(
            argv, capture_output=True, text=True, cwd=tmp_path, timeout=180, env=provider_env(name, server, tmp_path)
        )
    finally:
        server.stop()
    out = result.stdout + result.stderr
    assert result.returncode == 1, out[-4000:]
    assert "Traceback" not in out
    finished = [line for line in out.splitlines() if line.startswith("run ")]
    assert len(finished) == 1 and finished[0].startswith("run failed: no kernel was written"), out[-4000:]
    assert len(server.requests) >= 4  # 429, 500, the analysis, then the strategize attempts
    records = sorted((mmul_dir / "output" / "llm").glob("*.json"))
    assert [p.name for p in records][:2] == ["analyze_000.json", "strategize_000.json"]
    analyze = json.loads(records[0].read_text())
    statuses = [a.get("status") for a in analyze["attempts"]]
    assert statuses[:2] == [429, 500] and analyze["response"] is not None
    master = json.loads((mmul_dir / "output" / "master.json").read_text())
    assert [s["name"] for s in master["strategies"]] == ["baseline"]
    assert master["fallbacks"] and "default strategy" in master["fallbacks"][0]
    states = sorted((mmul_dir / "output" / "branches" / "b1-baseline").glob("iter*/state.json"))
    decisions = [json.loads(p.read_text())["decision"] for p in states]
    assert [d["action"] for d in decisions] == ["retry", "stop"] and all(d["fallback"] for d in decisions)
