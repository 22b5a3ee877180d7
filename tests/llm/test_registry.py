"""The provider registry: one table read by selection, the CLI, pricing, temperatures and the docs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from wire_servers import DIALECTS, Dialect, WireServer

from cacao_tui import cli, run_options
from cacao_tui.llm import (
    CallContext,
    LLMError,
    Message,
    ScriptedProvider,
    TrackedLLM,
    create_llm,
    provider_docs,
    registry,
    select_provider,
)
from cacao_tui.llm.factory import build_provider
from cacao_tui.llm.pricing import Price
from cacao_tui.llm.registry import ProviderEntry, Temperatures, temperature_for_call, temperatures_for

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "PROVIDERS.md"


def _docs_block(name: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(rf"<!-- registry:{name} -->\n(.*?)\n<!-- /registry:{name} -->", text, re.S)
    assert match, f"docs/PROVIDERS.md has no registry:{name} block"
    return match.group(1)


@pytest.mark.parametrize("name", list(provider_docs.DOC_TABLES))
def test_docs_tables_are_the_registry(name: str) -> None:
    # Regenerate with: python -m cacao_tui.llm.provider_docs
    assert _docs_block(name) == provider_docs.DOC_TABLES[name]()


def test_cli_reads_the_registry() -> None:
    assert cli.PROVIDERS == registry.PROVIDER_NAMES
    help_text = cli.build_parser().format_help()
    assert "claude = anthropic" in help_text and "google = gemini" in help_text and "--llm-timeout" in help_text
    for alias, name in [("Claude", "anthropic"), ("google", "gemini"), ("OPENAI", "openai")]:
        assert cli.parse_args(["--dir", str(ROOT / "problems" / "mmul"), "--provider", alias]).provider == name
    with pytest.raises(cli.UsageError, match="aliases: claude = anthropic"):
        cli.parse_args(["--dir", str(ROOT / "problems" / "mmul"), "--provider", "mistral"])


def test_help_imports_no_sdk() -> None:
    code = (
        "import sys, contextlib, io\n"
        "from cacao_tui import cli\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    cli.main(['--help'])\n"
        "loaded = [m for m in ('anthropic', 'openai', 'google.genai') if m in sys.modules]\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == ""


def test_aliases_and_claude_api_key() -> None:
    env = {"CLAUDE_API_KEY": "c-key", "GOOGLE_API_KEY": "g-key"}
    assert select_provider("claude", None, env=env, settings_provider=None).provider == "anthropic"
    assert select_provider(None, None, env={**env, "LLM_PROVIDER": "google"}, settings_provider=None).provider == (
        "gemini"
    )
    detected = select_provider(None, None, env={"CLAUDE_API_KEY": "c-key"}, settings_provider=None)
    assert (detected.provider, detected.key_var) == ("anthropic", "CLAUDE_API_KEY")
    assert detected.source == "auto-detect (CLAUDE_API_KEY)"
    # ANTHROPIC_API_KEY comes first when both are set.
    both = select_provider("anthropic", None, env={"ANTHROPIC_API_KEY": "a", "CLAUDE_API_KEY": "c"})
    assert both.key_var == "ANTHROPIC_API_KEY"
    with pytest.raises(LLMError, match="ANTHROPIC_API_KEY or CLAUDE_API_KEY"):
        select_provider("anthropic", None, env={})


async def test_claude_api_key_reaches_the_server(server: WireServer) -> None:
    dialect = DIALECTS["anthropic"]
    server.push(dialect.text("hi"))
    choice = select_provider(
        "claude", None, env={"CLAUDE_API_KEY": "from-claude-var", "ANTHROPIC_BASE_URL": server.url}
    )
    llm = create_llm(choice, env={"CLAUDE_API_KEY": "from-claude-var"})
    assert (await llm.chat([Message(role="user", content="x")], ctx=CallContext(None, None, "analyze"))).text == "hi"
    headers = server.requests[0].headers
    assert "from-claude-var" in (headers.get("x-api-key", "") + headers.get("authorization", ""))
    await llm.aclose()


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("anthropic", "claude-sonnet-5-5", None),  # the Messages API takes no temperature
        ("openai", "claude-sonnet-5-5", Temperatures(0.3, 0.0)),  # Claude behind a compatible proxy
        ("cerit", "qwen3.5", Temperatures(1.0, 0.7)),
        ("cerit", "deepseek-v4-pro-thinking", Temperatures(0.4, 0.0)),
        ("cerit", "kimi-k3", Temperatures(1.0, 0.6)),
        ("cerit", "glm-5.2", Temperatures(1.0, 0.7)),
        ("cerit", "gpt-oss-120b", Temperatures(0.3, 0.0)),
        ("gemini", "gemini-3.1-pro-preview", Temperatures(0.3, 0.0)),
        ("openai", "Qwen/Qwen2.5-Coder-32B-Instruct", Temperatures(1.0, 0.7)),  # a local server
        ("openai", "gpt-6.1-sol", None),  # reasoning models take only their default
        ("openai", "gpt-5.3-codex", None),
        ("openai", "o3-mini", None),
        ("openai", "gpt-5", None),  # gpt-5 itself reasons by default
        ("openai", "gpt-5-mini", None),
        ("openai", "gpt-5.4-pro", None),
        ("openai", "gpt-5.4", Temperatures(0.3, 0.0)),  # the original's default model, which sent one
        ("openai", "gpt-5.4-mini", Temperatures(0.3, 0.0)),
        ("replay", "claude-sonnet-5-5", None),
    ],
)
def test_temperatures_per_model(provider: str, model: str, expected: Temperatures | None) -> None:
    assert temperatures_for(provider, model) == expected


def test_default_models_and_their_temperatures_are_the_originals() -> None:
    """config.py of the original's newest code: MODELS[...]["default"] and MODEL_CONFIGS."""
    defaults = {p.name: p.default_model for p in registry.PROVIDERS if p.auto_detect}
    assert defaults == {
        "cerit": "glm-5.2",
        "anthropic": "claude-opus-4-6",
        "openai": "gpt-5.4",
        "gemini": "gemini-3-pro",
    }
    assert temperatures_for("cerit", "glm-5.2") == Temperatures(1.0, 0.7)
    assert temperatures_for("openai", "gpt-5.4") == Temperatures(0.3, 0.0)
    assert temperatures_for("gemini", "gemini-3-pro") == Temperatures(0.3, 0.0)
    assert temperatures_for("anthropic", "claude-opus-4-6") is None  # the pinned SDK takes none (PROVIDERS.md)
    for p in registry.PROVIDERS:
        if p.auto_detect and p.prices:
            assert p.price(p.default_model) is not None, p.name  # --budget-usd works with the default


