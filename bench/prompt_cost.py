"""What the agent's prompts cost, and how much of them a provider could serve from its cache.

The mmul demo session (problems/mmul/session.jsonl) is replayed through the real engine
(``--dry-run``: NVRTC compile checks, no GPU), but every call also goes through the real
SDK adapter of a provider to a loopback server speaking that provider's wire protocol.
The server answers with the session's recorded response and plays the provider's prompt
cache on what it received:

- anthropic: explicit breakpoints (``cache_control``). A request reads the longest prefix,
  ending at one of its breakpoints or up to 20 blocks before one, that an earlier request
  wrote; it writes a cache entry at each of its breakpoints. Only prefixes of at least the
  model's minimum (registry ``min_cache_tokens``) are cached.
- openai, gemini: automatic (implicit) prefix caching. A request reads the longest prefix
  it shares with any earlier request (OpenAI in steps of 128 tokens), from the model's
  minimum length on (1024 tokens; 4096 for gemini-3.1-pro-preview).

Tokens are counted as characters / 4 over the request as sent (tool definitions, system,
messages: the provider's own order); the server puts them in the reply's usage (cache
reads and writes), the adapter reads them back and the tracked wrapper prices them at the
registry's prices, so the "with caching" cost is the product's own. TTLs (5 minutes) are
not modelled: the replay runs faster than a real run.

    python bench/prompt_cost.py [--providers anthropic,openai,gemini] [--json FILE]

Prints, per provider and step: calls, input tokens per call, the share a provider could
serve from its cache, output tokens per call, and the cost per decided iteration with and
without caching; then the authoring loop's cacheable share (issue 20's target: >= 70 %).
Works on any commit of cacao_tui that has the engine and the three adapters (run it from
an export of an older commit with this file and tests/llm/wire_servers.py copied in to
measure that commit).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import inspect
import json
import shutil
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cacao_tui.engine.engine import Engine  # noqa: E402
from cacao_tui.engine.events import EventBus  # noqa: E402
from cacao_tui.ktt_client import KttTuner  # noqa: E402
from cacao_tui.llm import ChatRequest, ChatResponse, ProviderChoice, create_llm  # noqa: E402
from cacao_tui.llm.pricing import Price, cost_usd  # noqa: E402
from cacao_tui.llm.registry import price_for  # noqa: E402
from cacao_tui.llm.replay import ReplayProvider  # noqa: E402
from cacao_tui.llm.types import Usage  # noqa: E402
from cacao_tui.nodes.context import NoDevices, RunDeps  # noqa: E402
from cacao_tui.settings import DEFAULTS  # noqa: E402
from cacao_tui.store.layout import RunLayout  # noqa: E402
from cacao_tui.store.state import GpuInfo, RunSettings  # noqa: E402
from ktt.problem import load_problem  # noqa: E402
from ktt.problem.inputs_hpp import write_inputs_hpp  # noqa: E402
from tests.llm.wire_servers import DIALECTS, Reply, Seen, WireServer  # noqa: E402

CHARS_PER_TOKEN = 4.0
MODELS = {"anthropic": "claude-sonnet-5-5", "openai": "gpt-6.1-sol", "gemini": "gemini-3.1-pro-preview"}
MIN_CACHE = {"anthropic": 1024, "openai": 1024, "gemini": 4096}
LOOKBACK_BLOCKS = 20  # Anthropic looks for an earlier entry this many blocks before a breakpoint
OPENAI_STEP = 128


def tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# -- the request as a provider sees it: blocks in order, breakpoints marked ---------------------


@dataclass
class Prompt:
    blocks: list[str]  # canonical text of each block, in the provider's order
    breakpoints: list[int] = field(default_factory=list)  # block indices carrying cache_control

    def cumulative(self) -> tuple[list[int], list[str]]:
        """Tokens and a hash of the prefix ending at each block."""
        sizes, hashes, total, h = [], [], 0, hashlib.sha256()
        for block in self.blocks:
            total += tokens(block)
            h.update(block.encode())
            sizes.append(total)
            hashes.append(h.copy().hexdigest())
        return sizes, hashes

    @property
    def text(self) -> str:
        return "".join(self.blocks)


def _strip_cache(block: Any) -> tuple[Any, bool]:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}, True
    return block, False


def anthropic_prompt(body: dict[str, Any]) -> Prompt:
    prompt = Prompt([])

    def add(block: Any) -> None:
        clean, marked = _strip_cache(block)
        prompt.blocks.append(_canon(clean))
        if marked:
            prompt.breakpoints.append(len(prompt.blocks) - 1)

    for tool in body.get("tools") or []:
        add(tool)
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or []:
        add(block)
    for turn in body.get("messages") or []:
        content = turn["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add({"role": turn["role"], **block} if isinstance(block, dict) else block)
    return prompt


def openai_prompt(body: dict[str, Any]) -> Prompt:
    blocks = [_canon(t) for t in body.get("tools") or []]
    if body.get("response_format"):
        blocks.append(_canon(body["response_format"]))
    blocks += [_canon(m) for m in body.get("messages") or []]
    return Prompt(blocks)


def gemini_prompt(body: dict[str, Any]) -> Prompt:
    blocks = [_canon(body["systemInstruction"])] if body.get("systemInstruction") else []
    blocks += [_canon(t) for t in body.get("tools") or []]
    blocks += [_canon(c) for c in body.get("contents") or []]
    return Prompt(blocks)


PROMPTS = {"anthropic": anthropic_prompt, "openai": openai_prompt, "gemini": gemini_prompt}


# -- the provider's cache ------------------------------------------------------------------------


def _common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest k with a[:k] == b[:k]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class CacheSim:
    provider: str
    min_tokens: int
    entries: set[str] = field(default_factory=set)  # anthropic: hashes of written prefixes
    seen: list[str] = field(default_factory=list)  # implicit caches: earlier prompts

    def account(self, prompt: Prompt) -> tuple[int, int, int]:
        """(input tokens, cache-read tokens, cache-write tokens) of one request."""
        total = tokens(prompt.text)
        if self.provider == "anthropic":
            sizes, hashes = prompt.cumulative()
            read = 0
            for b in prompt.breakpoints:
                for i in range(b, max(-1, b - LOOKBACK_BLOCKS), -1):
                    if hashes[i] in self.entries:
                        read = max(read, sizes[i])
                        break
            write_to = 0
            for b in prompt.breakpoints:
                if sizes[b] >= self.min_tokens:
                    self.entries.add(hashes[b])
                    write_to = max(write_to, sizes[b])
            return total, read, max(0, write_to - read)
        text = prompt.text
        best = max((_common_prefix(text, old) for old in self.seen), default=0)
        self.seen.append(text)
        shared = tokens(text[:best])
        if shared < self.min_tokens:
            return total, 0, 0
        if self.provider == "openai":
            shared = shared // OPENAI_STEP * OPENAI_STEP
        return total, shared, 0


# -- the loopback model: the session's answer, in the provider's format ------------------------


def _output_tokens(answer: ChatResponse) -> int:
    return max(1, tokens(answer.text) + sum(tokens(json.dumps(c.arguments)) for c in answer.tool_calls))


def render(provider: str, answer: ChatResponse, body: dict[str, Any], usage: tuple[int, int, int]) -> Reply:
    total, read, written = usage
    out = _output_tokens(answer)
    d = DIALECTS[provider]
    if provider == "anthropic":
        content: list[dict[str, Any]] = []
        forced = (body.get("tool_choice") or {}).get("type") == "tool" or any(
            t.get("description", "").startswith("Give your answer") for t in body.get("tools") or []
        )
        if forced and not answer.tool_calls:
            name = (body.get("tool_choice") or {}).get("name") or body["tools"][-1]["name"]
            try:
                value = json.loads(answer.text)
            except ValueError:
                value = {}
            content.append({"type": "tool_use", "id": "toolu_answer", "name": name, "input": value})
            stop = "tool_use"
        else:
            if answer.text:
                content.append({"type": "text", "text": answer.text})
            for n, c in enumerate(answer.tool_calls):
                content.append({"type": "tool_use", "id": c.id or f"toolu_{n}", "name": c.name, "input": c.arguments})
            stop = "tool_use" if answer.tool_calls else "end_turn"
        reply = d._message(content or [{"type": "text", "text": "(empty)"}], stop, (total - read - written, out, read))
        reply.body["usage"]["cache_creation_input_tokens"] = written
        return reply
    if provider == "openai":
        message: dict[str, Any] = {"content": answer.text or None}
        if answer.tool_calls:
            message["tool_calls"] = [d._call(c.id or f"call_{n}", c.name, json.dumps(c.arguments))
                                     for n, c in enumerate(answer.tool_calls)]  # fmt: skip
        return d._completion(message, "tool_calls" if answer.tool_calls else "stop", (total - read, out, read))
    parts: list[dict[str, Any]] = [{"text": answer.text}] if answer.text else []
    for n, c in enumerate(answer.tool_calls):
        parts.append({"functionCall": {"id": c.id or f"fc_{n}", "name": c.name, "args": c.arguments}})
    return d._response(parts or [{"text": "(empty)"}], "STOP", (total - read, out, read))


@dataclass
class CallStats:
    node: str
    input_tokens: int
    cacheable: int
    output_tokens: int


class LoopbackModel:
    """The server's side: per request, the pending answer rendered with the cache's usage."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.cache = CacheSim(provider, MIN_CACHE[provider])
        self.pending: tuple[str, ChatResponse] | None = None
        self.stats: list[CallStats] = []
        self.lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply | None:
        if "count_tokens" in seen.path or ":countTokens" in seen.path:
            count = tokens(PROMPTS[self.provider](seen.body).text)
            return Reply(body={"input_tokens": count} if self.provider == "anthropic" else {"totalTokens": count})
        assert self.pending is not None, "a request without an answer waiting"
        node, answer = self.pending
        usage = self.cache.account(PROMPTS[self.provider](seen.body))
        self.stats.append(CallStats(node, usage[0], usage[1], _output_tokens(answer)))
        return render(self.provider, answer, seen.body, usage)


