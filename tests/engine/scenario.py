"""A scripted model for engine tests (a FAKE: it answers by node, never calls a model).

Each test gives a ``decide`` policy; the rest answers like a well-behaved model: a plan,
an authoring step that writes a kernel carrying a FAKE_TIME_MS marker (read by the fake
tuner), a proposal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from cacao_tui.llm import ChatRequest, ScriptedProvider

Decision = dict
Policy = Callable[[str, int], Decision]


def kernel_source(time_ms: float, extra: str = "") -> str:
    """A kernel the FAKE tuner times at ``time_ms``; kernels of different times differ in code too
    (the run tunes a kernel once: comments alone do not make a new one, nodes/fingerprint.py)."""
    return (
        f"// FAKE_TIME_MS: {time_ms}\n{extra}"
        'extern "C" __global__ void k(const float* A, const float* B, float* C) '
        f"{{ C[0] = A[0] * B[0] * {time_ms!r}f; }}\n"
    )


SPEC = "tune_params:\n  P: [1, 2]\nlaunches:\n  - kernel: k\n    grid: {x: 1}\n    block: {x: P}\n"


@dataclass
class Scenario:
    strategies: list[str] = field(default_factory=lambda: ["alpha", "beta"])
    decide: Policy = lambda branch, iteration: {"action": "continue", "reason": "keep going"}
    time_ms: Callable[[str, int], float] = lambda branch, iteration: 2.0 / iteration
    author_script: Callable[[str, int, int], dict | None] | None = None  # (branch, iteration, index) -> response
    fail_nodes: set[tuple[str | None, str]] = field(default_factory=set)  # (branch, node) raising errors
    calls: list[tuple[str | None, int | None, str, int]] = field(default_factory=list)
    _provider: ScriptedProvider | None = field(default=None, repr=False)

    def respond(self, request: ChatRequest) -> object:
        key = request.key
        self.calls.append((key.branch, key.iteration, key.node, key.index))
        if (key.branch, key.node) in self.fail_nodes or (None, key.node) in self.fail_nodes:
            from cacao_tui.llm import LLMError

            raise LLMError(f"scripted failure in {key.node}")
        if key.node == "analyze":
            return "The reference is a naive product; tile it."
        if key.node == "strategize":
            items = [{"name": s, "title": f"Strategy {s}", "description": f"do {s}"} for s in self.strategies]
            return json.dumps({"strategies": items})
        if key.node == "plan":
            return f"plan for {key.branch} #{key.iteration}"
        if key.node == "propose":
            return f"proposal for {key.branch} #{key.iteration}"
        if key.node == "decide":
            return json.dumps(self.decide(key.branch or "", key.iteration or 0))
        if key.node == "author":
            if self.author_script is not None:
                custom = self.author_script(key.branch or "", key.iteration or 0, key.index)
                if custom is not None:
                    return custom
            if key.index == 0:
                t = self.time_ms(key.branch or "", key.iteration or 0)
                # Each branch writes its own code: branches are different strategies.
                source = kernel_source(t, f'#define FAKE_BRANCH "{key.branch}"\n')
                return {
                    "tool_calls": [
                        {
                            "id": "w1",
                            "name": "write_file",
                            "arguments": {"path": "kernels.cu", "content": source},
                        },
                        {"id": "w2", "name": "write_file", "arguments": {"path": "tuning.yaml", "content": SPEC}},
                        {"id": "c1", "name": "check_compilation", "arguments": {}},
                    ]
                }
            return {"tool_calls": [{"id": "e1", "name": "end_step", "arguments": {"summary": "done"}}]}
        raise AssertionError(f"unexpected node {key.node}")

    @property
    def requests(self) -> list[ChatRequest]:
        return self._provider.requests if self._provider is not None else []

    def provider(self) -> ScriptedProvider:
        self._provider = ScriptedProvider(lambda request: self.respond(request))
        return self._provider
