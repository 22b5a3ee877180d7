"""Implement (single-shot path): one call that returns the whole kernels.cu."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, ReplyUnusable
from cacao_tui.nodes.author import author_task
from cacao_tui.nodes.briefing import last_decision_section, messages_section, start_section
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.replies import ask_text, code_reply, opening_turn
from cacao_tui.nodes.workspace import write_model_file

TASK = "reply with the whole kernels.cu in one ```cuda fenced block."


async def implement(deps: RunDeps, branch: BranchView, plan: str, errors: str = "") -> str:
    brief = problem_brief(deps)
    text = prompts.render(
        "implement",
        problem=brief,
        plan=plan,
        task=author_task(branch),
        last_decision=last_decision_section(deps, branch),
        messages=messages_section(deps, branch),
        start=start_section(deps, branch, workspace=False),
        errors=f"The previous attempt failed the compile check:\n{errors}\n" if errors else "",
    )
    resp = await ask_text(
        deps.llm,
        opening_turn(text, brief),
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="implement"),
        system=prompts.load("system"),
        task=TASK,
    )
    source = code_reply(resp.text, ("cuda", "cu", "cpp", "c++", "c"), "__global__")
    if not source or "__global__" not in source:
        raise ReplyUnusable(
            "implement: the reply holds no ```cuda block with a __global__ kernel", reason="no kernel in the reply"
        )
    write_model_file(branch.it.kernel, source)
    return source
