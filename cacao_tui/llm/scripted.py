"""A TEST FAKE: a provider that answers from a script instead of a model.

Use it in tests of the engine and the nodes::

    llm = TrackedLLM(ScriptedProvider(["first answer", {"tool_calls": [...]}]))
    llm = TrackedLLM(ScriptedProvider(lambda request: ChatResponse(text="ok")))

A script item is a ChatResponse, a dict of ChatResponse fields (``stop_reason``
defaults to ``tool_use`` when there are tool calls), a string (the reply's text), or an
exception instance, which is raised (a ``ProviderError(..., retryable=True)`` exercises
the retries). A function gets the ``ChatRequest`` and returns one such item (it may be
async). Every request is kept in ``requests``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Union

from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.provider import ChatRequest
from cacao_tui.llm.types import ChatResponse

ScriptItem = Union[ChatResponse, dict[str, Any], str, BaseException]  # noqa: UP007
ScriptFunction = Callable[[ChatRequest], Union[ScriptItem, Awaitable[ScriptItem]]]  # noqa: UP007


def as_response(item: ScriptItem) -> ChatResponse:
    if isinstance(item, BaseException):
        raise item
    if isinstance(item, ChatResponse):
        return item.model_copy(deep=True)
    if isinstance(item, str):
        return ChatResponse(text=item)
    if isinstance(item, dict):
        data = dict(item)
        data.setdefault("stop_reason", "tool_use" if data.get("tool_calls") else "end")
        return ChatResponse.model_validate(data)
    raise TypeError(f"ScriptedProvider: cannot answer with {type(item).__name__}")


class ScriptedProvider:
    """Test fake provider: replies from a list or a function; never talks to a server."""

    def __init__(
        self,
        script: Iterable[ScriptItem] | ScriptFunction,
        *,
        model: str = "scripted",
        name: str = "scripted",
    ) -> None:
        self.name = name
        self.model = model
        self.requests: list[ChatRequest] = []
        self._function: ScriptFunction | None = script if callable(script) else None
        self._items: list[ScriptItem] = [] if callable(script) else list(script)
        self._next = 0

    @classmethod
    def from_file(cls, path: Path, **kwargs: Any) -> ScriptedProvider:
        """One response per line: a JSON object of ChatResponse fields, or a JSON string."""
        items: list[ScriptItem] = []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                items.append(json.loads(line))
        return cls(items, **kwargs)

    @property
    def remaining(self) -> int:
        return len(self._items) - self._next

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        if self._function is not None:
            item = self._function(request)
            if inspect.isawaitable(item):
                item = await item
            return as_response(item)  # type: ignore[arg-type]
        if self._next >= len(self._items):
            raise LLMError(f"ScriptedProvider: script exhausted after {len(self._items)} responses ({request.key})")
        item = self._items[self._next]
        self._next += 1
        return as_response(item)

    async def aclose(self) -> None:
        return None
