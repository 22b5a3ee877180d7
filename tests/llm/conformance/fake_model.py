"""A FAKE model behind the loopback wire servers: it plays a short, competent run of the mmul
problem, with the habits of real models injected where a scenario says.

It reads each request as the provider's server would (OpenAI Chat Completions, Anthropic
Messages, Gemini generateContent, CERIT = OpenAI), works out which step asked (from the
prompt's own words and the tools offered), and answers as a well-behaved model would:
an analysis, one strategy, a plan, an authoring step that writes the demo's naive kernel
and its tuning space, checks and ends, a proposal, a decision to continue. A ``Habit``
replaces the answer of the n-th call of one step with what real models do instead: think
blocks, fences, trailing text, truncation, refusals, schema violations, a 400 for context
length, a 429 with Retry-After 3600, a tool loop that repeats itself, a stalled stream,
reasoning_content only.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.llm.wire_servers import DIALECTS, Reply, Seen

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "problems" / "mmul" / "demo"
KERNEL = (DEMO / "1_naive.cu").read_text(encoding="utf-8")
SPEC = (DEMO / "1_naive.yaml").read_text(encoding="utf-8")

STRATEGIES = {
    "strategies": [
        {"name": "tiling", "title": "Block the product", "description": "One thread per output, then tile it."}
    ]
}
DECISION = {"action": "continue", "reason": "the kernel compiles and runs; tune it further", "feedback": "tile it"}


@dataclass
class Answer:
    """What the model says: text, tool calls (name, arguments), reasoning, how it stopped."""

    text: str = ""
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    reasoning: str = ""
    truncated: bool = False
    refusal: bool = False  # a provider-level refusal (OpenAI refusal field, Anthropic stop, Gemini SAFETY)


@dataclass
class Request:
    """A wire request, read back: which step, what it asked, how far its conversation is."""

    step: str
    text: str
    tools: list[str]
    turns: int  # assistant turns so far in the conversation
    structured: bool
    forced_tool: str | None  # Anthropic: the answer tool it forces
    stream: bool
    size: int = 0  # characters of the request body


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    if isinstance(value, dict):
        out = []
        for key in ("text", "content"):
            if key in value:
                out += _texts(value[key])
        for part in value.get("parts", []) if isinstance(value.get("parts"), list) else []:
            out += _texts(part)
        return out
    return []


def read_request(provider: str, seen: Seen) -> Request:
    body = seen.body if isinstance(seen.body, dict) else {}
    if provider == "gemini":
        contents = body.get("contents", [])
        text = " ".join(_texts(body.get("systemInstruction")) + _texts(contents))
        tools = [f["name"] for t in body.get("tools", []) for f in t.get("functionDeclarations", [])]
        turns = sum(1 for c in contents if c.get("role") == "model")
        config = body.get("generationConfig", {})
        structured = config.get("responseMimeType") == "application/json"
        forced = None
    elif provider == "anthropic":
        messages = body.get("messages", [])
        text = " ".join(_texts(body.get("system")) + _texts(messages))
        tools = [t["name"] for t in body.get("tools", [])]
        turns = sum(1 for m in messages if m["role"] == "assistant")
        choice = body.get("tool_choice") or {}
        forced = choice.get("name") if choice.get("type") == "tool" else None
        answer_tools = [t["name"] for t in body.get("tools", []) if t.get("description", "").startswith("Give your")]
        structured = bool(answer_tools) or "JSON schema" in text
        forced = forced or (answer_tools[0] if answer_tools else None)
        tools = [t for t in tools if t not in answer_tools]
    else:
        messages = body.get("messages", [])
        text = " ".join(_texts(messages))
        tools = [t["function"]["name"] for t in body.get("tools", [])]
        turns = sum(1 for m in messages if m["role"] == "assistant")
        structured = "response_format" in body or "JSON schema" in text
        forced = None
    if "write_file" in tools:
        step = "author"
    elif structured and ('"strategies"' in text or "optimisation strategies" in text):
        step = "strategize"  # the schema may travel as the response format only (issue 28): the prompt says it
    elif structured:
        step = "decide"
    elif "Analyse this problem" in text:
        step = "analyze"
    elif "single most valuable next change" in text:  # measured or dry run, propose asks for one change
        step = "propose"
    elif "Keep it under 300 words" in text:
        step = "plan"
    else:
        step = "other"
    stream = ":streamGenerateContent" in seen.path or body.get("stream") is True
    return Request(step, text, tools, turns, structured, forced, stream, len(json.dumps(body)))


def good_answer(req: Request) -> Answer:
    if req.step == "analyze":
        return Answer("The reference computes one output per thread from global memory; it is memory bound.")
    if req.step == "strategize":
        return Answer(json.dumps(STRATEGIES))
    if req.step == "plan":
        return Answer("Start from one thread per output with a tunable block shape, then tile in shared memory.")
    if req.step == "propose":
        return Answer("Tile A and B through shared memory so each value is read once per tile.")
    if req.step == "decide":
        return Answer(json.dumps(DECISION))
    if req.step == "author":
        if req.turns == 0:
            return Answer(
                "Writing the kernel and its tuning space.",
                [
                    ("write_file", {"path": "kernels.cu", "content": KERNEL}),
                    ("write_file", {"path": "tuning.yaml", "content": SPEC}),
                    ("check_compilation", {}),
                ],
            )
        return Answer(tools=[("end_step", {"summary": "one thread per output, block shape tuned"})])
    return Answer("ok")


Behaviour = Callable[[Request, Answer], "Answer | Reply"]


@dataclass
class Habit:
    """On the ``nth`` (0-based, counted per step) call of ``step``: ``behave`` answers
    instead (from the good answer). ``times`` calls in a row get it."""

    step: str
    behave: Behaviour
    nth: int = 0
    times: int = 1


def usage_of(req: Request, answer: Answer) -> tuple[int, int, int]:
    """Tokens as a server would count them: about four characters each."""
    out = len(answer.text) + len(answer.reasoning) + sum(len(json.dumps(a)) for _, a in answer.tools)
    return max(1, req.size // 4), max(1, out // 4), 0


def render(provider: str, req: Request, answer: Answer, call_no: int) -> Reply:
    d = DIALECTS[provider]
    usage = usage_of(req, answer)
    if provider == "anthropic":
        content: list[dict[str, Any]] = []
        if answer.reasoning:
            content.append({"type": "thinking", "thinking": answer.reasoning, "signature": "c2ln"})
        if req.forced_tool and not answer.tools and not answer.refusal and answer.text.lstrip().startswith("{"):
            try:
                value = json.loads(answer.text)
            except ValueError:
                value = None
            if isinstance(value, dict):  # a forced tool: the answer is its input
                content.append({"type": "tool_use", "id": f"toolu_{call_no}", "name": req.forced_tool, "input": value})
                return d._message(content, "max_tokens" if answer.truncated else "tool_use", usage)
        if answer.text:
            content.append({"type": "text", "text": answer.text})
        for n, (name, args) in enumerate(answer.tools):
            content.append({"type": "tool_use", "id": f"toolu_{call_no}_{n}", "name": name, "input": args})
        if answer.refusal:
            stop = "refusal"
        elif answer.truncated:
            stop = "max_tokens"
        else:
            stop = "tool_use" if answer.tools else "end_turn"
        return d._message(content or [{"type": "text", "text": ""}], stop, usage)
    if provider in ("openai", "cerit"):
        message: dict[str, Any] = {"content": answer.text or None}
        if answer.reasoning:
            message["reasoning_content"] = answer.reasoning
        if answer.refusal:
            message = {"content": None, "refusal": answer.text}
        if answer.tools:
            message["tool_calls"] = [
                d._call(f"call_{call_no}_{n}", name, json.dumps(args)) for n, (name, args) in enumerate(answer.tools)
            ]
        finish = "length" if answer.truncated else ("tool_calls" if answer.tools else "stop")
        if answer.refusal:
            finish = "stop"
        return d._completion(message, finish, usage)
    parts: list[dict[str, Any]] = []
    if answer.reasoning:
        parts.append({"text": answer.reasoning, "thought": True})
    if answer.text and not answer.refusal:
        parts.append({"text": answer.text})
    for n, (name, args) in enumerate(answer.tools):
        parts.append(
            {"functionCall": {"id": f"fc_{call_no}_{n}", "name": name, "args": args}, "thoughtSignature": "c2ln"}
        )
    finish = "SAFETY" if answer.refusal else ("MAX_TOKENS" if answer.truncated else "STOP")
    return d._response(parts or None, finish, usage)


class FakeModel:
    """The responder of a WireServer: answers every request of a run, with the habits."""

    def __init__(self, provider: str, habits: list[Habit] | None = None) -> None:
        self.provider = provider
        self.habits = habits or []
        self.counts: Counter[str] = Counter()
        self.seen: list[Request] = []
        self.played: list[tuple[str, int]] = []  # (step, nth) of every habit played
        self._lock = threading.Lock()

    def __call__(self, seen: Seen) -> Reply:
        if "count_tokens" in seen.path or ":countTokens" in seen.path:
            size = len(json.dumps(seen.body)) // 4
            return Reply(body={"input_tokens": size} if self.provider == "anthropic" else {"totalTokens": size})
        req = read_request(self.provider, seen)
        with self._lock:
            nth = self.counts[req.step]
            self.counts[req.step] += 1
            self.seen.append(req)
        answer: Answer | Reply = good_answer(req)
        for habit in self.habits:
            if habit.step == req.step and habit.nth <= nth < habit.nth + habit.times:
                answer = habit.behave(req, answer)  # type: ignore[arg-type]
                self.played.append((req.step, nth))
                break
        if isinstance(answer, Reply):
            return answer
        return render(self.provider, req, answer, len(self.seen))
