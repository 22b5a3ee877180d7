"""Starts one ``cacao --dir P --no-ui`` per problem, as slots come free, and waits for all.

Each run is an ordinary run of its own process (its lock, its output/, its --resume), so a
suite adds no second way to run a problem; its lines go to ``<out>/logs/<name>.log``. A
run is a trusted child (our own program, which needs the user's provider keys), in a
session of its own: stopping the suite stops each run cleanly (SIGINT, like Ctrl-C), then
kills what is still running after a grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.suite.slots import Slot, SlotPool
from ktt.terminal_text import safe_text

STOP_GRACE_S = 60.0


@dataclass
class SuiteRun:
    problem: Path
    name: str  # unique within the suite: the log's name
    slot: str = ""
    exit_code: int | None = None
    seconds: float = 0.0
    log: Path | None = None


def unique_names(problems: list[Path]) -> list[str]:
    """One name per problem, none given twice (each names its log file): a directory's own name,
    else ``NAME-2``, ``NAME-3``, ... whichever is not taken yet, by another problem's suffixed name
    or by a problem really called ``NAME-2`` (before, ``x``, ``x`` and ``x-2`` shared one log)."""
    taken: set[str] = set()
    own = {q.name for q in problems}
    names = []
    for p in problems:
        name, k = p.name, 2
        while name in taken or (name != p.name and name in own):
            name, k = f"{p.name}-{k}", k + 1
        taken.add(name)
        names.append(name)
    return names


# A run's log: never written through a link, never waiting on a FIFO that someone put there.
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


async def _run_one(run: SuiteRun, slot: Slot, flags: list[str], out: Path, say: Callable[[str], None]) -> None:
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(run.problem), "--no-ui", *slot.flags, *flags]
    run.slot = slot.label
    run.log = out / "logs" / f"{run.name}.log"
    say(safe_text(f"suite: {run.name}: started on {socket.gethostname()} ({slot.label})"))  # a directory's name
    start = time.monotonic()
    try:
        log_fd = os.open(run.log, _LOG_FLAGS, 0o644)
    except OSError as exc:
        run.exit_code, run.seconds = 2, 0.0
        say(safe_text(f"suite: {run.name}: not started: cannot write {run.log} ({exc.strerror})"))
        return
    with os.fdopen(log_fd, "wb") as log:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            run.exit_code = await proc.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)  # the run stops cleanly and can be resumed
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), STOP_GRACE_S)
            except (TimeoutError, asyncio.CancelledError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
            run.exit_code = proc.returncode
            raise
        finally:
            run.seconds = time.monotonic() - start
    say(safe_text(f"suite: {run.name}: finished on {slot.label} (exit {run.exit_code}) in {run.seconds:.1f} s"))


async def run_suite(
    problems: list[Path], pool: SlotPool, flags: list[str], out: Path, say: Callable[[str], None] = print,
    names: list[str] | None = None, own_flags: list[list[str]] | None = None,
) -> list[SuiteRun]:  # fmt: skip
    """Every problem's run, at most ``pool.size`` at once; returns them in the problems' order.
    ``names``: the runs' log names (default: the directories'); ``own_flags``: each run's flags
    after the common ones (``cacao suite --models``: its ``--model``)."""
    (out / "logs").mkdir(parents=True, exist_ok=True)
    runs = [SuiteRun(p, n) for p, n in zip(problems, names or unique_names(problems), strict=True)]
    extra = dict(zip((r.name for r in runs), own_flags or [[] for _ in runs], strict=True))

    async def one(run: SuiteRun) -> None:
        async with pool.acquire() as slot:
            await _run_one(run, slot, [*flags, *extra[run.name]], out, say)

    tasks = [asyncio.ensure_future(one(r)) for r in runs]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return runs
