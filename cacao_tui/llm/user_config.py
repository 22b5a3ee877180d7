"""The user's LLM settings file: ``$XDG_CONFIG_HOME/cacao_tui/llm.toml`` (normally
``~/.config/cacao_tui/llm.toml``). Optional; every key in it is optional::

    reasoning = "medium"        # low | medium | high: every step (--reasoning overrides)
    max_tokens = 16384          # visible output per call (--max-tokens overrides)
    concurrency = 8             # LLM calls in flight (--llm-concurrency overrides)
    budget_tokens = 5000000     # stop new calls after this many tokens (--budget-tokens)

    [steps.decide]              # per step: analyze strategize plan author propose decide
    reasoning = "low"           #           implement configure
    [steps.author]
    reasoning = "high"
    max_tokens = 32000

    [models."openai/qwen3-coder-30b"]   # provider/model: limits, controls and a price
    context_window = 32768
    max_output = 8192
    structured = "prompt"               # native | tool | prompt
    reasoning_control = "none"          # effort | budget | level | none
    input_price = 0.10                  # USD per million tokens
    output_price = 0.40
    cached_input_price = 0.01

A mistake in it is one line naming the file and the key (exit 2). It is read from the
user's own config directory only: a problem directory cannot set prices or limits.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cacao_tui.llm.errors import LLMError, error_location
from cacao_tui.llm.models import Effort, ModelInfo, ReasoningControl, StructuredPath
from cacao_tui.llm.pricing import Price, price_keys
from cacao_tui.settings import user_config_dir
from ktt.capped_read import ReadRefused, describe_read_error, read_bytes_capped

CONFIG_NAME = "llm.toml"
STEPS = ("analyze", "strategize", "plan", "author", "propose", "decide", "implement", "configure")
MAX_CONFIG_BYTES = 1024 * 1024
MAX_PRICE = 1_000_000.0  # USD per million tokens
MAX_TOKENS = 100_000_000  # a context window, an output limit


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepConfig(_Strict):
    reasoning: Effort | None = None
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)


class ModelConfig(_Strict):
    context_window: int | None = Field(default=None, ge=1024, le=MAX_TOKENS)
    max_output: int | None = Field(default=None, gt=0, le=MAX_TOKENS)
    structured: StructuredPath | None = None
    reasoning_control: ReasoningControl | None = None
    reasons: bool | None = None
    # USD per million tokens: finite (an infinite price made every call's cost Infinity, which no
    # record could be read back with) and at most MAX_PRICE.
    input_price: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    output_price: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cached_input_price: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)
    cache_write_price: float | None = Field(default=None, ge=0, le=MAX_PRICE, allow_inf_nan=False)


class LLMConfigFile(_Strict):
    reasoning: Effort | None = None
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)
    concurrency: int | None = Field(default=None, ge=1, le=256)
    budget_tokens: int | None = Field(default=None, gt=0, le=10**15)
    steps: dict[Literal[STEPS], StepConfig] = Field(default_factory=dict)  # type: ignore[valid-type]
    models: dict[str, ModelConfig] = Field(default_factory=dict)


@dataclass(frozen=True)
class LLMSettings:
    """What a run's calls use: the effort and output limit per step, and the user's model
    entries (``provider/model`` keys, lower case)."""

    reasoning: Effort | None = None
    max_tokens: int | None = None
    steps: dict[str, StepConfig] = field(default_factory=dict)
    models: dict[str, ModelConfig] = field(default_factory=dict)
    concurrency: int | None = None
    budget_tokens: int | None = None
    source: Path | None = None

    def reasoning_for(self, node: str) -> Effort | None:
        step = self.steps.get(node)
        return step.reasoning if step is not None and step.reasoning is not None else self.reasoning

    def max_tokens_for(self, node: str) -> int | None:
        step = self.steps.get(node)
        return step.max_tokens if step is not None and step.max_tokens is not None else self.max_tokens

    def with_cli(self, *, reasoning: Effort | None, max_tokens: int | None) -> LLMSettings:
        """Command-line values replace the file's run-wide ones (per-step entries stay)."""
        return replace(
            self,
            reasoning=reasoning if reasoning is not None else self.reasoning,
            max_tokens=max_tokens if max_tokens is not None else self.max_tokens,
        )

    def _entry(self, provider: str, model: str) -> ModelConfig | None:
        exact, undated = price_keys(model)
        for key in (f"{provider}/{exact}", f"{provider}/{undated}"):
            if key in self.models:
                return self.models[key]
        return None

    def model_info(self, provider: str, model: str, base: ModelInfo) -> ModelInfo:
        entry = self._entry(provider, model)
        if entry is None:
            return base
        changes = {
            "context_window": entry.context_window,
            "max_output": entry.max_output,
            "structured": entry.structured,
            "reasoning": entry.reasoning_control,
            "reasons": entry.reasons,
        }
        return replace(base, **{k: v for k, v in changes.items() if v is not None})

    def price(self, provider: str, model: str, base: Price | None) -> Price | None:
        entry = self._entry(provider, model)
        if entry is None or entry.input_price is None or entry.output_price is None:
            return base
        cached = entry.cached_input_price if entry.cached_input_price is not None else entry.input_price
        return Price(entry.input_price, entry.output_price, cached, entry.cache_write_price)


def config_path() -> Path:
    return user_config_dir() / CONFIG_NAME


def load_llm_settings(path: Path | None = None) -> LLMSettings:
    """The settings file, or empty settings when there is none; LLMError (one line naming
    the file and the key) for a file that cannot be used."""
    path = path or config_path()
    try:  # a regular file within the cap, read no further (a 4 GiB file was read whole first)
        raw = read_bytes_capped(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return LLMSettings()
    except OSError as exc:
        if isinstance(exc, ReadRefused) and "larger than" in exc.reason:
            raise LLMError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB; this is not a settings file") from None
        raise LLMError(f"{path}: cannot read it ({describe_read_error(exc)})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise LLMError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise LLMError(f"{path}: not valid TOML: nested too deeply") from None
    try:
        parsed = LLMConfigFile.model_validate(data)
    except RecursionError:
        raise LLMError(f"{path}: nested too deeply for a settings file") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = error_location(err["loc"], "(top level)")
        raise LLMError(f"{path}: {where}: {_explain(err)}") from None
    models = {}
    for key, entry in parsed.models.items():
        if "/" not in key:
            raise LLMError(f'{path}: models."{key}": name it provider/model, e.g. "openai/{key}"')
        provider, _, model = key.partition("/")
        models[f"{provider.strip().lower()}/{price_keys(model)[0]}"] = entry
    return LLMSettings(
        reasoning=parsed.reasoning,
        max_tokens=parsed.max_tokens,
        steps=dict(parsed.steps),
        models=models,
        concurrency=parsed.concurrency,
        budget_tokens=parsed.budget_tokens,
        source=path,
    )


def _explain(err: dict) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    if err["type"] == "literal_error":
        return f"expected {err['ctx']['expected']}"
    return str(err["msg"])
