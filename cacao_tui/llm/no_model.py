"""The provider of a run's GPU phase (``--phase gpu``): it makes no LLM call and needs no key.

The GPU phase takes only tuning and profiling steps; the engine never asks it for a model's
step. Should anything ask all the same, the call fails at once with one line instead of
reaching a network the GPU node may not have.
"""

from __future__ import annotations

from cacao_tui.llm.errors import ProviderError
from cacao_tui.llm.provider import ChatRequest
from cacao_tui.llm.types import ChatResponse


class NoModel:
    """Answers nothing: ``complete`` raises a non-retryable ProviderError."""

    def __init__(self, name: str, model: str) -> None:
        self.name = name  # the run's own provider and model (recorded, never called)
        self.model = model

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise ProviderError(
            f"the GPU phase (--phase gpu) makes no LLM call ({request.key.node} was asked); "
            "run the model's phase (--phase llm) for it",
            kind="response",
            retryable=False,
        )

    async def aclose(self) -> None:
        return None
