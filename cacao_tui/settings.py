"""Defaults of a run, in one place. CLI flags override them; FORMATS.md lists the originals.

``PROVIDER`` mirrors the original's hard-coded LLM_PROVIDER: leave it ``None`` so the
choice falls through to the environment and then to auto-detection.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# Provider set here wins over LLM_PROVIDER in the environment (but not over --provider).
PROVIDER: str | None = None


@dataclass(frozen=True)
class Defaults:
    n_strategies: int = 4  # strategies proposed by the master
    concurrency: int = 4  # branch workers running at once
    max_iter: int = 5  # iterations per branch
    max_depth: int = 2  # how deep branches may spawn sub-branches
    path_budget: int | None = None  # iterations per root-to-leaf path (off)
    history: int = 2  # iterations of history in prompts
    tool_call_cap: int = 50  # tool calls per authoring step
    compile_retries: int = 3  # failed end_step attempts inside one authoring step
    check_sample: int = 4  # configurations compile-checked by check_compilation
    validate_uses: int = 3  # validate tool runs per authoring step (0: the tool is not offered)
    validate_timeout_s: float = 180.0  # one validate run: compile, references, both input sets
    validate_wait_s: float = 300.0  # how long validate waits for a GPU another branch is using
    probe_s: float = 10.0  # the short tuning of each valid sample with --samples K
    plateau_iterations: int = 3  # a gain below plateau_gain over this many iterations is a plateau
    plateau_gain: float = 0.05
    # --- What each step of a branch sees (prompt and tool-output sizes) ------------------
    # history (above) is how many earlier iterations are shown in full; these bound the rest.
    history_text_chars: int = 2000  # each plan, proposal, feedback or error text in that history
    iteration_log: int = 40  # one-line summaries of earlier iterations (the newest this many)
    source_chars: int = 60_000  # a kernels.cu or tuning.yaml quoted in a prompt
    landscape_top: int = 8  # fastest configurations in the tuning landscape propose and decide see
    analysis_chars: int = 6000  # the master's analysis, in plan, author, propose and decide
    branch_index_rows: int = 8  # other branches listed in a prompt, fastest first
    user_messages: int = 6  # the newest user messages to a branch shown in its prompts
    tool_output_chars: int = 12_000  # one answer of a query tool (tuning_landscape, branch_log, ...)
    landscape_rows: int = 24  # rows of a tuning_landscape table
    grep_max_hits: int = 40  # matching lines grep_tuner_output returns
    # --------------------------------------------------------------------------------------
    tuner_grace_min_s: float = 30.0  # watchdog = budget + max(30 s, 20 %)
    tuner_grace_fraction: float = 0.2
    single_shot: bool = False  # implement + configure as two single calls instead of the tool loop
    llm_retries: int = 5
    # One attempt of an LLM call: connect, send, and the whole reply (--llm-timeout,
    # CACAO_LLM_TIMEOUT). The connection itself must open within llm_connect_timeout_s.
    llm_timeout_s: float = 300.0
    llm_connect_timeout_s: float = 15.0
    # The whole call, retries and the waits between them included: this many attempts' worth.
    llm_call_timeout_factor: float = 3.0
    llm_max_tokens: int = 16384
    # Size caps, in characters. A reply's text beyond llm_reply_text_chars is cut, and its
    # text and tool arguments together (a written file) beyond llm_reply_max_chars. A
    # request's newest message is cut to llm_reply_max_chars, each earlier turn to
    # llm_context_message_chars, and the earlier turns together to llm_context_total_chars.
    llm_reply_text_chars: int = 64 * 1024
    llm_reply_max_chars: int = 512 * 1024
    llm_context_message_chars: int = 64 * 1024
    llm_context_total_chars: int = 1024 * 1024


DEFAULTS = Defaults()


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "cacao_tui"


def tuner_watchdog_s(budget_s: float) -> float:
    """The tuner's whole-run watchdog: budget + max(30 s, 20 % of it)."""
    return budget_s + max(DEFAULTS.tuner_grace_min_s, DEFAULTS.tuner_grace_fraction * budget_s)