class Forwarder:
    """The provider the engine talks to: the session's answer for the call's key, sent
    through the real adapter and the loopback server (one call at a time, so the server
    knows which answer is due)."""

    def __init__(self, adapter: Any, replay: ReplayProvider, model: LoopbackModel) -> None:
        self.adapter = adapter
        self.replay = replay
        self.loopback = model
        self.name = adapter.name
        self.model = adapter.model
        self._lock = asyncio.Lock()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        async with self._lock:
            answer = await self.replay.complete(request)
            self.loopback.pending = (request.key.node, answer)
            try:
                return await self.adapter.complete(request)
            finally:
                self.loopback.pending = None

    async def aclose(self) -> None:
        await self.adapter.aclose()


# -- one run ------------------------------------------------------------------------------------


@dataclass
class RunResult:
    provider: str
    stats: list[CallStats]
    usage_by_node: dict[str, Usage]
    price: Price | None
    iterations: int
    seconds: float


async def run_provider(provider: str, workdir: Path) -> RunResult:
    problem_dir = workdir / provider / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem_dir, ignore=shutil.ignore_patterns("output", "archive"))
    server = WireServer().start()
    loopback = LoopbackModel(provider)
    server.responder = loopback
    dialect = DIALECTS[provider]
    choice = ProviderChoice(provider, MODELS[provider], "bench", dialect.key_var, base_url=dialect.base_url(server))
    problem = load_problem(problem_dir)
    layout = RunLayout(problem.directory)
    write_inputs_hpp(problem)
    options: dict[str, Any] = {"record_root": layout.output, "env": {dialect.key_var: "bench-key"}}
    if "cache_scope" in inspect.signature(create_llm).parameters:
        options["cache_scope"] = problem.name
    llm = create_llm(choice, **options)
    llm._provider = Forwarder(llm._provider, ReplayProvider(problem_dir / "session.jsonl"), loopback)
    settings = RunSettings(
        max_iter=DEFAULTS.max_iter,
        max_depth=DEFAULTS.max_depth,
        n_strategies=DEFAULTS.n_strategies,
        dry_run=True,
        provider=provider,
        model=MODELS[provider],
    )
    deps = RunDeps(
        problem=problem,
        layout=layout,
        llm=llm,
        tuner=KttTuner(),
        settings=settings,
        defaults=DEFAULTS,
        gpu=GpuInfo(name=None, arch="sm_90", indices=[0], detected=False),
        devices=NoDevices(),
    )
    started = time.monotonic()
    try:
        finished = await Engine(deps, EventBus(), concurrency=DEFAULTS.concurrency).run()
    finally:
        await llm.aclose()
        server.stop()
    if finished.status not in ("ok", "no_result"):
        raise SystemExit(f"{provider}: the replay did not finish: {finished.status} {finished.message}")
    by_node: dict[str, Usage] = defaultdict(Usage)
    for (_, _, node), s in llm.usage.by_node.items():
        u = by_node[node]
        u.input_tokens += s.input_tokens
        u.output_tokens += s.output_tokens
        u.cached_tokens += s.cached_tokens
        u.cache_write_tokens += s.cache_write_tokens
        u.cost_usd += s.cost_usd
    iterations = sum(
        1
        for name in layout.branch_names()
        for i in layout.branch(name).iteration_indices()
        if (layout.branch(name).iteration(i).state).exists()
    )
    return RunResult(provider, loopback.stats, dict(by_node), llm.price, iterations, time.monotonic() - started)