def test_creative_steps_and_precise_steps() -> None:
    t = Temperatures(1.0, 0.7)
    assert [temperature_for_call(t, n, structured=False) for n in ("analyze", "plan", "propose")] == [1.0] * 3
    assert [temperature_for_call(t, n, structured=False) for n in ("author", "implement", "configure")] == [0.7] * 3
    assert temperature_for_call(t, "strategize", structured=True) == 0.7
    assert temperature_for_call(t, "analyze", structured=True) == 0.7
    assert temperature_for_call(None, "analyze", structured=False) is None


@pytest.mark.parametrize("dialect", [d for d in DIALECTS.values() if d.provider != "anthropic"])
async def test_the_temperature_goes_out_on_the_wire(dialect: Dialect, server: WireServer) -> None:
    server.push(dialect.text("creative"), dialect.text('{"a": 1}'))
    model = {"openai": "llama-3-local"}.get(dialect.provider, dialect.model)
    temps = temperatures_for(dialect.provider, model)
    assert temps is not None
    choice = select_provider(dialect.provider, model, env=_env(dialect, server))
    llm = create_llm(choice, env=_env(dialect, server))
    await llm.chat([Message(role="user", content="think")], ctx=CallContext(None, None, "analyze"))
    await llm.chat([Message(role="user", content="code")], ctx=CallContext("b", 1, "author"))
    sent = [_temperature(dialect, r.body) for r in server.requests]
    assert sent == [temps.creative, temps.precise]
    await llm.aclose()


