"""What a run is asked to do: the hand-off from the command line to ``cacao_tui.launch``.

The CLI validates the flags and loads the problem (once; nothing after it loads it again)
and hands over this typed request instead of its argparse namespace, so the launcher's
inputs are named, typed and complete, and another front end (a script, a test) can build
one without argparse.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cacao_tui.llm.models import Effort
from ktt.problem import Problem

FrontEnd = Literal["app", "lines", "json"]  # the Textual app, --no-ui progress lines, --json events


@dataclass(frozen=True)
class RunRequest:
    """A run of one problem. ``None`` means the default (``settings.DEFAULTS``, the problem's own)."""

    problem: Problem  # loaded and validated by the caller
    front_end: FrontEnd = "app"
    verbose: bool = False
    # What the run does
    resume: bool = False
    no_clean: bool = False
    dry_run: bool | None = None  # None: the run's own on --resume (its context.json), else False
    single_shot: bool = False
    max_iter: int | None = None
    max_depth: int | None = None
    path_budget: int | None = None  # 0: off
    n_strategies: int | None = None
    budget_iters: int | None = None  # the run's iteration pool (default: n_strategies x max_iter)
    samples: int | None = None  # authoring attempts per iteration (default 1)
    timeout_s: float | None = None  # the tuner's budget per iteration (default: tuning.duration_s)
    gpus: tuple[int, ...] | None = None  # default: the problem's gpu.index
    cluster: str | None = None  # where GPU jobs run: local (default) or ray[://ADDRESS]
    phase: Literal["llm", "gpu"] | None = None  # a split run's part (store/phases.py); None: the whole run
    gpu_submit: str | None = None  # run the GPU phase through this command ({cmd}: docs/CLUSTER.md)
    lock_token: str | None = None  # the GPU phase --gpu-submit started: it runs under the submitter's lock
    # The model
    provider: str | None = None  # a canonical registry name; None: chosen from the environment
    model: str | None = None
    # Models of single steps: (provider, model); a None provider is the run's own.
    model_plan: tuple[str | None, str] | None = None
    model_decide: tuple[str | None, str] | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None  # a cap in tokens (in + out): for models without a price too
    reasoning: Effort | None = None  # low | medium | high for every step (llm.toml may set steps apart)
    max_tokens: int | None = None  # the visible output of one call
    llm_concurrency: int | None = None
    replay_from: Path | None = None  # a recorded session (--provider replay); default: session.jsonl
    llm_timeout_s: float | None = None
    target: str | None = None  # --target: the GPU a dry run describes and compiles for (ktt.gpu_catalog)

    @property
    def directory(self) -> Path:
        return self.problem.directory
