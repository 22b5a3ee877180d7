"""Author: the tool loop that writes kernels.cu and tuning.yaml and compile-checks them.

A compile error costs a retry inside the step, not an iteration: the model sees the
errors and fixes them. The step ends when the model calls end_step after a passing
check, or fails after too many rejected end_steps, too many tool calls, or a model that
stops using the tools (a refusal is answered once with the task restated; a second one
ends the step). A call repeated with the same arguments ``REPEAT_LIMIT`` times with no
file written in between is not run again (end_step and validate have limits of their
own): the model is told so, and one more repeat ends
the loop as the tool-call cap does (the files are accepted if they changed and pass a
final check).

The opening turn is [the stable prefix: problem brief, the master's analysis and the
tuning-spec guide, the same in every authoring step of the run] then [this iteration's task]; the LLM layer keeps the
growing conversation within the model's context window and marks cache breakpoints.
"""

from __future__ import annotations

import hashlib
import json

from cacao_tui import prompts
from cacao_tui.llm import CallContext, Message, ToolCall
from cacao_tui.llm.refusals import refusal_reason, restate
from cacao_tui.nodes.author_tools import ToolOutcome, run_file_tool, tool_specs
from cacao_tui.nodes.branch_queries import BranchQueries, DiskBranches
from cacao_tui.nodes.briefing import (
    analysis_section,
    best_section,
    iteration_log,
    last_decision_section,
    messages_section,
    parent_section,
    plan_section,
    previous_result_section,
    revert_note,
    start_section,
)
from cacao_tui.nodes.compile_check import CheckOutcome, check_compilation
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.notes import abilities, branch_topics, notes_block, topic_index
from cacao_tui.nodes.notes import text as notes_text
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.target import target_of
from cacao_tui.nodes.validate import ValidateRefused, config_argument, default_config, validate_files
from cacao_tui.nodes.workspace import Workspace, read_model_file, seed_workspace
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import AuthorOutcome
from ktt.protocol import CheckReport

MAX_NUDGES = 3
REPEAT_LIMIT = 3  # the same call with the same arguments, no file written in between
AUTHOR_TASK = "write kernels.cu and tuning.yaml with the tools, check_compilation, then end_step."
LAST_CHECK_CHARS = 4000  # the last failed check kept for the decision after a failed step
UNCHANGED = (
    "end_step rejected: the files are the ones this iteration started from. An iteration exists to make "
    "a change: edit kernels.cu or tuning.yaml (in a configuration-only iteration, tuning.yaml) first."
)


