"""What an adapter implements: one attempt at one chat call, no retries, no bookkeeping.

Each adapter module (named by its registry entry's ``factory``) has a
``create(choice, setup) -> Provider`` function; ``setup`` carries what the factory
resolved for it (the key, the timeouts, a replay source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.types import CallKey, ChatResponse, Message, ToolSpec

if TYPE_CHECKING:
    from cacao_tui.llm.registry import ProviderEntry
    from cacao_tui.llm.selection import ProviderChoice


@dataclass
class ChatRequest:
    """One call as the tracked wrapper hands it to a provider.

    ``json_output`` asks for a bare JSON object (structured output); adapters may pass a
    JSON mode to the server where that is safe. ``key`` is what replay looks up.
    ``temperature`` is None when the model gets its server default.
    """

    key: CallKey
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    system: str | None = None
    max_tokens: int = 16384
    json_output: bool = False
    temperature: float | None = None


@dataclass(frozen=True)
class AdapterSetup:
    """What ``create`` gets besides the choice: ``timeout_s`` bounds one attempt (the
    whole reply), ``connect_timeout_s`` its connection."""

    entry: ProviderEntry
    api_key: str | None
    timeout_s: float
    connect_timeout_s: float
    replay_from: Path | None = None

    def require_key(self, choice: ProviderChoice) -> str | None:
        """The key, or LLMError naming the variable; None only where the entry allows a
        keyless custom endpoint."""
        if self.api_key:
            return self.api_key
        if self.entry.key_optional_with_base and choice.base_url:
            return None
        names = " or ".join(self.entry.key_vars) or "an API key"
        raise LLMError(f"{self.entry.name} needs {names}; set it in the environment or a .env file")


class Provider(Protocol):
    """An LLM backend. ``complete`` makes a single attempt and raises ``ProviderError``
    (retryable or not) on failure; ``name`` and ``model`` are recorded with every call."""

    name: str
    model: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
