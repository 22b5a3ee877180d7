"""The single-shot authoring path (implement + configure), kept behind a setting as in the original."""

from __future__ import annotations

from cacao_tui.nodes.author import AuthorFailed
from cacao_tui.nodes.compile_check import check_compilation
from cacao_tui.nodes.configure import configure
from cacao_tui.nodes.context import BranchView, RunDeps
from cacao_tui.nodes.implement import implement
from cacao_tui.store.state import AuthorOutcome


async def implement_and_configure(deps: RunDeps, branch: BranchView, plan: str) -> AuthorOutcome:
    outcome = AuthorOutcome()
    errors = ""
    for _ in range(deps.defaults.compile_retries + 1):
        kernel = await implement(deps, branch, plan, errors)
        await configure(deps, branch, kernel, errors)
        check = await check_compilation(deps, branch)
        outcome.compile_checks += 1
        if check.ok:
            outcome.ok = True
            branch.reporter.kernel_written(branch.it.kernel, branch.it.spec)
            return outcome
        outcome.compile_failures += 1
        errors = check.text
    raise AuthorFailed(f"no compiling kernel after {outcome.compile_checks} single-shot attempts", outcome)
