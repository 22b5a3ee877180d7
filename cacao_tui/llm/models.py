"""What cacao knows about a model: its limits and which controls its API takes.

The registry (``registry.py``) holds one ``ModelInfo`` per known model and a default per
provider for the rest; a user's ``llm.toml`` may add or change entries (``user_config``).
The tracked wrapper reads it to size requests (context window, output limit), to choose
the structured-output path and to map ``--reasoning`` onto the provider's control.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Effort = Literal["low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high")

# How a structured (JSON) reply is asked for: the provider's own structured output
# (OpenAI response_format json_schema, Gemini response_json_schema), a forced tool call
# (Anthropic tool_choice), or only the schema in the prompt.
StructuredPath = Literal["native", "tool", "prompt"]

# The reasoning control the API takes: OpenAI ``reasoning_effort``; Anthropic adaptive
# thinking with ``output_config.effort`` ("effort") or a ``thinking`` budget ("budget");
# Gemini ``thinking_config.thinking_level`` ("level") or ``thinking_budget`` ("budget").
ReasoningControl = Literal["effort", "budget", "level", "none"]

# Thinking budgets (Anthropic budget_tokens, Gemini thinking_budget) per effort, and the
# room an output limit gets on top of the visible answer where the limit also bounds the
# reasoning (OpenAI reasoning models' max_completion_tokens, Anthropic max_tokens).
THINKING_BUDGET: dict[Effort, int] = {"low": 2048, "medium": 8192, "high": 24576}
REASONING_ROOM: dict[Effort, int] = {"low": 4096, "medium": 16384, "high": 32768}


@dataclass(frozen=True)
class ModelInfo:
    """One model's limits and controls.

    ``context_window``: prompt and output together, in tokens. ``max_output``: the most
    the API lets one reply generate (reasoning included). ``structured``: how JSON replies
    are asked for. ``reasoning``: the control ``--reasoning`` maps to; ``reasons`` is True
    when the model thinks by default (so its output limit needs room for the reasoning
    even without ``--reasoning``). ``min_cache_tokens``: the shortest prefix its provider
    caches.
    """

    context_window: int = 128_000
    max_output: int = 16_384
    structured: StructuredPath = "prompt"
    reasoning: ReasoningControl = "none"
    reasons: bool = False
    min_cache_tokens: int = 1024

    def output_limit(self, answer_tokens: int, effort: Effort | None) -> int:
        """The output limit to send for a visible answer of ``answer_tokens``: with room
        for the reasoning where the limit also bounds it, within ``max_output``."""
        wanted = answer_tokens
        if self.reasoning != "none" and (effort is not None or self.reasons):
            wanted += REASONING_ROOM[effort or "medium"]
        return max(1, min(wanted, self.max_output))
