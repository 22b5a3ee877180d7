"""The values that cross the LLM boundary: messages, tools, responses, token usage.

They are pydantic models because every call is recorded as JSON and replayed from it;
``CallContext`` and ``CallKey`` are plain dataclasses used only inside the process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ktt.checked_numbers import Count, Usd

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["end", "tool_use", "max_tokens", "other"]


class ToolCall(BaseModel):
    """A tool call the model asked for.

    ``error`` is set when the call cannot be executed as sent (arguments that are not a
    JSON object, output cut off by the token limit); the caller returns it to the model
    as a tool error instead of running the tool.
    """

    model_config = ConfigDict(extra="ignore")
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None


class Message(BaseModel):
    """One turn of a conversation.

    Tool results are ``Message(role="tool", tool_call_id=..., content=...)``; set
    ``is_error`` when the content reports a failure. ``provider_data`` carries what a
    provider needs back verbatim on the next turn (Anthropic thinking blocks, Gemini
    thought signatures); build assistant turns with ``ChatResponse.to_message()`` so it
    is kept.
    """

    model_config = ConfigDict(extra="ignore")
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    is_error: bool = False
    provider_data: dict[str, Any] | None = None
    cache_prefix: bool = False

    @model_validator(mode="after")
    def _check_role_fields(self) -> Message:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        return self


class ToolSpec(BaseModel):
    """A tool offered to the model; ``parameters`` is a JSON schema of an object."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(BaseModel):
    """Tokens of one call. ``input_tokens`` counts every prompt token, cached ones included;
    ``cached_tokens`` and ``cache_write_tokens`` are the parts of it read from / written to
    the provider's prompt cache. ``output_tokens`` counts every generated token, reasoning
    included; ``reasoning_tokens`` is the part of it the model spent thinking (billed as
    output)."""

    model_config = ConfigDict(extra="ignore")
    # Never negative, never past 10^12 (ktt/checked_numbers.py): a count from an endpoint or a
    # record on disk can only make a budget run out sooner. One call's counts are bounded
    # tighter where the tracked wrapper takes them (usage.call_usage).
    input_tokens: Count = 0
    output_tokens: Count = 0
    cached_tokens: Count = 0
    cache_write_tokens: Count = 0
    reasoning_tokens: Count = 0
    cost_usd: Usd = 0.0


class ChatResponse(BaseModel):
    """What one chat call returned.

    ``stop_reason``: ``end`` (the model finished), ``tool_use`` (it wants the tool calls
    run), ``max_tokens`` (output cut off at the token limit: ``text`` is partial and a
    tool call that may be incomplete carries ``error``), ``other`` (refusal, safety stop,
    anything else; ``raw_stop_reason`` says which). ``reasoning`` is the thinking text the
    provider returned (Anthropic thinking, Gemini thought summaries, ``reasoning_content``
    of vLLM/DeepSeek-style servers); it is recorded and shown, never sent back as text.
    """

    model_config = ConfigDict(extra="ignore")
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: StopReason = "end"
    raw_stop_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    latency_s: float = 0.0
    provider_data: dict[str, Any] | None = None
    reasoning: str = ""
    cut: str | None = None  # what cacao cut while the reply streamed (llm/streamed_reply.py), for the record

    def to_message(self) -> Message:
        """The assistant turn to append to the conversation before sending tool results."""
        return Message(
            role="assistant",
            content=self.text,
            tool_calls=[tc.model_copy() for tc in self.tool_calls],
            provider_data=self.provider_data,
        )


@dataclass(frozen=True)
class CallContext:
    """Who makes a call: ``branch`` and ``iteration`` are None for the master's calls."""

    branch: str | None
    iteration: int | None
    node: str


@dataclass(frozen=True, order=True)
class CallKey:
    """The record/replay key of one call; ``index`` counts calls per (branch, iteration, node)."""

    branch: str | None
    iteration: int | None
    node: str
    index: int

    def __str__(self) -> str:
        where = f"branch {self.branch}" if self.branch is not None else "master"
        if self.iteration is not None:
            where += f", iteration {self.iteration}"
        return f"{where}, node {self.node}, call {self.index}"

    def sort_key(self) -> tuple[str, int, str, int]:
        return (self.branch or "", -1 if self.iteration is None else self.iteration, self.node, self.index)
