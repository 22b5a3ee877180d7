"""The tools of the authoring loop: their schemas for the model and what each one does."""

from __future__ import annotations

from dataclasses import dataclass

from cacao_tui.llm import ToolCall, ToolSpec
from cacao_tui.nodes.branch_queries import BranchQueries, QueryError
from cacao_tui.nodes.notes import read_notes
from cacao_tui.nodes.target import target_of
from cacao_tui.nodes.workspace import Workspace, WorkspaceError


def _spec(name: str, description: str, properties: dict, required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required, "additionalProperties": False},
    )


FILE_PARAM = {"type": "string", "description": "kernels.cu or tuning.yaml"}  # the task says which may change
INT = {"type": "integer"}
STR = {"type": "string"}

AUTHOR_TOOLS = [
    _spec("write_file", "Create or replace a file with the full content.", {"path": FILE_PARAM, "content": STR},
          ["path", "content"]),
    _spec(
        "edit_file",
        "Replace one exact, unique occurrence of old_text with new_text.",
        {"path": FILE_PARAM, "old_text": STR, "new_text": STR},
        ["path", "old_text", "new_text"],
    ),
    _spec(
        "read_file",
        "Read a file the task's 'read_file reads:' line names.",
        {"path": STR},
        ["path"],
    ),
    _spec("read_notes", "Optimisation notes: no topic lists the topics; a topic returns them.", {"topic": STR}, []),
    _spec(
        "check_compilation",
        "Compile (NVRTC, no GPU) the space's extremes, a random sample and the configs named: every distinct "
        "error once with its line, or each configuration's registers, spills, shared memory, occupancy (and "
        "what limits it) and instruction mix.",
        {
            "configs": {
                "type": "array",
                "description": 'up to 6 configurations, e.g. [{"BX": 64}]',
                "items": {"type": "object", "additionalProperties": {"type": ["integer", "number", "string"]}},
            }
        },
        [],
    ),
    _spec(
        "end_step",
        "Finish this step; accepted once the last check passed on the current files.",
        {"summary": {"type": "string", "description": "what the kernel is now and what changed, one paragraph"}},
        ["summary"],
    ),
]  # fmt: skip

VALIDATE_TOOL = _spec(
    "validate",
    "Run ONE configuration on the GPU for correctness only (no timing), with the tuner's checks: both "
    "input sets, every shape, out-of-bounds writes, races, input mutation. Returns valid, or the wrong "
    "elements. Use it after a passing check, before end_step.",
    {
        "config": {
            "type": "object",
            "description": "tune parameter values; default: the last check's first configuration",
            "additionalProperties": {"type": ["integer", "number", "string"]},
        }
    },
    [],
)

# What earlier iterations and other branches did: one tool, the question in ``what`` (each was a tool of
# its own before; those names are still answered, so recorded sessions replay).
QUERIES = {
    "landscape": "tuning_landscape",
    "grep": "grep_tuner_output",
    "iterations": "list_iterations",
    "iteration": "query_history",
    "errors": "query_errors",
    "branches": "branch_index",
    "branch_log": "branch_log",
    "branch_errors": "branch_errors",
}
HISTORY_TOOL = _spec(
    "history",
    "Earlier iterations and other branches. what: iterations (this branch's, a line each); iteration "
    "(iteration): one in full; errors: its failures; landscape (iteration; mode top|sweep|failures, n, param, "
    "case): a tuning's results; grep (iteration, text): tuner output lines; branches: the others; branch_log, "
    "branch_errors (name): another branch's.",
    {
        "what": {"type": "string", "enum": list(QUERIES)},
        "iteration": INT,
        "mode": {"type": "string", "enum": ["top", "sweep", "failures"]},
        "n": INT,
        "param": STR,
        "case": STR,
        "text": STR,
        "name": STR,
    },
    ["what"],
)


