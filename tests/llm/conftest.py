from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from wire_servers import WireServer

# Variables that would steer an SDK or the selection away from what a test sets up.
_PREFIXES = ("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CERIT_", "LLM_")


@pytest.fixture(autouse=True)
def _clean_llm_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    # No user config .env leaks in.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))


@pytest.fixture
def server() -> Iterator[WireServer]:
    srv = WireServer().start()
    try:
        yield srv
    finally:
        srv.stop()
