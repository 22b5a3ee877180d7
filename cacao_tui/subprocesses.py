"""Running child processes from the asyncio engine: own process group, streamed pipes, clean kills.

Every child runs in a new session (its own process group), so a timeout or a cancel
kills the whole group (TERM, a grace period, then KILL) and the child is always awaited.
Pipes are read while it runs, line by line, with no limit on line length.

A child gets an allow-listed environment (``ktt.procs.child_env``: no API keys, nothing
from .env files) and ``KTT_PARENT_PID``: the children are ktt programs, which then ask the
kernel to kill them when this process dies (the event loop's thread, which spawns them,
lives as long as the process), so SIGKILL of cacao leaves no ``ktt check`` running on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ktt.procs import PARENT_ENV, child_env

GRACE_S = 3.0
_STREAM_LIMIT = 64 * 1024 * 1024  # compiler output lines can be very long


@dataclass
class ProcessResult:
    returncode: int | None  # None when killed by us
    stdout_lines: list[str]
    stderr: str
    timed_out: bool
    seconds: float


async def _read_lines(stream: asyncio.StreamReader, on_line: Callable[[str], None] | None, sink: list[str]) -> None:
    while True:
        raw = await stream.readline()
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace").rstrip("\n")
        sink.append(line)
        if on_line is not None:
            on_line(line)


def _signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def _terminate(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    _signal_group(proc, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), GRACE_S)
    except TimeoutError:
        _signal_group(proc, signal.SIGKILL)
        await proc.wait()


async def _wait_unpaused(readers: asyncio.Future, timeout_s: float | None, paused: Callable[[], bool] | None) -> None:
    """Wait for ``readers``; TimeoutError once ``timeout_s`` of unpaused time has passed."""
    if timeout_s is None or paused is None:
        await asyncio.wait_for(asyncio.shield(readers), timeout_s)
        return
    loop = asyncio.get_running_loop()
    used = 0.0
    last = loop.time()
    was_paused = paused()
    while True:
        # Looked at ten times a second: an interval in which the state changed counts half (the
        # change came somewhere in it), so a pause is measured to a tenth of a second, not to the
        # whole second a coarser poll would give the state it ends in.
        done, _ = await asyncio.wait({readers}, timeout=min(0.1, max(0.01, timeout_s - used)))
        now = loop.time()
        is_paused = paused()
        if not (was_paused and is_paused):
            used += (now - last) * (1.0 if not (was_paused or is_paused) else 0.5)
        last, was_paused = now, is_paused
        if done:
            readers.result()
            return
        if used >= timeout_s:
            raise TimeoutError


async def run_streaming(
    argv: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    on_stdout_line: Callable[[str], None] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    keep_stderr_chars: int = 200_000,
    paused: Callable[[], bool] | None = None,
) -> ProcessResult:
    """Run ``argv``; call ``on_stdout_line`` for each stdout line as it arrives.

    ``env`` (default: ours) is reduced to the allow-list before the child sees it.
    ``timeout_s`` counts only the time ``paused()`` is false (a tuner waiting for a GPU
    that another process holds is not late).
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    child = child_env(env)
    child[PARENT_ENV] = str(os.getpid())
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd) if cwd else None,
        env=child,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        limit=_STREAM_LIMIT,
    )
    out: list[str] = []
    err: list[str] = []
    assert proc.stdout is not None and proc.stderr is not None
    readers = asyncio.gather(
        _read_lines(proc.stdout, on_stdout_line, out), _read_lines(proc.stderr, on_stderr_line, err)
    )
    timed_out = False
    try:
        await _wait_unpaused(readers, timeout_s, paused)
        await proc.wait()
    except TimeoutError:
        timed_out = True
        await _terminate(proc)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(readers, GRACE_S)
    except BaseException:
        # Cancelled (or a subscriber raised): kill the group, await it, then re-raise.
        await asyncio.shield(_terminate(proc))
        readers.cancel()
        with contextlib.suppress(BaseException):
            await readers
        raise
    stderr = "\n".join(err)
    return ProcessResult(
        returncode=None if timed_out else proc.returncode,
        stdout_lines=out,
        stderr=stderr[-keep_stderr_chars:],
        timed_out=timed_out,
        seconds=loop.time() - start,
    )