# A dry run tunes nothing: no landscape and no tuner output to ask about.
UNTUNED = ("iterations", "iteration", "errors", "branches", "branch_log", "branch_errors")
HISTORY_TOOL_UNTUNED = _spec(
    "history",
    "Earlier iterations and other branches. what: iterations (this branch's, a line each); iteration "
    "(iteration): one in full; errors: its failures; branches: the others; branch_log, branch_errors (name): "
    "another branch's.",
    {"what": {"type": "string", "enum": list(UNTUNED)}, "iteration": INT, "name": STR},
    ["what"],
)


def tool_specs(can_validate: bool = False, tuned: bool = True) -> list[ToolSpec]:
    """Every tool, in every authoring step: the tool list is part of the prompt prefix a
    provider caches (it comes before the system prompt), so it must not change between the
    steps of a run. validate is offered when a GPU is used, the tuning queries when the run
    tunes (run-wide settings both). A query with nothing to report yet says so; the task names
    the tools that can answer now."""
    tools = AUTHOR_TOOLS[:5] + ([VALIDATE_TOOL] if can_validate else []) + AUTHOR_TOOLS[5:]
    return [*tools, HISTORY_TOOL if tuned else HISTORY_TOOL_UNTUNED]


@dataclass
class ToolOutcome:
    content: str
    is_error: bool = False
    ended: bool = False
    summary: str | None = None


def argument(call: ToolCall, name: str, kind: type, default: object = None) -> object:
    value = call.arguments.get(name, default)
    if value is None:
        raise WorkspaceError(f"{call.name}: missing argument {name!r}")
    if kind is int and isinstance(value, str) and len(value) <= 18 and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise WorkspaceError(f"{call.name}: argument {name!r} must be a {kind.__name__}")
    return value


def run_file_tool(call: ToolCall, ws: Workspace, queries: BranchQueries, names: set[str]) -> ToolOutcome:
    """The tools that need no compiler (check_compilation and end_step are handled by the loop).

    ``names`` are the tools offered in this step; a call to any other is answered with the list.
    """
    try:
        name = call.name
        if name == "history" and "history" in names:
            what = call.arguments.get("what")
            if what not in QUERIES:
                raise WorkspaceError(f"history: what must be one of {', '.join(QUERIES)}")
            name = QUERIES[str(what)]
        elif name in QUERIES.values() and "history" in names:
            pass  # an earlier tool name: answered as before
        elif name not in names:
            raise WorkspaceError(f"unknown tool {call.name[:60]!r}; available: {', '.join(sorted(names))}")
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
        if call.name == "read_notes":
            text, bad = read_notes(_optional_str(call, "topic"), target_of(ws.deps).arch, ws.notes_shown)
            return ToolOutcome(text, is_error=bad)
        if name == "tuning_landscape":
            return ToolOutcome(
                queries.tuning_landscape(
                    int(argument(call, "iteration", int)),  # type: ignore[arg-type]
                    str(argument(call, "mode", str, "top")),
                    n=int(argument(call, "n", int, 10)),  # type: ignore[arg-type]
                    param=_optional_str(call, "param"),
                    case=_optional_str(call, "case"),
                )
            )
        if name == "grep_tuner_output":
            return ToolOutcome(
                queries.grep_tuner_output(int(argument(call, "iteration", int)), str(argument(call, "text", str)))  # type: ignore[arg-type]
            )
        if name == "list_iterations":
            return ToolOutcome(queries.list_iterations())
        if name == "query_history":
            return ToolOutcome(queries.history(int(argument(call, "iteration", int))))  # type: ignore[arg-type]
        if name == "query_errors":
            return ToolOutcome(queries.errors())
        if name == "branch_index":
            return ToolOutcome(queries.branch_index())
        if name == "branch_log":
            return ToolOutcome(queries.branch_log(str(argument(call, "name", str))))
        if name == "branch_errors":
            return ToolOutcome(queries.branch_errors(str(argument(call, "name", str))))
    except (WorkspaceError, QueryError) as exc:
        return ToolOutcome(str(exc), is_error=True)
    return ToolOutcome(f"{call.name} is not handled here", is_error=True)


def _optional_str(call: ToolCall, name: str) -> str | None:
    value = call.arguments.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise WorkspaceError(f"{call.name}: argument {name!r} must be a string")
    return value
