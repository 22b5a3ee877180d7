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
        header = {"format": SESSION_FORMAT, "version": SESSION_VERSION, "problem": self.problem, "note": self.note}
        body = [json.dumps({k: v for k, v in line.items() if v is not None}, ensure_ascii=False) for line in lines]
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
