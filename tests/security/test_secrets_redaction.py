"""Class 6 of the containment issue, secrets: a key echoed back by a provider is stored nowhere.

For each provider, a whole ``cacao --no-ui --dry-run`` process calls a loopback server that
answers 401 and quotes the key it was sent, plus a key-shaped string of someone else's. The
key comes from the environment or from the problem's .env file (a value that does not look
like a key, so only knowing it finds it). Afterwards the whole output/ tree, stdout and
stderr are searched for the key and for its first 12 characters: absent. The records must
show ``[REDACTED]`` where the server quoted it, so the search is not vacuous.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.llm.wire_servers import DIALECTS, WireServer, cli_env

ROOT = Path(__file__).resolve().parents[2]
# Someone else's key, in a shape every provider uses: found by its shape alone.
FOREIGN_KEY = "sk-proj-" + "F" * 20 + "oreignKey0123456789"


@pytest.mark.parametrize(
    ("provider", "where"),
    [("anthropic", "env"), ("openai", "dotenv"), ("cerit", "env"), ("gemini", "dotenv"), ("anthropic", "dotenv")],
)
def test_a_key_echoed_in_a_401_is_stored_nowhere(provider: str, where: str, tmp_path: Path) -> None:
    dialect = DIALECTS[provider]
    key = f"{provider}-Secret-{where}-0123456789abcdef"  # not key-shaped on purpose
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    server = WireServer().start()
    try:
        # A long message first: cut short for display at 300 characters, it would split the key.
        server.repeat = dialect.error(401, "z" * 260 + f" invalid api key {key}; also saw {FOREIGN_KEY}")
        env = cli_env(provider, server, str(tmp_path / "config"), key=key if where == "env" else None)
        if where == "dotenv":
            (problem / ".env").write_text(f"{dialect.key_var}={key}\n")
        argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", provider]
        argv += ["--model", dialect.model, "--no-ui", "--dry-run"]
        result = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in out, out
    assert len(server.requests) == 1, "a 401 is not retried"
    sent = server.requests[0].headers
    assert key in sent.get("x-api-key", "") + sent.get("authorization", "") + sent.get("x-goog-api-key", "")

    names = {p.name for p in (problem / "output").rglob("*") if p.is_file()}
    assert {"master.json", "run.jsonl", "analyze_000.json"} <= names
    for needle in (key, key[:12], FOREIGN_KEY, FOREIGN_KEY[:16]):
        assert needle not in out, f"{needle!r} printed"
        for path in (problem / "output").rglob("*"):
            if path.is_file():
                assert needle not in path.read_text(encoding="utf-8", errors="replace"), f"{needle!r} in {path}"
    # Not vacuous: the server's message did reach the record, with the key replaced.
    record = problem / "output" / "llm" / "analyze_000.json"
    assert "invalid api key [REDACTED]" in record.read_text()
