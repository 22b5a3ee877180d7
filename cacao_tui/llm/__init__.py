"""The LLM layer: one interface for chat with tools and structured output, the provider
registry (``registry.PROVIDERS``) with adapters on the official SDKs (anthropic,
openai/cerit, gemini), replay of recorded runs, and a scripted fake for tests. No SDK is
imported until its provider is built.

    env = llm_environment(problem_dir).values  # os.environ plus what the .env files may add
    choice = select_provider(cli_provider, cli_model, env=env)
    llm = create_llm(choice, record_root=output_dir, timeout_s=llm_timeout_s(args.llm_timeout, env), env=env, ...)
    resp = await llm.chat(messages, tools, ctx=CallContext(branch, iteration, "author"))
    plan = await llm.structured(messages, Plan, ctx=CallContext(branch, iteration, "plan"))
"""

from cacao_tui.llm.env import LLMEnvironment, llm_environment
from cacao_tui.llm.errors import BudgetExceeded, CallFailed, LLMError, ProviderError, ReplayMismatch, ReplyUnusable
from cacao_tui.llm.factory import create_llm
from cacao_tui.llm.models import ModelInfo
from cacao_tui.llm.pricing import Price
from cacao_tui.llm.progress import CallProgress
from cacao_tui.llm.provider import ChatRequest, Provider
from cacao_tui.llm.recording import CallRecord, recording_path
from cacao_tui.llm.redaction import redact
from cacao_tui.llm.registry import PROVIDERS, ProviderEntry, price_for
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.scripted import ScriptedProvider
from cacao_tui.llm.selection import ProviderChoice, select_provider
from cacao_tui.llm.timeouts import llm_timeout_s
from cacao_tui.llm.tracked import RetryNotice, TrackedLLM
from cacao_tui.llm.types import CallContext, CallKey, ChatResponse, Message, ToolCall, ToolSpec, Usage
from cacao_tui.llm.usage import UsageSum, UsageTotals
from cacao_tui.llm.user_config import LLMSettings, load_llm_settings

__all__ = [
    "PROVIDERS",
    "BudgetExceeded",
    "CallContext",
    "CallFailed",
    "CallKey",
    "CallProgress",
    "CallRecord",
    "ChatRequest",
    "ChatResponse",
    "LLMEnvironment",
    "LLMError",
    "LLMSettings",
    "Message",
    "ModelInfo",
    "Price",
    "Provider",
    "ProviderChoice",
    "ProviderEntry",
    "ProviderError",
    "ReplayMismatch",
    "ReplyUnusable",
    "RetryNotice",
    "RetryPolicy",
    "ScriptedProvider",
    "ToolCall",
    "ToolSpec",
    "TrackedLLM",
    "Usage",
    "UsageSum",
    "UsageTotals",
    "create_llm",
    "llm_environment",
    "llm_timeout_s",
    "load_llm_settings",
    "price_for",
    "recording_path",
    "redact",
    "select_provider",
]
