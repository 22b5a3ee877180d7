"""Event-loop lag of the Textual app under a flood of log lines.

The engine runs in the app's asyncio loop, so every millisecond the UI spends rendering is
a millisecond the engine (and the user's key presses) wait. This drives the real CacaoApp
(headless driver, full compositing) with LOG lines at a fixed rate spread over N branches,
plus tuning progress and status changes, and measures how late a 10 ms sleep wakes up.
Target: p99 lag <= 50 ms at 2,000 lines/s across 16 branches.

    python bench/ui_event_lag.py [--rate 2000] [--branches 16] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.engine import events as ev
from cacao_tui.engine.events import EventBus
from cacao_tui.store.layout import RunLayout

PROBE_S = 0.010
TICK_S = 0.010


class IdleEngine:
    """A stand-in EngineControl that accepts every call and does nothing (the bench sends events itself)."""

    def __init__(self, layout: RunLayout) -> None:
        self.layout = layout

    def pause_branch(self, name: str) -> None: ...
    def resume_branch(self, name: str) -> None: ...
    def toggle_pause(self, name: str) -> bool:
        return False

    def pause_all(self) -> None: ...
    def resume_all(self) -> None: ...
    def kill_branch(self, name: str) -> None: ...
    def change_max_iter(self, name: str, delta: int) -> int:
        return 5

    def retry_branch(self, name: str) -> None: ...
    def is_running(self) -> bool:
        return True

    async def stop(self) -> None: ...


@dataclass
class Result:
    scenario: str
    size: str
    lines: int
    seconds: float
    lags_ms: list[float]
    flushes: int
    dropped: int

    def quantiles(self) -> list[float]:
        lags = sorted(self.lags_ms)
        return statistics.quantiles(lags, n=100) if len(lags) >= 2 else [lags[0]] * 99

    def row(self) -> list[str]:
        lags = sorted(self.lags_ms)
        q = self.quantiles()
        return [
            self.scenario,
            self.size,
            f"{self.lines / self.seconds:,.0f}",
            f"{statistics.median(lags):.1f}",
            f"{q[94]:.1f}",
            f"{q[98]:.1f}",
            f"{lags[-1]:.1f}",
            str(self.flushes),
            str(self.dropped),
        ]


async def _produce(bus: EventBus, rate: int, branches: int, seconds: float) -> int:
    per_tick = rate * TICK_S
    owed = 0.0
    sent = 0
    start = time.perf_counter()
    next_tick = start
    progress_every = max(1, int(0.5 / TICK_S))  # each branch reports tuning progress twice a second
    tick = 0
    while (now := time.perf_counter()) - start < seconds:
        owed += per_tick
        while owed >= 1:
            b = sent % branches
            bus.emit(
                ev.LogLine(
                    message=f"compile config {sent}: nvrtc ok, 31 registers", branch=f"b{b:02d}", iteration=1 + sent % 3
                )
            )
            sent += 1
            owed -= 1
        if tick % progress_every == 0:
            for b in range(branches):
                bus.emit(
                    ev.TuningProgress(
                        branch=f"b{b:02d}",
                        iteration=1,
                        evaluated=tick,
                        valid=tick,
                        space_size=10_000,
                        best_ms=1.0 + b / 10,
                        elapsed_s=now - start,
                        budget_s=seconds,
                    )
                )
        if tick % 100 == 0:
            b = (tick // 100) % branches
            bus.emit(ev.IterationStatusChanged(branch=f"b{b:02d}", iteration=1 + tick // 100, status="running"))
        tick += 1
        next_tick += TICK_S
        await asyncio.sleep(max(0.0, next_tick - time.perf_counter()))
    return sent


async def _probe(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        await asyncio.sleep(PROBE_S)
        lags.append(max(0.0, (time.perf_counter() - t0 - PROBE_S) * 1000))


async def run_scenario(
    name: str,
    size: tuple[int, int],
    rate: int,
    branches: int,
    seconds: float,
    select: str | None,
    tab: str,
    needle: str,
) -> Result:
    from cacao_tui.ui.app import CacaoApp

    with tempfile.TemporaryDirectory() as tmp:
        layout = RunLayout(Path(tmp) / "bench")
        bus = EventBus()
        app = CacaoApp(
            engine=IdleEngine(layout),
            bus=bus,
            run_info=ev.RunStarted(
                problem="bench",
                problem_dir=tmp,
                provider="none",
                model="none",
                gpus=[0],
                max_iter=5,
                max_depth=2,
                n_strategies=branches,
            ),
        )
        async with app.run_test(size=size) as pilot:
            for b in range(branches):
                bus.emit(
                    ev.BranchAdded(
                        branch=f"b{b:02d}", title=f"strategy {b}", description="", max_iter=5, status="running"
                    )
                )
            await pilot.pause(0.3)
            screen = app.main_screen
            if select is not None:
                screen.branch_tree.select_branch(select)
            screen.action_show_tab(tab)
            if needle:
                screen.details.log_pane._set_needle(needle)
            await pilot.pause(0.3)
            flushes = app.flushes
            lags: list[float] = []
            stop = asyncio.Event()
            probe = asyncio.create_task(_probe(lags, stop))
            t0 = time.perf_counter()
            sent = await _produce(bus, rate, branches, seconds)
            elapsed = time.perf_counter() - t0
            stop.set()
            await probe
            return Result(
                name, f"{size[0]}x{size[1]}", sent, elapsed, lags, app.flushes - flushes, app.dropped_log_lines
            )


async def run_baseline(rate: int, branches: int, seconds: float) -> Result:
    bus = EventBus()
    lags: list[float] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(lags, stop))
    t0 = time.perf_counter()
    sent = await _produce(bus, rate, branches, seconds)
    elapsed = time.perf_counter() - t0
    stop.set()
    await probe
    return Result("no app (bus only)", "-", sent, elapsed, lags, 0, 0)


SCENARIOS = (
    # name, size, selected branch, tab, filter
    ("run selected, Log tab", (80, 24), None, "log", ""),
    ("run selected, Log tab", (200, 60), None, "log", ""),
    ("one branch, Log tab", (200, 60), "b03", "log", ""),
    ("run, Log filtered", (200, 60), None, "log", "config 1"),
    ("one branch, Tuning tab", (200, 60), "b03", "tuning", ""),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=2000, help="log lines per second (default 2000)")
    parser.add_argument("--branches", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0, help="per scenario")
    parser.add_argument("--target-ms", type=float, default=50.0, help="p99 lag target")
    args = parser.parse_args()

    async def all_runs() -> list[Result]:
        results = [await run_baseline(args.rate, args.branches, args.seconds)]
        for name, size, select, tab, needle in SCENARIOS:
            results.append(await run_scenario(name, size, args.rate, args.branches, args.seconds, select, tab, needle))
        return results

    results = asyncio.run(all_runs())
    head = ["scenario", "size", "lines/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "flushes", "dropped"]
    rows = [head] + [r.row() for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    print(f"UI event-loop lag: {args.rate} lines/s over {args.branches} branches, {args.seconds:g} s per scenario")
    machine = f"python {platform.python_version()} on {platform.machine()} {platform.system()}"
    print(f"{machine}; probe sleep {PROBE_S * 1000:g} ms")
    for i, row in enumerate(rows):
        print("  ".join(c.ljust(w) if j == 0 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    worst = max(r.quantiles()[98] for r in results[1:])
    ok = worst <= args.target_ms
    print(f"worst p99 lag with the app: {worst:.1f} ms (target <= {args.target_ms:g} ms): {'OK' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
