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
        "Read a file: kernels.cu, tuning.yaml, base/... (the starting files), best/..., iterN/..., "
        "reference, inputs.hpp.",
        {"path": FILE_PARAM},
        ["path"],
    ),
    _spec(
        "read_notes",
        "Optimisation notes this prompt does not carry: without a topic, the list of topics; with one, "
        "its notes (memory, compute, reductions, multipass, tensor_cores, hopper_tma).",
        {"topic": {"type": "string", "description": "a topic from the list; empty for the list"}},
        [],
    ),
    _spec(
        "check_compilation",
        "Check the forbid rules, then compile kernels.cu with NVRTC (no GPU) for the extremes of "
        "tuning.yaml's space, a random sample and the configs you name. Returns each distinct error "
        "once with its kernels.cu line, or per configuration registers, spills, shared memory, "
        "occupancy and the instruction mix (FFMA, MUFU, loads, barriers, tensor ops).",
        {
            "configs": {
                "type": "array",
                "description": 'optional: up to 6 configurations to check as well, e.g. [{"BX": 64, "TILE": 8}]',
                "items": {"type": "object", "additionalProperties": {"type": ["integer", "number", "string"]}},
            }
        },
        [],
    ),
    _spec(
        "end_step",
        "Finish this step. Only accepted when the latest check_compilation passed on the current files.",
        {"summary": {"type": "string", "description": "what you wrote, one paragraph"}},
        ["summary"],
    ),
]

VALIDATE_TOOL = _spec(
    "validate",
    "Run ONE configuration of the current files on the GPU for correctness only (no timing): both "
    "input sets and every scored shape, with the tuner's checks (out-of-bounds writes, races, input "
    "mutation). Returns valid or how many elements are wrong and a few (index, expected, got). Use it "
    "after check_compilation passes and before end_step; it may be used a few times per step.",
    {
        "config": {
            "type": "object",
            "description": 'tune parameter values, e.g. {"BX": 16}; default: the first configuration the '
            "last check compiled",
            "additionalProperties": {"type": ["integer", "number", "string"]},
        }
    },
    [],
)

HISTORY_TOOLS = [
    _spec(
        "tuning_landscape",
        "An earlier iteration's tuning results: mode 'top' (the n fastest configurations), 'sweep' "
        "(one parameter's values with the others held at the best configuration) or 'failures' "
        "(configurations by status, and parameter values that never worked).",
        {
            "iteration": {"type": "integer"},
            "mode": {"type": "string", "enum": ["top", "sweep", "failures"]},
            "n": {"type": "integer", "description": "rows for mode 'top' (default 10)"},
            "param": {"type": "string", "description": "the parameter to sweep (mode 'sweep')"},
            "case": {"type": "string", "description": "with several cases: which one (default: the first)"},
        },
        ["iteration", "mode"],
    ),
    _spec(
        "grep_tuner_output",
        "Lines of an earlier iteration's tuner output (one line per configuration, then the result) "
        "that contain a text (a plain, case-insensitive substring; not a regular expression).",
        {"iteration": {"type": "integer"}, "text": {"type": "string"}},
        ["iteration", "text"],
    ),
    _spec("list_iterations", "This branch's earlier iterations: mode, result, decision, summary.", {}, []),
    _spec(
        "query_history",
        "Plan, result, proposal and full decision of one earlier iteration of this branch.",
        {"iteration": {"type": "integer"}},
        ["iteration"],
    ),
    _spec(
        "query_errors",
        "Errors seen so far in this branch: failed steps, compile errors, error analyses, "
        "failed configurations by status with an example of each.",
        {},
        [],
    ),
]

BRANCH_TOOLS = [
    _spec("branch_index", "Every other branch of the run: status, iterations, best time, strategy.", {}, []),
    _spec(
        "branch_log",
        "What another branch tried: one line per decided iteration (no kernel source).",
        {"name": {"type": "string", "description": "a branch name from branch_index"}},
        ["name"],
    ),
    _spec(
        "branch_errors",
        "Failures another branch hit and what its decisions concluded about their causes.",
        {"name": {"type": "string", "description": "a branch name from branch_index"}},
        ["name"],
    ),
]


def tool_specs(can_validate: bool = False) -> list[ToolSpec]:
    """Every tool, in every authoring step: the tool list is part of the prompt prefix a
    provider caches (it comes before the system prompt), so it must not change between the
    steps of a run. validate is offered when a GPU is used (a run-wide setting). A query with
    nothing to report yet says so; the task names the tools that can answer now."""
    tools = AUTHOR_TOOLS[:5] + ([VALIDATE_TOOL] if can_validate else []) + AUTHOR_TOOLS[5:]
    return tools + HISTORY_TOOLS + BRANCH_TOOLS


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
        if call.name not in names:
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
        if call.name == "tuning_landscape":
            return ToolOutcome(
                queries.tuning_landscape(
                    int(argument(call, "iteration", int)),  # type: ignore[arg-type]
                    str(argument(call, "mode", str, "top")),
                    n=int(argument(call, "n", int, 10)),  # type: ignore[arg-type]
                    param=_optional_str(call, "param"),
                    case=_optional_str(call, "case"),
                )
            )
        if call.name == "grep_tuner_output":
            return ToolOutcome(
                queries.grep_tuner_output(int(argument(call, "iteration", int)), str(argument(call, "text", str)))  # type: ignore[arg-type]
            )
        if call.name == "list_iterations":
            return ToolOutcome(queries.list_iterations())
        if call.name == "query_history":
            return ToolOutcome(queries.history(int(argument(call, "iteration", int))))  # type: ignore[arg-type]
        if call.name == "query_errors":
            return ToolOutcome(queries.errors())
        if call.name == "branch_index":
            return ToolOutcome(queries.branch_index())
        if call.name == "branch_log":
            return ToolOutcome(queries.branch_log(str(argument(call, "name", str))))
        if call.name == "branch_errors":
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
