from __future__ import annotations

import os
from pathlib import Path

import pytest

from cacao_tui.llm import LLMError, llm_environment, select_provider
from cacao_tui.llm.env import env_files

ALL_KEYS = {
    "CERIT_API_KEY": "c",
    "CERIT_API_BASE": "https://cerit.example/v1",
    "ANTHROPIC_API_KEY": "a",
    "OPENAI_API_KEY": "o",
    "GEMINI_API_KEY": "g",
}


def pick(cli=None, model=None, *, env, settings=None):
    return select_provider(cli, model, env=env, settings_provider=settings)


def test_cli_flag_wins_over_everything() -> None:
    env = {**ALL_KEYS, "LLM_PROVIDER": "openai"}
    choice = pick("Gemini", None, env=env, settings="anthropic")
    assert (choice.provider, choice.source, choice.key_var) == ("gemini", "--provider", "GEMINI_API_KEY")


def test_settings_win_over_llm_provider() -> None:
    choice = pick(env={**ALL_KEYS, "LLM_PROVIDER": "openai"}, settings="anthropic")
    assert (choice.provider, choice.source) == ("anthropic", "settings.PROVIDER")


def test_llm_provider_wins_over_auto_detect() -> None:
    choice = pick(env={**ALL_KEYS, "LLM_PROVIDER": "openai"})
    assert (choice.provider, choice.source) == ("openai", "LLM_PROVIDER")


def test_settings_module_value_is_used_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from cacao_tui import settings

    monkeypatch.setattr(settings, "PROVIDER", "gemini")
    assert select_provider(None, None, env=ALL_KEYS).provider == "gemini"


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (["CERIT_API_KEY", "CERIT_API_BASE", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"], "cerit"),
        (["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"], "anthropic"),
        (["OPENAI_API_KEY", "GEMINI_API_KEY"], "openai"),
        (["GEMINI_API_KEY"], "gemini"),
    ],
)
def test_auto_detect_order(present: list[str], expected: str) -> None:
    choice = pick(env={k: ALL_KEYS[k] for k in present})
    assert choice.provider == expected and choice.source.startswith("auto-detect")


def test_google_api_key_counts_for_gemini() -> None:
    choice = pick(env={"GOOGLE_API_KEY": "g"})
    assert (choice.provider, choice.key_var) == ("gemini", "GOOGLE_API_KEY")


