"""FAKE tuners for the cluster tests: they never touch a GPU. Picklable (module level) so a
Ray task on another node can build one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from cacao_tui.ktt_client import TuneRequest
from ktt.protocol import ConfigResult, Progress, TuneSummary
from tests.fake_tuner import FakeTuner


class SlowFakeTuner(FakeTuner):
    """A FAKE tuner that measures ``configs`` configurations one every ``step_s`` seconds,
    appending each to results.jsonl as it finishes (as ktt tune does)."""

    configs = 8
    step_s = 0.5

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        request.out_dir.mkdir(parents=True, exist_ok=True)
        start = time.time()
        results = request.out_dir / "results.jsonl"
        rows = []
        for i in range(self.configs):
            await asyncio.sleep(self.step_s)
            row = ConfigResult(index=i, config={"P": i}, status="ok", time_ms=1.0 + i / 10, repeats=3)  # type: ignore[arg-type]
            rows.append(row)
            with open(results, "a", encoding="utf-8") as f:
                f.write(row.model_dump_json() + "\n")
            on_progress(Progress(evaluated=i + 1, valid=i + 1, space_size=self.configs, best_ms=1.0,
                                 elapsed_s=time.time() - start))  # fmt: skip
        summary = TuneSummary(
            ok=True, problem=request.problem_dir.name, kernel_file=str(request.kernel), spec_file=str(request.spec),
            device="fake", arch="sm_90", space_size=self.configs, evaluated=self.configs, valid=self.configs,
            by_status={"ok": self.configs}, strategy="exhaustive", seed=request.seed, best=rows[0],
            confirmed_on_fresh_input=True, reference_ms=10.0, reference_source="fake", speedup=10.0,
            wall_s=time.time() - start, results_file=str(results),
        )  # fmt: skip
        (request.out_dir / "summary.json").write_text(summary.model_dump_json(indent=2))
        return summary


class QuickFakeTuner(FakeTuner):
    """The stock FAKE tuner with a short pause, so concurrent jobs overlap on the cluster."""

    def __init__(self) -> None:
        super().__init__(delay_s=1.5)
