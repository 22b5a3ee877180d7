"""What an adapter implements: one attempt at one chat call, no retries, no bookkeeping.

Each adapter module (named by its registry entry's ``factory``) has a
``create(choice, setup) -> Provider`` function; ``setup`` carries what the factory
resolved for it (the key, the timeouts, a replay source).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.models import Effort, ModelInfo
from cacao_tui.llm.streamed_reply import ReplyGatherer
from cacao_tui.llm.types import CallKey, ChatResponse, Message, ToolSpec
from cacao_tui.settings import DEFAULTS

if TYPE_CHECKING:
    from cacao_tui.llm.registry import ProviderEntry
    from cacao_tui.llm.selection import ProviderChoice


@dataclass(frozen=True)
class StreamDelta:
    """A piece of a reply as it streams in: answer text, reasoning text, tool-call argument
    characters (counted, not kept)."""

    text: str = ""
    reasoning: str = ""
    tool_chars: int = 0


OnDelta = Callable[[StreamDelta], None]


@dataclass
class ChatRequest:
    """One call as the tracked wrapper hands it to a provider.

    ``json_output`` asks for a bare JSON object (structured output); with ``schema`` (the
    JSON schema of that object, named ``schema_name``) an adapter uses the provider's own
    structured output or a forced tool call where ``info.structured`` says so, and returns
    the object as the reply's text. ``key`` is what replay looks up. ``temperature`` is
    None when the model gets its server default. ``reasoning``: the effort asked for (None:
    the model's default). ``cache_key`` groups calls that share a prefix (OpenAI's
    ``prompt_cache_key``). ``on_delta`` receives the reply as it streams.
    """

    key: CallKey
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    system: str | None = None
    max_tokens: int = 16384
    json_output: bool = False
    temperature: float | None = None
    schema: dict[str, Any] | None = None
    schema_name: str = "answer"
    reasoning: Effort | None = None
    cache_key: str | None = None
    info: ModelInfo = field(default_factory=ModelInfo)
    on_delta: OnDelta | None = field(default=None, repr=False)
    # The reply caps (characters), applied while the reply streams (llm/streamed_reply.py).
    reply_text_cap: int = DEFAULTS.llm_reply_text_chars
    reply_cap: int = DEFAULTS.llm_reply_max_chars

    def gatherer(self) -> ReplyGatherer:
        """What keeps this call's streamed reply within its caps."""
        return ReplyGatherer(text_cap=self.reply_text_cap, cap=self.reply_cap)

    def delta(self, text: str = "", reasoning: str = "", tool_chars: int = 0) -> None:
        """Report a streamed piece (adapters call this; a failing callback never ends the call)."""
        if self.on_delta is not None and (text or reasoning or tool_chars):
            with contextlib.suppress(Exception):
                self.on_delta(StreamDelta(text, reasoning, tool_chars))


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
    (retryable or not) on failure; ``name`` and ``model`` are recorded with every call.
    An adapter may also have ``async count_tokens(request) -> int | None``, the provider's
    token-counting endpoint (the tracked wrapper uses it near the context limit)."""

    name: str
    model: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