def test_no_key_at_all_names_the_variables() -> None:
    with pytest.raises(LLMError) as info:
        pick(env={})
    message = str(info.value)
    assert "\n" not in message
    for var in ("CERIT_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "--provider replay"):
        assert var in message


@pytest.mark.parametrize(
    ("provider", "variable"),
    [
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("openai", "OPENAI_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
        ("cerit", "CERIT"),
    ],
)
def test_missing_key_names_the_variable(provider: str, variable: str) -> None:
    with pytest.raises(LLMError, match=variable) as info:
        pick(provider, env={})
    assert "\n" not in str(info.value) and ".env" in str(info.value)


def test_cerit_needs_its_base() -> None:
    with pytest.raises(LLMError, match="CERIT_API_BASE"):
        pick("cerit", env={"CERIT_API_KEY": "c"})
    choice = pick("cerit", env={"CERIT_API_KEY": "c", "CERIT_API_BASE": "https://x/v1"})
    assert (choice.base_url, choice.model) == ("https://x/v1", "glm-5.2")


def test_local_openai_server_needs_no_key_but_a_model() -> None:
    env = {"OPENAI_BASE_URL": "http://localhost:11434/v1"}
    with pytest.raises(LLMError, match="--model or LLM_MODEL"):
        pick(env=env)
    choice = pick(None, "qwen2.5-coder:32b", env=env)
    assert (choice.provider, choice.key_var, choice.base_url) == ("openai", None, "http://localhost:11434/v1")
    assert pick(env={**env, "LLM_MODEL": "llama3"}).model == "llama3"


def test_model_defaults_and_override() -> None:
    assert pick("anthropic", env=ALL_KEYS).model == "claude-opus-4-6"
    assert pick("anthropic", "claude-opus-4-8", env=ALL_KEYS).model == "claude-opus-4-8"
    assert pick("anthropic", env={**ALL_KEYS, "LLM_MODEL": "claude-haiku-4-5"}).model == "claude-haiku-4-5"


def test_replay_needs_no_key() -> None:
    choice = pick("replay", env={})
    assert (choice.provider, choice.key_var) == ("replay", None)


def test_unknown_provider_lists_the_choices() -> None:
    with pytest.raises(LLMError, match="anthropic, openai, gemini, replay"):
        pick("mistral", env={})


def test_an_unknown_llm_provider_warns_and_the_keys_decide() -> None:
    """The original's _detect_provider ignores an LLM_PROVIDER it does not know and auto-detects."""
    choice = pick(env={"LLM_PROVIDER": "mistral", "OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g"})
    assert (choice.provider, choice.source) == ("openai", "auto-detect (OPENAI_API_KEY)")
    (warning,) = choice.warnings
    assert "LLM_PROVIDER='mistral' names no provider" in warning and "ignored" in warning
    assert not pick(env={"LLM_PROVIDER": "Claude", "ANTHROPIC_API_KEY": "a"}).warnings  # an alias is known
    with pytest.raises(LLMError, match="no LLM provider configured"):
        pick(env={"LLM_PROVIDER": "mistral"})  # and with no key at all, the usual one line


def test_cerit_api_base_alone_selects_cerit_which_then_needs_its_key() -> None:
    """As the original: CERIT_API_BASE alone auto-detects CERIT, ahead of the other keys; its key check follows."""
    with pytest.raises(LLMError, match=r"auto-detect \(CERIT_API_BASE\)=cerit needs CERIT_API_KEY"):
        pick(env={"CERIT_API_BASE": "https://cerit.example/v1", "ANTHROPIC_API_KEY": "a"})
    choice = pick(env={"CERIT_API_BASE": "https://cerit.example/v1", "CERIT_API_KEY": "c", "OPENAI_API_KEY": "o"})
    assert (choice.provider, choice.key_var, choice.base_url) == ("cerit", "CERIT_API_KEY", "https://cerit.example/v1")


# -- .env loading (the hostile cases: tests/security/test_dotenv.py) ----------------------------


def test_env_files_precedence(tmp_path: Path) -> None:
    problem, cwd, config = tmp_path / "problem", tmp_path / "cwd", tmp_path / "config"
    for d in (problem, cwd, config):
        d.mkdir()
    (problem / ".env").write_text("OPENAI_API_KEY=from-problem\nCERIT_API_KEY=from-problem\n")
    (cwd / ".env").write_text("OPENAI_API_KEY=from-cwd\nGEMINI_API_KEY=from-cwd\nCERIT_API_KEY=from-cwd\n")
    (config / ".env").write_text("OPENAI_API_KEY=from-config\nANTHROPIC_API_KEY=cfg\n")
    before = dict(os.environ)

    loaded = llm_environment(problem, cwd=cwd, config_dir=config, base={"ANTHROPIC_API_KEY": "from-real-env"})
    assert loaded.files == [config / ".env", problem / ".env", cwd / ".env"]
    assert loaded.values["OPENAI_API_KEY"] == "from-config"  # the user's own config before a problem's
    assert loaded.values["CERIT_API_KEY"] == "from-problem"  # the problem's before the working directory's
    assert loaded.values["GEMINI_API_KEY"] == "from-cwd"
    assert loaded.values["ANTHROPIC_API_KEY"] == "from-real-env"  # the environment is never overridden
    assert dict(os.environ) == before  # nothing is written to os.environ


def test_env_files_skips_missing_and_duplicates(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("X=1\n")
    found = env_files(tmp_path, cwd=tmp_path, config_dir=tmp_path / "none")
    assert [f.path for f in found] == [tmp_path / ".env"] and not found[0].user
    assert env_files(None, cwd=tmp_path / "a", config_dir=tmp_path / "b") == []


def test_llm_provider_from_env_file_is_honoured(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_PROVIDER=gemini\nGEMINI_API_KEY=g\nANTHROPIC_API_KEY=a\n")
    env = llm_environment(tmp_path, cwd=tmp_path, config_dir=tmp_path / "none", base={}).values
    choice = select_provider(None, None, env=env, settings_provider=None)
    assert (choice.provider, choice.source) == ("gemini", "LLM_PROVIDER")
