"""Configure (single-shot path): one call that returns tuning.yaml for the kernel just written."""

from __future__ import annotations

from cacao_tui import prompts
from cacao_tui.llm import CallContext, ReplyUnusable
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.notes import SPEC_TOPICS, branch_topics, notes_block
from cacao_tui.nodes.problem_brief import problem_brief
from cacao_tui.nodes.replies import YAML_START, ask_text, code_reply, opening_turn
from cacao_tui.nodes.target import target_of
from cacao_tui.nodes.workspace import write_model_file

TASK = "reply with the whole tuning.yaml in one ```yaml fenced block."


async def configure(deps: RunDeps, branch: BranchView, kernel: str, errors: str = "", task: str = "") -> str:
    brief = problem_brief(deps)
    text = prompts.render(
        "configure",
        problem=brief,
        kernel=kernel,
        task=task,
        errors=f"The previous tuning.yaml failed the check:\n{errors}\n" if errors else "",
        tuning_spec=prompts.load("tuning_spec") + _spec_notes(deps, branch),
    )
    resp = await ask_text(
        deps.llm,
        opening_turn(text, brief),
        ctx=CallContext(branch=branch.name, iteration=branch.iteration, node="configure"),
        system=prompts.load("system"),
        task=TASK,
    )
    spec = code_reply(resp.text, ("yaml", "yml"), "launches:", YAML_START)
    if not spec or "launches" not in spec:
        raise ReplyUnusable("configure: the reply holds no ```yaml block with launches", reason="no tuning.yaml")
    write_model_file(branch.it.spec, spec)
    return spec


def _spec_notes(deps: RunDeps, branch: BranchView) -> str:
    """The tuning.yaml syntax notes (multipass, hopper_tma: the optional techniques) the branch's
    strategy or plan calls for."""
    arch = target_of(deps).arch
    words = f"{branch.strategy.title} {branch.strategy.description} {branch.plan or ''}"
    _, own = branch_topics(deps.problem, arch, words)
    wanted = [n for n in own if n in SPEC_TOPICS]
    return "\n" + notes_block(wanted) if wanted else ""
