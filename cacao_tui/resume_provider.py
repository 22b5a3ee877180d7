"""``--resume`` never switches to another paid provider on its own (docs/SECURITY.md, round 4).

A resumed run goes on with the provider and model its ``output/context.json`` names, so that a
replay resumes as a replay without an API key. But output/ is anyone's text: a tampered
context.json could turn a resume into calls to a paid provider, made with your key for it. So
when the run's provider needs a key and differs from the provider you would get without
``--provider`` (``LLM_PROVIDER``, else the first key set), the resume stops before anything is
written, in one line that names both: say ``--provider NAME`` to choose. A keyless provider
(``replay``) and the provider you would get anyway need no word.
"""

from __future__ import annotations

from collections.abc import Mapping

from cacao_tui.llm import LLMError, select_provider
from cacao_tui.llm.registry import BY_NAME
from cacao_tui.run_request import RunRequest
from cacao_tui.store.atomic import StateFileError, read_model_or_none
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import Context
from ktt.terminal_text import safe_line


def stored_provider(request: RunRequest) -> tuple[str, str] | None:
    """(provider, model) of the run being resumed, from its context.json; None when unreadable."""
    try:
        context = read_model_or_none(RunLayout(request.directory).context, Context)
    except StateFileError:
        return None
    return None if context is None else (context.settings.provider, context.settings.model)


def check_resume_provider(request: RunRequest, env: Mapping[str, str]) -> None:
    """LLMError (one line) when ``--resume`` without ``--provider`` would switch to a paid provider
    other than the one chosen without the flag."""
    if not request.resume or request.provider is not None:
        return
    stored = stored_provider(request)
    if stored is None:
        return
    provider, model = stored
    entry = BY_NAME.get(provider)
    if entry is None or not entry.key_vars:  # unknown (selection refuses it) or keyless: nothing to pay
        return
    try:
        default: str | None = select_provider(None, None, env=env).provider
    except LLMError:
        default = None
    if default == provider:
        return
    context = RunLayout(request.directory).context
    yours = f"yours is {default}" if default else "you have no default provider"
    raise LLMError(
        safe_line(
            f"{context}: this run used --provider {provider} (model {model}) and {yours}; --resume does not "
            f"switch to another paid provider on its own: add --provider {provider} to continue with it (your "
            f"{entry.key_vars[0]} pays), or --provider NAME to continue with another",
            600,
        )
    )