class AuthorFailed(Exception):
    def __init__(self, message: str, outcome: AuthorOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome


def _files_digest(branch: BranchView) -> str:
    h = hashlib.sha256()
    for p in (branch.it.kernel, branch.it.spec):
        try:
            h.update(read_model_file(p).encode() if p.exists() else b"<missing>")
        except OSError as exc:  # not a file the model could have written: it changed, and says how
            h.update(str(exc).encode())
        h.update(b"\0")
    return h.hexdigest()


def author_node(branch: BranchView) -> str:
    """The record/replay node of the step: ``author``, or ``author-sK`` for the K-th of several samples."""
    return "author" if branch.sample in (None, 1) else f"author-s{branch.sample}"


def author_task(branch: BranchView) -> str:
    """The one paragraph that says what this iteration's authoring is for."""
    if branch.mode == "first":
        return prompts.load("tasks/author_child" if branch.start is not None else "tasks/author_first").strip()
    return prompts.load(f"tasks/author_{branch.mode}").strip()


def has_other_results(deps: RunDeps, branch: BranchView) -> bool:
    """Whether another branch has a decided iteration worth asking about."""
    if branch.run is None:
        return False
    directory = deps.branches if deps.branches is not None else DiskBranches(branch.run)
    for name in directory.names():
        if name != branch.name:
            m = directory.manifest(name)
            if m is not None and m.iterations_done > 0:
                return True
    return False


async def author(deps: RunDeps, branch: BranchView, plan: str) -> AuthorOutcome:
    seeded = seed_workspace(branch)
    seed_digest = _files_digest(branch) if seeded else None
    ws = Workspace(deps, branch)
    queries = BranchQueries(
        run=branch.run or RunLayout(deps.problem.directory),
        name=branch.name,
        current=branch.iteration,
        limits=deps.defaults,
        superseded=branch.superseded,
        branches=deps.branches,
    )
    has_history = any(i < branch.iteration for i in branch.layout.iteration_indices())
    # Not in the model's phase of a split run (--phase llm): no GPU there (validate_rule says so).
    can_validate = not deps.settings.dry_run and deps.defaults.validate_uses > 0 and deps.phase != "llm"
    tools = tool_specs(can_validate, tuned=not deps.settings.dry_run)
    names = {t.name for t in tools}
    notes = []
    if has_history:
        notes.append("this branch's earlier iterations")
    if has_other_results(deps, branch):
        notes.append("the other branches")
    # The stable prefix: the same in every authoring step of the run (the analysis is the master's, once;
    # the notes the problem itself calls for), the step's own rules last (constant for the run: the tool
    # cap, whether validate is offered).
    cap = deps.defaults.tool_call_cap
    rules = prompts.render("author_rules", tool_cap=cap, validate_rule=validate_rule(deps, names))
    arch = target_of(deps).arch
    shared, own = branch_topics(deps.problem, arch, f"{branch.strategy.title} {branch.strategy.description} {plan}")
    parts = [problem_brief(deps), analysis_section(deps), prompts.load("tuning_spec")]
    fixed = len(prompts.load("system")) + sum(len(t.model_dump_json()) for t in tools)
    if deps._top_up is None:
        deps._top_up = cache_top_up(deps, fixed + sum(map(len, parts)) + len(rules), shared)
    topped = deps._top_up
    own = [n for n in own if n not in topped]  # in the run's prefix already
    ws.notes_shown = [*shared, *topped, *own]
    blocks = [
        *parts,
        notes_block(shared, "Notes this problem calls for"),
        general_block(deps, topped),
        rules,
    ]
    stable = "\n\n".join(part.strip() for part in blocks if part) + "\n"

    # The branch's plan and its strategy's notes: the same in each authoring step of the branch (while
    # the plan stands), so a cached prefix of their own after the run's.
    planned = plan_section(deps, branch) if plan else ""
    own_notes = notes_block(own, "Notes for this branch's strategy")
    branch_part = prompts.tidy("\n".join(p for p in (planned, own_notes) if p))
    # A sub-branch's first step: what it inherits (its parent's iteration, as for a continuing iteration
    # without the proposal its feedback distilled, and the parent's files) is the same for every sibling
    # that starts there, so it comes before the plan, a cached prefix they share.
    child = branch.mode == "first" and branch.parent is not None and branch.start is not None
    inherited = parent_section(deps, branch, proposal=False) + start_section(deps, branch) if child else ""

    def opening_task() -> str:
        return prompts.render(
            "author",
            parent=parent_section(deps, branch, proposal=False) if branch.mode == "polish" else "",
            task=author_task(branch),
            last_decision=last_decision_section(deps, branch),
            previous_result=previous_result_section(deps, branch),
            revert=revert_note(branch),
            iteration_log=iteration_log(deps, branch),
            messages=messages_section(deps, branch),
            start="" if child else start_section(deps, branch),
            best=best_section(deps, branch),
            files=files_line(ws, shown=branch.start is not None and branch.start.kernel is not None),
            query_tools=("\nhistory() answers about " + " and ".join(notes) + ".") if notes else "",
        )

    messages: list[Message] = [Message(role="user", content=stable, cache_prefix=True)]
    if inherited:
        messages.append(Message(role="user", content=prompts.tidy(inherited), cache_prefix=True))
    if branch_part.strip():
        messages.append(Message(role="user", content=branch_part, cache_prefix=True))
    task_at = len(messages)
    messages.append(Message(role="user", content=""))  # the task: built when the first call has its slot
    ctx = CallContext(branch=branch.name, iteration=branch.iteration, node=author_node(branch))
    outcome = AuthorOutcome()
    last_report = None  # the last passing check's report (validate's default configuration)
    passed_digest: str | None = None
    passed_binary: str | None = None  # the binary fingerprint of the files that passed
    nudges = 0
    refused = False
    rejected_ends = 0
    repeats = RepeatGuard()
    if seeded:
        branch.reporter.kernel_written(branch.it.kernel, branch.it.spec if branch.it.spec.exists() else None)

    while outcome.tool_calls < deps.defaults.tool_call_cap and not repeats.ended:
        if outcome.llm_calls == 0:
            async with deps.llm.slot():  # the other branches' statuses as they are when it is sent
                messages[task_at] = Message(role="user", content=opening_task())
                resp = await deps.llm.chat(messages, tools, ctx=ctx, system=prompts.load("system"))
        else:
            resp = await deps.llm.chat(messages, tools, ctx=ctx, system=prompts.load("system"))
        outcome.llm_calls += 1
        outcome.input_tokens += resp.usage.input_tokens
        outcome.output_tokens += resp.usage.output_tokens
        outcome.cost_usd += resp.usage.cost_usd
        messages.append(resp.to_message())
        if not resp.tool_calls:
            nudges += 1
            refusal = refusal_reason(resp)
            if refusal and refused:
                raise AuthorFailed(f"{refusal} (also after the task was restated)", outcome)
            if nudges > MAX_NUDGES:
                raise AuthorFailed("the model stopped calling tools before end_step", outcome)
            if refusal:
                refused = True
                hint = restate(refusal, AUTHOR_TASK)
            elif resp.stop_reason == "max_tokens":
                hint = (
                    "Your reply was cut off at the token limit. Write large files in parts: write_file a "
                    "skeleton, then edit_file."
                )
            else:
                hint = "Use the tools: change the files, check_compilation, then end_step when the check passed."
            messages.append(Message(role="user", content=hint))
            continue
        for call in resp.tool_calls:
            outcome.tool_calls += 1
            repeated = repeats.see(call)
            if repeated is not None:
                result = ToolOutcome(repeated, is_error=True)
                if repeats.ended:
                    branch.reporter.log(f"authoring: {repeats.ended}; the loop ends", "warning")
            elif call.error:
                result = ToolOutcome(f"malformed arguments for {call.name}: {call.error}", is_error=True)
            elif call.name == "check_compilation":
                outcome.compile_checks += 1
                check = await check_compilation(deps, branch, call.arguments.get("configs"))
                if check.ok:
                    passed_digest, passed_binary = _files_digest(branch), check.fingerprints[1]
                    outcome.last_check = None
                    last_report = check.report
                    record_check(outcome, check)
                else:
                    outcome.compile_failures += 1
                    outcome.last_check = check.text[:LAST_CHECK_CHARS]
                result = ToolOutcome(check.text, is_error=not check.ok)
            elif call.name == "validate" and "validate" in names:
                result = await _validate(deps, branch, outcome, call.arguments.get("config"), last_report)
            elif call.name == "end_step":
                if seed_digest is not None and _files_digest(branch) == seed_digest and branch.mode != "polish":
                    result = ToolOutcome(UNCHANGED, is_error=True)
                else:
                    result, binary = await _end_step(deps, branch, outcome, passed_digest, passed_binary)
                    outcome.binary_fingerprint = binary
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
                writes = call.name in ("write_file", "edit_file")
                result = run_file_tool(call, ws, queries, names)
                if writes and not result.is_error:
                    repeats.files_changed()
                    branch.reporter.kernel_written(
                        branch.it.kernel, branch.it.spec if branch.it.spec.exists() else None
                    )
            messages.append(_tool_message(call.id, call.name, result))
        nudges = 0

    # Out of tool calls (or ended for repeating itself): accept the files only if they
    # changed and pass a final check.
    why = repeats.ended or f"tool-call cap ({deps.defaults.tool_call_cap}) reached"
    if seed_digest is not None and _files_digest(branch) == seed_digest:
        raise AuthorFailed(f"{why} without changing the files", outcome)
    final = await check_compilation(deps, branch)
    outcome.compile_checks += 1
    if final.ok:
        outcome.ok = True
        record_check(outcome, final)
        outcome.binary_fingerprint = final.fingerprints[1]
        outcome.message = f"{why}; the files passed a final check"
        branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
        return outcome
    outcome.last_check = final.text[:LAST_CHECK_CHARS]
    raise AuthorFailed(f"{why} without a passing check", outcome)


async def _end_step(
    deps: RunDeps, branch: BranchView, outcome: AuthorOutcome, passed: str | None, binary: str | None
) -> tuple[ToolOutcome, str | None]:
    """(the answer, the binary fingerprint of the files it accepted)."""
    if passed is not None and passed == _files_digest(branch):
        return ToolOutcome("accepted", ended=True), binary
    check = await check_compilation(deps, branch)
    outcome.compile_checks += 1
    if check.ok:
        outcome.last_check = None
        record_check(outcome, check)
        return ToolOutcome("accepted (checked now)", ended=True), check.fingerprints[1]
    outcome.compile_failures += 1
    outcome.last_check = check.text[:LAST_CHECK_CHARS]
    text = "end_step rejected: the current files do not pass the check.\n" + check.text
    return ToolOutcome(text, is_error=True), None


def record_check(outcome: AuthorOutcome, check: CheckOutcome) -> None:
    """What the passing check found, kept with the step (propose, decide, a dry run's run step)."""
    report = check.report
    outcome.checked_fingerprint = check.fingerprints[0]
    outcome.check_report = check.text[:LAST_CHECK_CHARS]
    if report is not None:
        outcome.checked_configs = len(report.configs)
        outcome.compiled_configs = sum(1 for c in report.configs if c.ok)
        outcome.checked_space = report.restricted_size if report.restricted_size is not None else report.space_size


# What may lift a prefix up to a cache minimum, in this order: the general levers, what a kernel may
# use, the syntax of several passes, reductions (the most common pattern in kernels), the index of
# the note topics (what read_notes returns).
GENERAL_NOTES = ("memory", "compute", "abilities", "multipass", "reductions", "topics")
CACHE_MARGIN = 1.03  # the provider's tokens are not quite ours


def _general_text(deps: RunDeps, name: str) -> str:
    arch = target_of(deps).arch
    if name == "topics":
        return "Note topics (read_notes(topic) returns one):\n" + topic_index(arch, [])
    return abilities(deps.problem, arch) if name == "abilities" else notes_text(name)


def cache_top_up(deps: RunDeps, prefix_chars: int, shown: list[str]) -> list[str]:
    """The general notes that lift the authoring steps' stable prefix to the model's prompt-cache
    minimum (``ModelInfo.min_cache_tokens``: 4,096 tokens for Gemini 2.5 Pro and 3), where that is
    what it takes: a prefix under the minimum is never cached, so every authoring step pays all of
    it at the full price; one just over it is read from the cache at a tenth of the price. None
    when the prefix is long enough already, or the general notes would not lift it far enough."""
    minimum = deps.llm.info.min_cache_tokens
    estimate = deps.llm.estimator.tokens
    if estimate(prefix_chars) >= minimum:
        return []
    chosen: list[str] = []
    for name in GENERAL_NOTES:
        if name in shown:
            continue
        chosen.append(name)
        prefix_chars += len(_general_text(deps, name)) + 40
        if estimate(prefix_chars) >= minimum * CACHE_MARGIN:
            return chosen
    return []


def general_block(deps: RunDeps, names: list[str]) -> str:
    if not names:
        return ""
    return "General notes:\n" + "\n\n".join(_general_text(deps, n).strip() for n in names) + "\n"


def files_line(ws: Workspace, shown: bool) -> str:
    """What read_file can read, truthfully: the workspace's files only once they exist (``shown``: the
    task quotes them whole, so they are not named again)."""
    readable = ws.readable()
    if shown and "kernels.cu" in readable:
        base = " (base/ keeps them as they start)" if "base/kernels.cu" in readable else ""
        others = _iteration_range([n for n in readable if n not in WORKSPACE_AND_BASE])
        return f"read_file reads the files above{base}, {', '.join(others)}."
    return f"read_file reads: {', '.join(_iteration_range(readable))}."


WORKSPACE_AND_BASE = ("kernels.cu", "tuning.yaml", "base/kernels.cu", "base/tuning.yaml")


def _iteration_range(names: list[str]) -> list[str]:
    """``iter1/kernels.cu, iter2/kernels.cu, iter3/kernels.cu`` as ``iter1/ to iter3/kernels.cu``."""
    its = [n for n in names if n.startswith("iter") and n.endswith("/kernels.cu")]
    numbers = [int(n[4:-11]) for n in its if n[4:-11].isdigit()]
    if len(numbers) < 3 or numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        return names
    at = names.index(its[0])
    rest = [n for n in names if n not in its]
    return [*rest[:at], f"iter{numbers[0]}/ to iter{numbers[-1]}/kernels.cu", *rest[at:]]


def validate_rule(deps: RunDeps, names: set[str]) -> str:
    """The authoring prompt's line about the validate tool: how to use it, or why it is not offered
    in the model's phase of a split run."""
    if "validate" not in names:
        return prompts.load("validate_phase").rstrip("\n") if deps.phase == "llm" else ""
    return (
        f"\n   validate(config) runs one configuration on the GPU for correctness (both input sets, no\n"
        f"   timing): use it before end_step, at most {deps.defaults.validate_uses} times in this step. A wrong\n"
        "   kernel found here costs a tool call; found by the tuner, it costs the iteration."
    )


async def _validate(
    deps: RunDeps, branch: BranchView, outcome: AuthorOutcome, config: object, report: CheckReport | None
) -> ToolOutcome:
    cap = deps.defaults.validate_uses
    if outcome.validations >= cap:
        return ToolOutcome(f"validate: used {cap} times in this step (the limit); end_step or fix without it",
                           is_error=True)  # fmt: skip
    try:
        chosen = config_argument(config) or default_config(report)
        ran, text = await validate_files(deps, branch, chosen)
    except ValidateRefused as exc:
        return ToolOutcome(str(exc), is_error=True)
    if ran:
        outcome.validations += 1
    return ToolOutcome(text, is_error=not text.startswith("validate: VALID"))


# Tools with a limit of their own (rejected end_steps: compile_retries; validate: validate_uses).
OWN_LIMITS = frozenset({"end_step", "validate"})


class RepeatGuard:
    """Counts identical calls (name and arguments) since the files last changed; the tools
    with a limit of their own are left to it."""

    def __init__(self, limit: int = REPEAT_LIMIT) -> None:
        self.limit = limit
        self.counts: dict[str, int] = {}
        self.ended: str | None = None

    def files_changed(self) -> None:
        self.counts.clear()

    def see(self, call: ToolCall) -> str | None:
        """None: run the call. Else the answer to send instead of running it."""
        if call.name in OWN_LIMITS:
            return None
        key = json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)
        n = self.counts.get(key, 0) + 1
        self.counts[key] = n
        if n < self.limit:
            return None
        if n == self.limit:
            return (
                f"Not run: you made this exact {call.name} call {n} times with the same arguments and no file "
                "changed in between, so its result is the one you already have. Do something else: edit the "
                "files, run check_compilation after a change, or end_step. One more identical call ends this step."
            )
        self.ended = f"the model repeated {call.name} with the same arguments {n} times"
        return f"Not run: {self.ended}. The step ends now."


def _tool_message(call_id: str, name: str, result: ToolOutcome) -> Message:
    return Message(role="tool", tool_call_id=call_id, content=result.content, is_error=result.is_error)
