"""A clean stop (Ctrl-C, `S`) ends every branch before its next step, even when the step that
was running swallowed the cancellation (asyncio.wait_for on Python 3.11 can lose a cancel that
races with a finishing await); the run ends interrupted and --resume finishes it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from cacao_tui.engine.events import EventBus, TuningFinished
from cacao_tui.ktt_client import TuneRequest
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import FinalResults
from ktt.protocol import Progress, TuneSummary
from tests.engine.conftest import make_engine
from tests.engine.scenario import Scenario
from tests.fake_tuner import FakeTuner


class DeafFakeTuner(FakeTuner):
    """A FAKE tuner whose tune takes a while and ignores cancellation: it finishes its job
    and returns normally, as a step whose cancel was lost in a race would."""

    def __init__(self) -> None:
        super().__init__()
        self.tuned: list[str] = []

    async def tune(self, request: TuneRequest, on_progress: Callable[[Progress], None]) -> TuneSummary:
        work = asyncio.ensure_future(asyncio.sleep(0.3))
        while not work.done():
            try:
                await asyncio.shield(work)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                assert current is not None
                current.uncancel()  # the cancel is lost: the job carries on to its end
        self.tuned.append(f"{request.kernel.parent.parent.name}/{request.kernel.parent.name}")
        return await super().tune(request, on_progress)


async def test_a_stop_ends_branches_whose_running_step_ignored_the_cancel(mmul_dir: Path) -> None:
    bus = EventBus()
    events: list[object] = []
    bus.subscribe(events.append)
    tuner = DeafFakeTuner()
    engine = make_engine(mmul_dir, Scenario(strategies=["alpha", "beta"]).provider(), bus=bus, max_iter=3,
                         tuner=tuner)  # fmt: skip
    stopping: list[object] = []

    def stop_at_first_tuning(event: object) -> None:
        if isinstance(event, TuningFinished) and not stopping:
            stopping.append(asyncio.ensure_future(engine.stop()))

    bus.subscribe(stop_at_first_tuning)
    first = await asyncio.wait_for(engine.run(), 60)
    assert first.status == "interrupted"
    # Both branches were tuning iteration 1 when the stop came; neither took another step.
    assert sorted(tuner.tuned) == ["b1-alpha/iter1", "b2-beta/iter1"], tuner.tuned
    assert "profile" not in tuner.calls
    finished = [(e.branch, e.iteration) for e in events if isinstance(e, TuningFinished)]
    assert all(i == 1 for _, i in finished), finished

    resumed = make_engine(mmul_dir, Scenario(strategies=["alpha", "beta"]).provider(), max_iter=3, resumed=True,
                          tuner=FakeTuner())  # fmt: skip
    assert (await resumed.run()).status == "ok"
    final = read_model(RunLayout(mmul_dir).final_results, FinalResults)
    assert final.best is not None and final.best.iteration == 3
