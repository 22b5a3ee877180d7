"""Secrets are redacted: known key values and key-shaped strings, in errors, replies, what is
sent and what is recorded; ordinary code is left alone; scanning stays linear."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from wire_servers import DIALECTS, Dialect, WireServer

from cacao_tui.llm import CallContext, LLMError, Message, ScriptedProvider, TrackedLLM, llm_environment, redact
from cacao_tui.llm.redaction import REDACTED, forget_env_file_values, known_secrets, redact_data

CTX = CallContext("b1", 1, "author")
ANTHROPIC_KEY = "sk-ant-api03-" + "Q" * 40
ODD_KEY = "cerit-0123456789abcdef"  # not key-shaped: only known because it is in the environment


@pytest.fixture(autouse=True)
def _no_remembered_values() -> Iterator[None]:
    forget_env_file_values()
    yield
    forget_env_file_values()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abcdefghijklmnopqrstuvwx"),
        ("key AIzaSyD-abcdefghijklmnopqrstuvwxyz0123456", "AIzaSyD-abcdefghijklmnopqrstuvwxyz0123456"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz.0123456789", "abcdefghijklmnopqrstuvwxyz.0123456789"),
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123456789", "hf_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("OPENAI_API_KEY=whatever-secret-1\x00HOME=/root", "whatever-secret-1"),
        ("DB_PASSWORD=correct-horse-battery", "correct-horse-battery"),
        ('{"api_key": "abcdefghijklmnop1234"}', "abcdefghijklmnop1234"),
        ("https://user:hunter2-long@example.org/v1", "hunter2-long"),
    ],
)
def test_key_shaped_strings_are_redacted(text: str, secret: str) -> None:
    out = redact(text, ())
    assert REDACTED in out and secret not in out


@pytest.mark.parametrize(
    "text",
    [
        "__global__ void k(const float* __restrict__ sk_in, int key) { int KEY_BITS = 8; }",
        "const int task-specific = 1; // sk-1 is short",
        "#define TILE_KEY=4\nHOME=/root PATH=/usr/bin",
        "https://api.openai.com/v1 http://127.0.0.1:8000/v1",
        "the bearer of bad news",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text, ()) == text


def test_known_values_come_from_the_registry_key_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CERIT_API_KEY", ODD_KEY)
    monkeypatch.setenv("CLAUDE_API_KEY", "short")  # under 8 characters: not treated as a secret
    assert ODD_KEY in known_secrets()
    assert redact(f"server said: bad key {ODD_KEY}!") == f"server said: bad key {REDACTED}!"
    assert redact("a short word") == "a short word"


def test_values_from_env_files_are_secrets(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "MY_SERVICE_PASS=plain-looking-value\nLLM_MODEL=qwen3.5-122b-instruct\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n"
    )
    llm_environment(tmp_path, cwd=tmp_path, config_dir=tmp_path, base={})
    assert redact("echo plain-looking-value") == f"echo {REDACTED}"  # a value the run ignores is still a secret
    # Selection and endpoint variables are configuration, not secrets.
    assert redact("qwen3.5-122b-instruct at http://127.0.0.1:9/v1") == "qwen3.5-122b-instruct at http://127.0.0.1:9/v1"


def test_redact_data_walks_nested_values() -> None:
    data = {"a": [f"x {ANTHROPIC_KEY}", {"b": ANTHROPIC_KEY}], "n": 3, "none": None}
    assert redact_data(data, ()) == {"a": [f"x {REDACTED}", {"b": REDACTED}], "n": 3, "none": None}


def test_scanning_is_linear_on_hostile_text() -> None:
    for hostile in ("KEY" * 300_000, "sk-" * 300_000, "Bearer " * 150_000, "://a:" * 200_000, "A" * 1_000_000):
        started = time.monotonic()
        redact(hostile, ())
        assert time.monotonic() - started < 2.0, hostile[:10]


@pytest.mark.parametrize("dialect", list(DIALECTS.values()), ids=list(DIALECTS))
async def test_a_key_echoed_in_a_401_is_not_kept(
    dialect: Dialect, server: WireServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = ODD_KEY if dialect.provider == "cerit" else ANTHROPIC_KEY
    monkeypatch.setenv(dialect.key_var, key)
    # The server quotes the key; a long body, so a cut at 300 characters would split it.
    server.repeat = dialect.error(401, "x" * 280 + f" invalid key {key} for this account")
    records = []
    llm = TrackedLLM(dialect.build(server), record_root=tmp_path, on_call=records.append)
    with pytest.raises(LLMError) as info:
        await llm.chat([Message(role="user", content="hi")], ctx=CTX)
    assert key not in str(info.value) and key[:16] not in str(info.value)
    assert records[0].error and key[:16] not in records[0].error
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key[:16] not in path.read_text(errors="replace"), path
    await llm.aclose()


async def test_secrets_are_redacted_in_what_is_sent_returned_and_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    leaked = f"compiler: error in /proc/self/environ: ANTHROPIC_API_KEY={ANTHROPIC_KEY}"
    provider = ScriptedProvider(
        [
            {
                "text": f"I saw {ANTHROPIC_KEY}",
                "tool_calls": [{"id": "c", "name": "w", "arguments": {"x": ANTHROPIC_KEY}}],
            }
        ]
    )
    llm = TrackedLLM(provider, record_root=tmp_path)
    response = await llm.chat([Message(role="tool", tool_call_id="t", content=leaked)], ctx=CTX, system=ANTHROPIC_KEY)
    [request] = provider.requests
    assert ANTHROPIC_KEY not in request.messages[0].content and request.system == REDACTED
    assert response.text == f"I saw {REDACTED}" and response.tool_calls[0].arguments == {"x": REDACTED}
    text = "".join(p.read_text() for p in tmp_path.rglob("*.json"))
    assert ANTHROPIC_KEY not in text and REDACTED in text