# -- the table ----------------------------------------------------------------------------------

NODE_ORDER = ("analyze", "strategize", "plan", "author", "propose", "decide")


def summarise(result: RunResult) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = []
    per_node: dict[str, list[CallStats]] = defaultdict(list)
    for s in result.stats:
        per_node[s.node].append(s)
    nodes = [n for n in NODE_ORDER if n in per_node] + sorted(set(per_node) - set(NODE_ORDER))
    total_in = total_cached = 0
    cost_cached_total = cost_plain_total = 0.0
    for node in nodes:
        calls = per_node[node]
        tin = sum(c.input_tokens for c in calls)
        tcache = sum(c.cacheable for c in calls)
        tout = sum(c.output_tokens for c in calls)
        usage = result.usage_by_node.get(node, Usage())
        plain = cost_usd(Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens), result.price)
        rows.append(
            {
                "step": node,
                "calls": len(calls),
                "input_per_call": tin / len(calls),
                "cacheable_share": tcache / tin if tin else 0.0,
                "output_per_call": tout / len(calls),
                "cost_per_iteration_cached": usage.cost_usd / max(1, result.iterations),
                "cost_per_iteration_uncached": plain / max(1, result.iterations),
            }
        )
        total_in += tin
        total_cached += tcache
        cost_cached_total += usage.cost_usd
        cost_plain_total += plain
    author = per_node.get("author", [])
    head = {
        "provider": result.provider,
        "model": MODELS[result.provider],
        "iterations": result.iterations,
        "calls": len(result.stats),
        "input_tokens": total_in,
        "cacheable_share": total_cached / total_in if total_in else 0.0,
        "author_cacheable_share": (sum(c.cacheable for c in author) / sum(c.input_tokens for c in author))
        if author
        else 0.0,
        "cost_per_iteration_cached": cost_cached_total / max(1, result.iterations),
        "cost_per_iteration_uncached": cost_plain_total / max(1, result.iterations),
        "seconds": result.seconds,
    }
    return rows, head


