"""Run the engine on the mmul replay session with the FAKE tuner, in its own process.

Used by the crash-safety tests: ``--kill-after N`` SIGKILLs this process right after the
N-th event, which lands mid-step, mid-write or between steps depending on N.

    python -m tests.engine.harness PROBLEM_DIR [--resume] [--kill-after N]
        [--kill-when BRANCH:ITERATION:STATUS] [--max-iter N] [--strategies N] [--budget-iters N]
        [--concurrency N] [--samples K] [--fake-gpu] [--phase llm|gpu]

``--kill-when`` SIGKILLs it when that iteration reaches that status (an IterationStatusChanged).
``--phase`` runs one phase of a split run (the model's has no GPU to lease: NoDevices).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from cacao_tui.engine.events import EventBus, IterationStatusChanged, LLMCallEvent
from cacao_tui.llm import ProviderChoice
from cacao_tui.llm.factory import build_provider
from cacao_tui.nodes.context import NoDevices
from tests.engine.conftest import make_engine
from tests.engine.fakes import FakeGpuTuner


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem", type=Path)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--kill-after", type=int, default=0)
    ap.add_argument("--kill-when", default=None)
    ap.add_argument("--max-iter", type=int, default=5)
    ap.add_argument("--strategies", type=int, default=4)
    ap.add_argument("--budget-iters", type=int, default=None)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--fake-gpu", action="store_true", help="the FAKE GPU tuner (tests/engine/fakes.py)")
    ap.add_argument("--phase", choices=("llm", "gpu"), default=None)
    args = ap.parse_args()

    bus = EventBus()
    count = 0

    def on_event(event) -> None:
        nonlocal count
        count += 1
        sys.stdout.write(f"{event.seq} {event.type}\n")
        sys.stdout.flush()
        if args.kill_after and count >= args.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        where = f"{event.branch}:{event.iteration}:{event.status}" if isinstance(event, IterationStatusChanged) else ""
        if args.kill_when and where == args.kill_when:
            os.kill(os.getpid(), signal.SIGKILL)

    bus.subscribe(on_event)
    choice = ProviderChoice(provider="replay", model="replay", source="test")
    provider = build_provider(choice, replay_from=args.problem / "session.jsonl")
    engine = make_engine(
        args.problem, provider, bus=bus, max_iter=args.max_iter, max_depth=2, n_strategies=args.strategies,
        resumed=args.resume, budget_iters=args.budget_iters, concurrency=args.concurrency, samples=args.samples,
        tuner=FakeGpuTuner() if args.fake_gpu else None,
    )  # fmt: skip
    engine.deps.phase = args.phase
    if args.phase == "llm":
        engine.deps.devices = NoDevices()
    # As launch.py does: every call is an event (the totals test counts them).
    engine.deps.llm.on_call = lambda r: bus.emit(LLMCallEvent.of(r))
    finished = asyncio.run(engine.run())
    print(f"FINISHED {finished.status}")
    return 0 if finished.status in ("ok", "waiting") else 1


if __name__ == "__main__":
    raise SystemExit(main())
