"""Timing a launch sequence: CUDA events, warm-up, repeats, median, L2 flush, device-wide sync.

Each repetition: flush L2 (write a buffer twice the L2's size) unless the problem opts
out, record the start event, run the whole launch sequence (side streams fork from and
join back to the main stream), record the end event, then synchronise the whole device
before reading it - work hidden on another stream is inside the measured span. The median
of the repetitions is the time; min and max are kept for the spread.

Repetitions of a configuration that cannot be the best are GPU time the search could spend on
the next one, so timing stops early (flag ``early_stop``) once the configuration is clearly
slower than the best confirmed time: three times slower on the first repetition, twice as slow
over three, or 25 % slower over the minimum count of repetitions. A contender is timed in full.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from ktt.device import Gpu

FLOOR_MARGIN = 0.9  # a time below 90 % of the physical floor is suspect


@dataclass
class TimingSettings:
    min_reps: int = 5
    max_reps: int = 30
    target_ms: float = 15.0  # stop once this much time was measured (and min_reps reached)
    warmup_ms: float = 1.0  # warm-up runs until at least this much GPU time (at least one run)
    early_stop_factor: float = 2.0  # median of 3 repetitions this many times the best: stop
    first_rep_factor: float = 3.0  # the first repetition alone this many times the best: stop
    contender_factor: float = 1.25  # median of min_reps repetitions this many times the best: stop
    flush_l2: bool = True


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    samples: list[float]
    launch_ms: list[float] | None = None
    early_stop: bool = False


class L2Flush:
    def __init__(self, gpu: Gpu) -> None:
        self.gpu = gpu
        self.words = max(1, 2 * gpu.props.l2_bytes // 4)
        self.ptr = gpu.alloc(self.words * 4)
        self.n = 0

    def __call__(self) -> None:
        self.n += 1
        self.gpu.memset32(self.ptr, self.n, self.words)


RunFn = Callable[[list | None], None]


def measure(
    gpu: Gpu,
    run: RunFn,
    settings: TimingSettings,
    *,
    flush: L2Flush | None,
    best_ms: float | None = None,
    launch_events: int = 0,
    before_rep: Callable[[], None] | None = None,
    beat: Callable[[], None] | None = None,
    warmed: bool = False,
) -> Timing:
    """Time ``run`` (one launch sequence, given a list of events to record between launches).

    ``warmed``: the caller has just run the sequence (the worker's race re-run: module loaded,
    buffers touched, clocks up), so the warm-up runs are skipped.
    """
    start, end = gpu.events("timing", 2)
    between = gpu.events("between", launch_events + 1) if launch_events > 1 else None

    # Warm-up: module load, first touch, clocks.
    warm = 0.0
    runs = 0
    while not warmed and (runs == 0 or (warm < settings.warmup_ms and runs < 20)):
        if before_rep:
            before_rep()
        gpu.record(start)
        run(None)
        gpu.record(end)
        gpu.sync()
        warm += gpu.elapsed_ms(start, end)
        runs += 1
    if beat:
        beat()

    samples: list[float] = []
    per_launch: list[list[float]] = []
    early = False
    while len(samples) < settings.max_reps:
        if before_rep:
            before_rep()
        if flush is not None and settings.flush_l2:
            flush()
        gpu.record(start)
        run(between)
        gpu.record(end)
        gpu.sync()  # the whole device, not one stream
        samples.append(gpu.elapsed_ms(start, end))
        if between is not None:
            per_launch.append([gpu.elapsed_ms(between[i], between[i + 1]) for i in range(launch_events)])
        if len(samples) >= settings.min_reps and sum(samples) >= settings.target_ms:
            break
        if best_ms is not None and _not_a_contender(samples, best_ms, settings):
            early = True
            break
        if beat and len(samples) % 10 == 0:
            beat()
    launch_ms = None
    if per_launch:
        launch_ms = [statistics.median(col) for col in zip(*per_launch, strict=True)]
    return Timing(statistics.median(samples), min(samples), max(samples), samples, launch_ms, early)


def _not_a_contender(samples: list[float], best_ms: float, settings: TimingSettings) -> bool:
    """Whether the repetitions so far already show a configuration clearly slower than the best."""
    n = len(samples)
    if n == 1:
        return samples[0] > settings.first_rep_factor * best_ms
    median = statistics.median(samples)
    if n >= 3 and median > settings.early_stop_factor * best_ms:
        return True
    return n >= settings.min_reps and median > settings.contender_factor * best_ms


def measure_bandwidth(gpu: Gpu, nbytes: int = 512 * 1024 * 1024, reps: int = 5) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written (best of reps)."""
    free, _ = gpu.mem_info()
    nbytes = min(nbytes, max(64 * 1024 * 1024, free // 8))
    src, dst = gpu.alloc(nbytes), gpu.alloc(nbytes)
    try:
        start, end = gpu.events("timing", 2)
        gpu.d2d(dst, src, nbytes)
        gpu.sync()
        best = 0.0
        for _ in range(reps):
            gpu.record(start)
            gpu.d2d(dst, src, nbytes)
            gpu.record(end)
            gpu.sync()
            ms = gpu.elapsed_ms(start, end)
            best = max(best, 2 * nbytes / (ms * 1e-3) / 1e9)
        return best
    finally:
        gpu.free(src)
        gpu.free(dst)


def floor_ms(
    nbytes: float | None, flops: float | None, bandwidth_gbs: float | None, gflops: float | None
) -> float | None:
    """The larger of bytes / bandwidth and flops / peak, in ms (None when neither is known)."""
    terms = []
    if nbytes and bandwidth_gbs:
        terms.append(nbytes / (bandwidth_gbs * 1e9) * 1e3)
    if flops and gflops:
        terms.append(flops / (gflops * 1e9) * 1e3)
    return max(terms) if terms else None
