"""ktt.timing.measure on a scripted fake GPU: warm-up, the repetition count and the early stops.

The fake GPU returns, for each timed span, the next duration from a script, so the tests see
exactly how many runs measure() asks for and which time it reports. No CUDA is involved.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ktt.timing import TimingSettings, measure


class ScriptedFakeGpu:
    """Stands in for ktt.device.Gpu: events are names, elapsed_ms() reads the next scripted span."""

    def __init__(self, spans_ms: Iterator[float]) -> None:
        self.spans = spans_ms
        self.runs = 0
        self.syncs = 0

    def events(self, name: str, n: int) -> list[str]:
        return [f"{name}{i}" for i in range(n)]

    def record(self, event: str) -> None:
        pass

    def sync(self) -> None:
        self.syncs += 1

    def elapsed_ms(self, start: str, end: str) -> float:
        return next(self.spans)


def _timed(spans: list[float], best_ms: float | None, warmed: bool = False, **settings: float):
    gpu = ScriptedFakeGpu(iter(spans))

    def run(between: list | None) -> None:
        gpu.runs += 1

    timing = measure(gpu, run, TimingSettings(**settings), flush=None, best_ms=best_ms, warmed=warmed)  # type: ignore[arg-type]
    return timing, gpu.runs


def test_a_contender_is_timed_until_the_target_time() -> None:
    # 1 ms per run: one warm-up run (1 ms reaches warmup_ms), then 15 repetitions for 15 ms.
    timing, runs = _timed([1.0] * 40, best_ms=1.0)
    assert runs == 1 + 15
    assert len(timing.samples) == 15 and not timing.early_stop
    assert timing.median_ms == pytest.approx(1.0)


def test_warmed_skips_the_warm_up_runs() -> None:
    timing, runs = _timed([1.0] * 40, best_ms=1.0, warmed=True)
    assert runs == 15 and len(timing.samples) == 15


def test_three_times_slower_on_the_first_repetition_stops_at_once() -> None:
    timing, runs = _timed([4.0] * 40, best_ms=1.0, warmed=True)
    assert runs == 1 and timing.early_stop and timing.samples == [4.0]


def test_twice_as_slow_over_three_repetitions_stops() -> None:
    timing, runs = _timed([2.5] * 40, best_ms=1.0, warmed=True)
    assert runs == 3 and timing.early_stop and timing.median_ms == pytest.approx(2.5)


def test_clearly_slower_stops_after_the_minimum_repetitions() -> None:
    timing, runs = _timed([1.4] * 40, best_ms=1.0, warmed=True)
    assert runs == 5 and timing.early_stop


def test_within_a_quarter_of_the_best_is_still_a_contender() -> None:
    timing, runs = _timed([1.2] * 40, best_ms=1.0, warmed=True)
    assert not timing.early_stop
    assert runs == len(timing.samples) == 13  # 13 x 1.2 ms >= 15 ms


def test_a_slow_first_repetition_that_recovers_is_not_stopped_early() -> None:
    # The first repetition is 2.9x (under the 3x first-repetition bound), the rest at the best.
    timing, _ = _timed([2.9] + [1.0] * 40, best_ms=1.0, warmed=True)
    assert not timing.early_stop
    assert timing.median_ms == pytest.approx(1.0)


def test_without_a_best_nothing_stops_early() -> None:
    timing, _ = _timed([10.0] * 40, best_ms=None, warmed=True)
    assert not timing.early_stop and len(timing.samples) == 5
