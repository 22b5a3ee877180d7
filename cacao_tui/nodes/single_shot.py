"""The single-shot authoring path (implement + configure), kept behind a setting as in the original.

A configuration-only iteration (skip_implement) keeps the starting kernel and asks only for
a new tuning.yaml.
"""

from __future__ import annotations

from cacao_tui.nodes.author import AuthorFailed, author_task
from cacao_tui.nodes.briefing import last_decision_section, messages_section
from cacao_tui.nodes.compile_check import check_compilation
from cacao_tui.nodes.configure import configure
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.implement import implement
from cacao_tui.nodes.workspace import seed_workspace
from cacao_tui.store.state import AuthorOutcome


async def implement_and_configure(deps: RunDeps, branch: BranchView, plan: str) -> AuthorOutcome:
    outcome = AuthorOutcome()
    errors = ""
    configure_only = branch.mode == "configure" and branch.base_kernel is not None
    if configure_only:
        seed_workspace(branch)
    task = ""
    if configure_only:
        task = "\n".join(
            [author_task(branch), last_decision_section(deps, branch), messages_section(deps, branch)]
        ).strip() + "\n"
        if branch.base_spec:
            task += f"The tuning.yaml it had:\n```yaml\n{branch.base_spec.strip()}\n```\n"
    for _ in range(deps.defaults.compile_retries + 1):
        if configure_only:
            kernel = branch.base_kernel or ""
        else:
            kernel = await implement(deps, branch, plan, errors)
        await configure(deps, branch, kernel, errors, task)
        check = await check_compilation(deps, branch)
        outcome.compile_checks += 1
        if check.ok:
            outcome.ok = True
            branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
            return outcome
        outcome.compile_failures += 1
        errors = check.text
    raise AuthorFailed(f"no compiling kernel after {outcome.compile_checks} single-shot attempts", outcome)
