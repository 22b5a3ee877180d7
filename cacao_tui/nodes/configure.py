"""Configure (single-shot path): one call that returns tuning.yaml for the kernel just written."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, LLMError, Message
from cacao_tui.nodes.briefing import problem_brief
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.replies import fenced_block


async def configure(deps: RunDeps, branch: BranchView, kernel: str, errors: str = "", task: str = "") -> str:
    text = prompts.render(
        "configure",
        problem=problem_brief(deps),
        kernel=kernel,
        task=task,
        errors=f"The previous tuning.yaml failed the check:\n{errors}\n" if errors else "",
        tuning_spec=prompts.load("tuning_spec"),
    )
    resp = await deps.llm.chat(
        [Message(role="user", content=text)],
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="configure"),
        system=prompts.load("system"),
    )
    spec = fenced_block(resp.text, ("yaml", "yml"))
    if not spec or "launches" not in spec:
        raise LLMError("configure: the reply holds no ```yaml block with launches")
    branch.it.spec.write_text(spec, encoding="utf-8")
    return spec
