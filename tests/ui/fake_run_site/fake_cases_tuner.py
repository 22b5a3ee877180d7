"""A FAKE tuner for runs the tmux tests start from the app (tests only; never on a user's path).

A run started from the app is a process of its own (``python -m cacao_tui --dir X --no-ui ...``),
so a test cannot hand it a tuner object the way tests/engine does. It reaches the run through the
product's tuner seam (``cacao_tui.tuners``): this folder holds a ``.dist-info`` registering
``FakeCasesTuner`` as the tuner ``fake-cases`` under the entry-point group ``cacao_tui.tuners``;
with this folder on PYTHONPATH and ``CACAO_TUNER=fake-cases`` the run uses it instead of ktt.
The run still needs a GPU to be listed: the tests put a fake ``nvidia-smi`` on PATH
(``write_fake_nvidia_smi``).

``FakeCasesTuner`` is ``tests.fake_tuner.FakeTuner`` (times from the kernel source, no GPU)
plus what a problem with ``cases:`` gets from ktt: one result per case (the primary's is the
stock fake's best; each further case a fixed multiple of it and of the reference) and their
geometric-mean score. It pauses before each tuning (``FIRST_DELAY_S``, then ``DELAY_S``) so a run
lasts long enough to be watched and paused.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable
from pathlib import Path

from cacao_tui.ktt_client import TuneRequest
from ktt.problem import load_problem
from ktt.protocol import CaseResult, Progress, TuneSummary
from tests.fake_tuner import FakeTuner

SITE = Path(__file__).resolve().parent  # on the run's PYTHONPATH: the .dist-info beside this file
NAME = "fake-cases"  # CACAO_TUNER=fake-cases (the entry point's name)
# Seconds per tuning: a branch's first is long, so a test has time to pause the run while it
# lives (a pause takes effect at the branch's next step); the later ones are short.
FIRST_DELAY_S, DELAY_S = 4.0, 1.0


def write_fake_nvidia_smi(folder: os.PathLike[str] | str) -> str:
    """A FAKE nvidia-smi in ``folder`` listing one GPU 0 (what cacao_tui.engine.gpu asks); the folder."""
    path = os.path.join(os.fspath(folder), "nvidia-smi")
    with open(path, "w", encoding="utf-8") as f:
        f.write("#!/bin/sh\necho '0, FAKE GPU (tests/ui/fake_run_site), 9.0'\n")
    os.chmod(path, 0o755)
    return os.fspath(folder)


class FakeCasesTuner(FakeTuner):
    """FAKE: the stock fake tuner, answering per case for a problem with ``cases:``."""

    def __init__(self, *, on_log: Callable[[str], None] | None = None, **_: object) -> None:
        super().__init__(reference_ms=10.0)

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        await asyncio.sleep(FIRST_DELAY_S if request.seed == 1 else DELAY_S)  # the seed is the iteration
        summary = await super().tune(request, on_progress)
        shapes = load_problem(request.problem_dir).shapes
        if summary.best is None or summary.best.time_ms is None or len(shapes) < 2:
            return summary
        cases = []
        for k, shape in enumerate(shapes):
            reference_ms = self.reference_ms / (1 + k)  # later cases: smaller, and gain less
            time_ms = summary.best.time_ms / (1 + 0.5 * k)
            cases.append(CaseResult(
                name=shape.name, status="ok", time_ms=time_ms, reference_ms=reference_ms,
                reference_source="fake", speedup=reference_ms / time_ms, config=summary.best.config,
                budget_s=request.duration_s or shape.duration_s, evaluated=4, valid=4,
            ))  # fmt: skip
        score = math.exp(sum(math.log(c.speedup or 1.0) for c in cases) / len(cases))
        summary = summary.model_copy(update={"cases": cases, "score": score})
        (request.out_dir / "summary.json").write_text(summary.model_dump_json(indent=2))
        return summary
