"""Building the hand-written demo sessions the shipped problems carry (``problems/*/demo/build_session.py``).

Each problem's script lists its calls with these helpers and ends with ``DemoSession.main``:
it writes ``problems/<name>/session.jsonl`` (the session file format of
``cacao_tui.llm.session_file``), or with ``--check`` says whether the file is up to date.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.llm.session_file import SESSION_FORMAT, SESSION_VERSION


def text(branch: str | None, iteration: int | None, node: str, body: str) -> dict:
    """A call answered with plain text."""
    return {"branch": branch, "iteration": iteration, "node": node, "response": {"text": body.strip()}}


def structured(branch: str | None, iteration: int | None, node: str, value: dict) -> dict:
    """A call answered with a JSON object (analysis, strategies, decisions)."""
    return {"branch": branch, "iteration": iteration, "node": node, "response": {"text": json.dumps(value)}}


def tools(branch: str, iteration: int, node: str, calls: list[tuple[str, dict]], note: str = "") -> dict:
    """A call answered with tool calls, in order."""
    return {
        "branch": branch, "iteration": iteration, "node": node,
        "response": {"text": note, "tool_calls": [{"name": n, "arguments": a} for n, a in calls]},
    }  # fmt: skip


def decision(
    branch: str, iteration: int, action: str, reason: str, summary: str = "", *, feedback: str = "",
    subs: list[dict] | None = None, skip_implement: bool = False, error: dict | None = None,
) -> dict:  # fmt: skip
    """The decide node's answer."""
    value: dict = {"action": action, "reason": reason, "feedback": feedback, "iteration_summary": summary,
                   "skip_implement": skip_implement, "sub_strategies": subs or []}  # fmt: skip
    if error is not None:
        value["error_analysis"] = error
    return structured(branch, iteration, "decide", value)


# The demo's usage: illustrative figures, so a replay shows what tokens and cost look like.
# A call's size is what a model's would be for the same texts (about 4 characters a token);
# each step's prompt is the size the engine's prompts have (the briefing, the kernel, the
# tuner's results), growing over a branch's iterations and over an authoring step's turns,
# where the earlier turns are read from the prompt cache. Costed as this model's list price.
ILLUSTRATIVE_PRICE = "anthropic:claude-sonnet-4-5"
ILLUSTRATIVE_NOTE = ("illustrative (estimated for each call, costed at the list price of "
                     f"{ILLUSTRATIVE_PRICE}); a replay spends nothing")  # fmt: skip
_PROMPT_TOKENS = {"analyze": 3_800, "strategize": 5_200, "plan": 6_400, "author": 8_200, "propose": 6_900,
                  "decide": 7_600}  # fmt: skip


def illustrative_usage(line: dict, turn: int) -> dict:
    """Tokens for one call of the demo: ``turn`` is the call's number within its step."""
    response = line.get("response") or {}
    written = len(response.get("text", "")) + len(json.dumps(response.get("tool_calls") or []))
    output = 60 + written // 4
    iteration = line.get("iteration") or 1
    prompt = _PROMPT_TOKENS.get(line["node"], 5_000) + 450 * (iteration - 1) + 1_700 * turn
    cached = prompt - 1_700 if turn else (2_400 if iteration > 1 else 0)
    return {"input_tokens": prompt, "output_tokens": output, "cached_tokens": cached}


@dataclass(frozen=True)
class DemoSession:
    """One problem's demo: its kernels and specs live in ``demo_dir``, the session beside it."""

    problem: str
    demo_dir: Path
    note: str = "hand-written demo session (see demo/build_session.py); not model output"  # the header's

    @property
    def session(self) -> Path:
        return self.demo_dir.parent / "session.jsonl"

    def src(self, name: str) -> str:
        return (self.demo_dir / name).read_text(encoding="utf-8")

    def authoring(self, branch: str, iteration: int, kernel: str, spec: str, summary: str,
                  before: list[tuple[str, dict]] | None = None, spec_text: str | None = None,
                  kernel_write: bool = True) -> list[dict]:  # fmt: skip
        """Write the files, check, end_step: the two calls of a clean authoring step."""
        writes = [("write_file", {"path": "kernels.cu", "content": self.src(kernel)})] if kernel_write else []
        calls = (before or []) + writes + [
            ("write_file", {"path": "tuning.yaml", "content": spec_text if spec_text is not None else self.src(spec)}),
            ("check_compilation", {}),
        ]
        return [
            tools(branch, iteration, "author", calls, "Writing the kernel and its tuning space, then checking."),
            tools(branch, iteration, "author", [("end_step", {"summary": summary})]),
        ]

    def polish(self, branches: list[str]) -> list[dict]:
        """The polish iteration's answer for each branch that may hold the run's best (only the
        best one's is used, and only in a run that tunes): the demo leaves the kernel as it is."""
        return [
            dict(
                tools(f"{b}.polish", 1, "author", [("end_step", {"summary": "Nothing to polish in this demo: "
                      "the kernel and its tuning space stay as they are."})]),
                comment="used only when this branch holds the run's best and the iteration pool has some left",
            )
            for b in branches
        ]  # fmt: skip

    def render(self, lines: list[dict]) -> str:
        header = {"format": SESSION_FORMAT, "version": SESSION_VERSION, "problem": self.problem, "note": self.note,
                  "usage": ILLUSTRATIVE_NOTE, "priced_as": ILLUSTRATIVE_PRICE}  # fmt: skip
        turns: dict[tuple[object, ...], int] = {}
        body = []
        for line in lines:
            if isinstance(line.get("response"), dict) and "usage" not in line["response"]:
                step = (line.get("branch"), line.get("iteration"), line["node"])
                turn = turns[step] = turns.get(step, -1) + 1
                line = {**line, "response": {**line["response"], "usage": illustrative_usage(line, turn)}}
            body.append(json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False))
        return "\n".join([json.dumps(header), *body]) + "\n"

    def main(self, build: Callable[[], list[dict]], argv: list[str] | None = None) -> int:
        """Write the session, or with ``--check`` exit 1 when the file differs from what ``build`` gives."""
        out = self.render(build())
        if "--check" in (sys.argv[1:] if argv is None else argv):
            current = self.session.read_text(encoding="utf-8") if self.session.exists() else ""
            if current != out:
                script = self.demo_dir / "build_session.py"
                print(f"{self.session} is out of date; run python {script}", file=sys.stderr)
                return 1
            return 0
        self.session.write_text(out, encoding="utf-8")
        print(f"wrote {self.session} ({out.count(chr(10)) - 1} calls)")
        return 0
