"""The tools of the authoring loop: their schemas for the model and what each one does."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError

from cacao_tui.llm import ToolCall, ToolSpec
from cacao_tui.nodes.briefing import outcome_text
from cacao_tui.nodes.context import BranchView
from cacao_tui.nodes.workspace import Workspace, WorkspaceError
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.state import IterState
from ktt.protocol import ConfigResult


def _spec(name: str, description: str, properties: dict, required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required, "additionalProperties": False},
    )


FILE_PARAM = {
    "type": "string",
    "description": "kernels.cu or tuning.yaml (read_file also takes the other listed files)",
}

AUTHOR_TOOLS = [
    _spec(
        "write_file",
        "Create or replace kernels.cu or tuning.yaml with the full content.",
        {"path": FILE_PARAM, "content": {"type": "string"}},
        ["path", "content"],
    ),
    _spec(
        "edit_file",
        "Replace one exact, unique occurrence of old_text with new_text in kernels.cu or tuning.yaml.",
        {"path": FILE_PARAM, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
        ["path", "old_text", "new_text"],
    ),
    _spec(
        "read_file",
        "Read a file: kernels.cu, tuning.yaml, base/..., iterN/..., reference, inputs.hpp.",
        {"path": FILE_PARAM},
        ["path"],
    ),
    _spec(
        "check_compilation",
        "Check the forbid rules, then compile kernels.cu with NVRTC for a sample of "
        "configurations of tuning.yaml (restrictions applied). Returns errors with line numbers.",
        {},
        [],
    ),
    _spec(
        "end_step",
        "Finish this step. Only accepted when the latest check_compilation passed on the current files.",
        {"summary": {"type": "string", "description": "what you wrote, one paragraph"}},
        ["summary"],
    ),
]

QUERY_TOOLS = [
    _spec(
        "query_tuning",
        "Top configurations and failures by status of an earlier iteration of this branch.",
        {"iteration": {"type": "integer"}, "top": {"type": "integer", "default": 10}},
        ["iteration"],
    ),
    _spec(
        "query_history",
        "Plan, result, proposal and decision of an earlier iteration of this branch.",
        {"iteration": {"type": "integer"}},
        ["iteration"],
    ),
    _spec(
        "query_errors",
        "Errors seen so far in this branch: failed steps, compile errors, failed "
        "configurations by status with their first messages.",
        {},
        [],
    ),
]


def tool_specs(iteration: int) -> list[ToolSpec]:
    return AUTHOR_TOOLS + (QUERY_TOOLS if iteration > 1 else [])


@dataclass
class ToolOutcome:
    content: str
    is_error: bool = False
    ended: bool = False
    summary: str | None = None


@dataclass
class QueryTools:
    """Read-only questions about this branch's own earlier iterations."""

    branch: BranchView
    notes: list[str] = field(default_factory=list)

    def _earlier(self, iteration: int) -> IterState:
        if not (1 <= iteration < self.branch.iteration):
            raise WorkspaceError(f"iteration must be between 1 and {self.branch.iteration - 1}")
        try:
            st = read_model_or_none(self.branch.layout.iteration(iteration).state, IterState)
        except StateFileError as exc:
            raise WorkspaceError(str(exc)) from None
        if st is None:
            raise WorkspaceError(f"iteration {iteration} has no state")
        return st

    def _results(self, iteration: int) -> list[ConfigResult]:
        path = self.branch.layout.iteration(iteration).tune_results
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(ConfigResult.model_validate_json(line))
            except ValidationError:
                continue
        return out

    def tuning(self, iteration: int, top: int = 10) -> str:
        st = self._earlier(iteration)
        results = self._results(iteration)
        if not results:
            return f"iteration {iteration}: {outcome_text(st.run)} (no per-configuration results recorded)"
        ok = sorted((r for r in results if r.status == "ok" and r.time_ms is not None), key=lambda r: r.time_ms or 0)
        lines = [f"iteration {iteration}: {outcome_text(st.run)}", f"top {min(top, len(ok))} configurations:"]
        lines += [f"  {r.time_ms:.4g} ms  {r.config}" for r in ok[: max(1, min(top, 50))]]
        by_status = Counter(r.status for r in results)
        lines.append("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
        return "\n".join(lines)

    def history(self, iteration: int) -> str:
        st = self._earlier(iteration)
        data = {
            "status": st.status,
            "plan": st.plan,
            "result": outcome_text(st.run),
            "profile": (st.profile.roofline, st.profile.headline) if st.profile else None,
            "proposal": st.proposal,
            "decision": st.decision.model_dump() if st.decision else None,
            "error": st.error,
        }
        return json.dumps(data, indent=1, default=str)

    def errors(self) -> str:
        lines: list[str] = []
        for i in self.branch.layout.iteration_indices():
            if i >= self.branch.iteration:
                continue
            st = read_model_or_none(self.branch.layout.iteration(i).state, IterState)
            if st and st.error:
                lines.append(f"iteration {i}: step failed: {st.error}")
            if st and st.author and st.author.compile_failures:
                lines.append(f"iteration {i}: {st.author.compile_failures} failed compile checks while authoring")
            failed = [r for r in self._results(i) if r.status != "ok"]
            for status, count in Counter(r.status for r in failed).items():
                first = next((r for r in failed if r.status == status), None)
                msg = (first.error or (first.validation.reason if first and first.validation else "")) if first else ""
                lines.append(f"iteration {i}: {count} x {status}" + (f" — e.g. {first.config}: {msg}" if msg else ""))
        return "\n".join(lines) if lines else "no errors recorded in this branch"


def argument(call: ToolCall, name: str, kind: type, default: object = None) -> object:
    value = call.arguments.get(name, default)
    if value is None:
        raise WorkspaceError(f"{call.name}: missing argument {name!r}")
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, kind):
        raise WorkspaceError(f"{call.name}: argument {name!r} must be a {kind.__name__}")
    return value


def run_file_tool(call: ToolCall, ws: Workspace, queries: QueryTools) -> ToolOutcome:
    """The tools that need no compiler (check_compilation and end_step are handled by the loop)."""
    try:
        if call.name == "write_file":
            return ToolOutcome(ws.write(str(argument(call, "path", str)), str(argument(call, "content", str))))
        if call.name == "edit_file":
            return ToolOutcome(
                ws.edit(
                    str(argument(call, "path", str)),
                    str(argument(call, "old_text", str)),
                    str(argument(call, "new_text", str)),
                )
            )
        if call.name == "read_file":
            return ToolOutcome(ws.read(str(argument(call, "path", str))))
        if call.name == "query_tuning" and ws.branch.iteration > 1:
            top = argument(call, "top", int, 10)
            return ToolOutcome(queries.tuning(int(argument(call, "iteration", int)), int(top)))  # type: ignore[arg-type]
        if call.name == "query_history" and ws.branch.iteration > 1:
            return ToolOutcome(queries.history(int(argument(call, "iteration", int))))  # type: ignore[arg-type]
        if call.name == "query_errors" and ws.branch.iteration > 1:
            return ToolOutcome(queries.errors())
    except WorkspaceError as exc:
        return ToolOutcome(str(exc), is_error=True)
    names = ", ".join(t.name for t in tool_specs(ws.branch.iteration))
    return ToolOutcome(f"unknown tool {call.name!r}; available: {names}", is_error=True)
