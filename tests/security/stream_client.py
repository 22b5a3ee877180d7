"""One LLM call through a real SDK-backed provider, in a process of its own, and its peak memory.

``python -m tests.security.stream_client PROVIDER BASE_URL TIMEOUT_S`` builds the provider the
way a run does (``build_provider`` + ``TrackedLLM``: the SDK, its HTTP client, the reply caps),
makes one call with a tool on offer, and prints one JSON line: the peak resident memory of this
process (``VmHWM``) and what it was before the call, how long the call took, and what came
back (the reply's size, its record's notes) or the one-line error. Run against
``tests/security/endless_servers.py``, it shows whether the client stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time

from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.factory import build_provider
from cacao_tui.llm.retry import RetryPolicy
from cacao_tui.llm.tracked import TrackedLLM
from cacao_tui.llm.types import CallContext, Message, ToolSpec

MODELS = {"openai": "gpt-6.1-sol", "anthropic": "claude-sonnet-5-5", "gemini": "gemini-3.1-pro-preview"}
KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY"}
WRITE = ToolSpec(name="write_file", description="write a file",
                 parameters={"type": "object", "properties": {"content": {"type": "string"}}})  # fmt: skip


def _peak_mb() -> float:
    """This process's peak resident memory: VmHWM, its own since exec (``ru_maxrss`` keeps the
    peak of the process it was forked from: a pytest that grew to 400 MB would count)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def _call(provider: str, base_url: str, timeout_s: float) -> dict[str, object]:
    choice = ProviderChoice(provider, MODELS[provider], "test", KEYS[provider], base_url=base_url)
    records: list[object] = []
    llm = TrackedLLM(
        build_provider(choice, timeout_s=timeout_s, env={KEYS[provider]: "test-key"}),
        timeout_s=timeout_s,
        call_timeout_s=timeout_s * 1.5,
        retry=RetryPolicy(retries=0),
        on_call=records.append,
    )
    before = _peak_mb()
    started = time.monotonic()
    out: dict[str, object] = {"before_mb": round(before, 1)}
    try:
        reply = await llm.chat([Message(role="user", content="write it")], [WRITE],
                               ctx=CallContext(branch=None, iteration=None, node="author"))  # fmt: skip
        out |= {"ok": True, "text_chars": len(reply.text), "tool_calls": len(reply.tool_calls),
                "tool_error": next((c.error for c in reply.tool_calls if c.error), None),
                "stop": reply.stop_reason}  # fmt: skip
    except LLMError as exc:
        out |= {"ok": False, "error": str(exc)}
    out["seconds"] = round(time.monotonic() - started, 2)
    out["notes"] = [n for r in records for n in getattr(r, "notes", [])]
    out["peak_mb"] = round(_peak_mb(), 1)
    await llm.aclose()
    return out


if __name__ == "__main__":
    result = asyncio.run(_call(sys.argv[1], sys.argv[2], float(sys.argv[3])))
    print(json.dumps(result), flush=True)
