"""What an adapter implements: one attempt at one chat call, no retries, no bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from cacao_tui.llm.types import CallKey, ChatResponse, Message, ToolSpec


@dataclass
class ChatRequest:
    """One call as the tracked wrapper hands it to a provider.

    ``json_output`` asks for a bare JSON object (structured output); adapters may pass a
    JSON mode to the server where that is safe. ``key`` is what replay looks up.
    """

    key: CallKey
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    system: str | None = None
    max_tokens: int = 16384
    json_output: bool = False


class Provider(Protocol):
    """An LLM backend. ``complete`` makes a single attempt and raises ``ProviderError``
    (retryable or not) on failure; ``name`` and ``model`` are recorded with every call."""

    name: str
    model: str

    async def complete(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