def print_table(rows: list[dict[str, Any]], head: dict[str, Any]) -> None:
    print(f"\n{head['provider']} ({head['model']}): {head['calls']} calls, {head['iterations']} iterations, "
          f"{head['input_tokens']:,} input tokens, replayed in {head['seconds']:.0f} s")  # fmt: skip
    print(f"{'step':<11} {'calls':>5} {'in/call':>9} {'cacheable':>9} {'out/call':>8} {'$/iter cached':>13} "
          f"{'$/iter uncached':>15}")  # fmt: skip
    for r in rows:
        print(f"{r['step']:<11} {r['calls']:>5} {r['input_per_call']:>9,.0f} {r['cacheable_share']:>9.0%} "
              f"{r['output_per_call']:>8,.0f} {r['cost_per_iteration_cached']:>13.4f} "
              f"{r['cost_per_iteration_uncached']:>15.4f}")  # fmt: skip
    print(f"{'all':<11} {head['calls']:>5} {'':>9} {head['cacheable_share']:>9.0%} {'':>8} "
          f"{head['cost_per_iteration_cached']:>13.4f} {head['cost_per_iteration_uncached']:>15.4f}")  # fmt: skip
    print(f"authoring loop: {head['author_cacheable_share']:.1%} of its input tokens in a cacheable prefix")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--providers", default="anthropic,openai,gemini")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = ap.parse_args(argv)
    providers = [p.strip() for p in args.providers.split(",") if p.strip()]
    unknown = [p for p in providers if p not in MODELS]
    if unknown:
        ap.error(f"unknown provider {unknown[0]!r}; choose from {', '.join(MODELS)}")
    report = []
    with tempfile.TemporaryDirectory(prefix="prompt-cost-") as tmp:
        for provider in providers:
            if price_for(provider, MODELS[provider]) is None:
                print(f"note: no registry price for {provider}/{MODELS[provider]}; costs read 0")
            rows, head = summarise(asyncio.run(run_provider(provider, Path(tmp))))
            print_table(rows, head)
            report.append({"summary": head, "steps": rows})
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
