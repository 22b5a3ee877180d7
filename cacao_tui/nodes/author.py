"""Author: the tool loop that writes kernels.cu and tuning.yaml and compile-checks them.

A compile error costs a retry inside the step, not an iteration: the model sees the
errors and fixes them. The step ends when the model calls end_step after a passing
check, or fails after too many rejected end_steps, too many tool calls, or a model that
stops using the tools.
"""

from __future__ import annotations

import hashlib

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message
from cacao_tui.nodes.author_tools import QueryTools, ToolOutcome, run_file_tool, tool_specs
from cacao_tui.nodes.briefing import base_section, problem_brief
from cacao_tui.nodes.compile_check import check_compilation
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.workspace import Workspace
from cacao_tui.store.state import AuthorOutcome

MAX_NUDGES = 3


class AuthorFailed(Exception):
    def __init__(self, message: str, outcome: AuthorOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome


def _files_digest(branch: BranchView) -> str:
    h = hashlib.sha256()
    for p in (branch.it.kernel, branch.it.spec):
        h.update(p.read_bytes() if p.exists() else b"<missing>")
        h.update(b"\0")
    return h.hexdigest()


async def author(deps: RunDeps, branch: BranchView, plan: str) -> AuthorOutcome:
    ws = Workspace(deps, branch)
    queries = QueryTools(branch)
    tools = tool_specs(branch.iteration)
    query_note = (
        "\nYou can also ask about this branch's earlier iterations: query_tuning, query_history, query_errors."
        if branch.iteration > 1
        else ""
    )
    text = prompts.render(
        "author",
        problem=problem_brief(deps),
        plan=plan,
        base=base_section(branch),
        readable=", ".join(ws.readable()),
        query_tools=query_note,
        tool_cap=deps.defaults.tool_call_cap,
        tuning_spec=prompts.load("tuning_spec"),
    )
    messages: list[Message] = [Message(role="user", content=text)]
    ctx = CallContext(branch=branch.name, iteration=branch.iteration, node="author")
    outcome = AuthorOutcome()
    passed_digest: str | None = None
    nudges = 0
    rejected_ends = 0

    while outcome.tool_calls < deps.defaults.tool_call_cap:
        resp = await deps.llm.chat(messages, tools, ctx=ctx, system=prompts.load("system"))
        messages.append(resp.to_message())
        if not resp.tool_calls:
            nudges += 1
            if nudges > MAX_NUDGES:
                raise AuthorFailed("the model stopped calling tools before end_step", outcome)
            hint = (
                "Your reply was cut off at the token limit. Write large files in parts: write_file a "
                "skeleton, then edit_file."
                if resp.stop_reason == "max_tokens"
                else "Use the tools: write_file, check_compilation, then end_step when the check passed."
            )
            messages.append(Message(role="user", content=hint))
            continue
        for call in resp.tool_calls:
            outcome.tool_calls += 1
            if call.error:
                result = ToolOutcome(f"malformed arguments for {call.name}: {call.error}", is_error=True)
            elif call.name == "check_compilation":
                outcome.compile_checks += 1
                check = await check_compilation(deps, branch)
                if check.ok:
                    passed_digest = _files_digest(branch)
                else:
                    outcome.compile_failures += 1
                result = ToolOutcome(check.text, is_error=not check.ok)
            elif call.name == "end_step":
                result = await _end_step(deps, branch, outcome, passed_digest)
                if result.ended:
                    outcome.ok = True
                    outcome.message = str(call.arguments.get("summary") or "")[:2000] or None
                    messages.append(_tool_message(call.id, call.name, result))
                    branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
                    return outcome
                rejected_ends += 1
                if rejected_ends > deps.defaults.compile_retries:
                    raise AuthorFailed(f"end_step rejected {rejected_ends} times: {result.content[:500]}", outcome)
            else:
                before = _files_digest(branch) if call.name in ("write_file", "edit_file") else None
                result = run_file_tool(call, ws, queries)
                if before is not None and not result.is_error:
                    branch.reporter.kernel_written(
                        branch.it.kernel, branch.it.spec if branch.it.spec.exists() else None
                    )
            messages.append(_tool_message(call.id, call.name, result))
        nudges = 0

    # Out of tool calls: accept the files only if they pass a final check.
    final = await check_compilation(deps, branch)
    outcome.compile_checks += 1
    if final.ok:
        outcome.ok = True
        outcome.message = f"tool-call cap ({deps.defaults.tool_call_cap}) reached; the files passed a final check"
        branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
        return outcome
    raise AuthorFailed(f"tool-call cap ({deps.defaults.tool_call_cap}) reached without a passing check", outcome)


async def _end_step(deps: RunDeps, branch: BranchView, outcome: AuthorOutcome, passed: str | None) -> ToolOutcome:
    if passed is not None and passed == _files_digest(branch):
        return ToolOutcome("accepted", ended=True)
    check = await check_compilation(deps, branch)
    outcome.compile_checks += 1
    if check.ok:
        return ToolOutcome("accepted (checked now)", ended=True)
    outcome.compile_failures += 1
    return ToolOutcome("end_step rejected: the current files do not pass the check.\n" + check.text, is_error=True)


def _tool_message(call_id: str, name: str, result: ToolOutcome) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=result.content, is_error=result.is_error)