async def test_the_originals_default_openai_model_gets_its_temperature(server: WireServer) -> None:
    dialect = DIALECTS["openai"]
    server.push(dialect.text("ok"))
    choice = select_provider("openai", "gpt-5.4", env=_env(dialect, server))
    llm = create_llm(choice, env=_env(dialect, server))
    await llm.chat([Message(role="user", content="x")], ctx=CallContext(None, None, "analyze"))
    assert server.requests[0].body["temperature"] == 0.3
    await llm.aclose()


@pytest.mark.parametrize(
    ("name", "model"), [("openai", "gpt-5.3-codex"), ("openai", "gpt-5"), ("anthropic", "claude-sonnet-5-5")]
)
async def test_no_temperature_where_the_api_takes_none(name: str, model: str, server: WireServer) -> None:
    dialect = DIALECTS[name]
    server.push(dialect.text("ok"))
    choice = select_provider(name, model, env=_env(dialect, server))
    llm = create_llm(choice, env=_env(dialect, server))
    await llm.chat([Message(role="user", content="x")], ctx=CallContext(None, None, "analyze"))
    assert "temperature" not in server.requests[0].body
    await llm.aclose()


def _env(dialect: Dialect, server: WireServer) -> dict[str, str]:
    base = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL", "cerit": "CERIT_API_BASE"}
    env = {dialect.key_var: "test-key"}
    env[base.get(dialect.provider, "GOOGLE_GEMINI_BASE_URL")] = dialect.base_url(server)
    return env


def _temperature(dialect: Dialect, body: dict) -> float | None:
    if dialect.provider == "gemini":
        return (body.get("generationConfig") or {}).get("temperature")
    return body.get("temperature")


async def test_a_fifth_provider_is_one_entry(monkeypatch: pytest.MonkeyPatch, server: WireServer) -> None:
    """An OpenAI-compatible service added as one registry entry: selected by name and alias,
    built, priced, given temperatures, listed in the CLI and the docs table."""
    entry = ProviderEntry(
        name="mistral",
        title="Mistral's OpenAI-compatible API",
        factory="cacao_tui.llm.openai_adapter:create",
        default_model="mistral-large-latest",
        aliases=("lechat",),
        key_vars=("MISTRAL_API_KEY",),
        base_var="MISTRAL_BASE_URL",
        sdk="openai",
        prices={"mistral-large-latest": Price(2.0, 6.0, 0.2)},
    )
    monkeypatch.setitem(registry.BY_NAME, "mistral", entry)
    monkeypatch.setitem(registry.ALIASES, "lechat", "mistral")
    monkeypatch.setattr(registry, "PROVIDERS", (*registry.PROVIDERS, entry))
    monkeypatch.setattr(registry, "PROVIDER_NAMES", (*registry.PROVIDER_NAMES, "mistral"))

    env = {"MISTRAL_API_KEY": "m-key", "MISTRAL_BASE_URL": server.url + "/v1"}
    choice = select_provider("LeChat", None, env=env)
    assert (choice.provider, choice.model, choice.key_var) == ("mistral", "mistral-large-latest", "MISTRAL_API_KEY")
    assert run_options._provider("mistral") == "mistral"
    assert "mistral" in provider_docs.providers_markdown() and "`MISTRAL_API_KEY`" in provider_docs.providers_markdown()
    assert "MISTRAL_API_KEY" in registry.key_variables()

    server.push(DIALECTS["openai"].text("bonjour"))
    llm = create_llm(choice, env=env)
    response = await llm.chat([Message(role="user", content="salut")], ctx=CallContext(None, None, "plan"))
    assert response.text == "bonjour" and llm.provider == "mistral" and llm.priced
    assert server.requests[0].headers["authorization"] == "Bearer m-key"
    assert server.requests[0].body["temperature"] == 0.3
    await llm.aclose()


def test_a_missing_sdk_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic now fails
    choice = select_provider("anthropic", None, env={"ANTHROPIC_API_KEY": "k"})
    with pytest.raises(LLMError, match=r"^the anthropic provider needs its SDK, which is not installed \(anthropic\)$"):
        build_provider(choice, env={"ANTHROPIC_API_KEY": "k"})


async def test_tracked_llm_without_temperatures_sends_none() -> None:
    provider = ScriptedProvider(["ok"])
    await TrackedLLM(provider).chat([Message(role="user", content="x")], ctx=CallContext(None, None, "analyze"))
    assert provider.requests[0].temperature is None
