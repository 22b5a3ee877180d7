"""Child processes: each in its own process group, killed as a group, always awaited.

The tuner starts a GPU worker, a host-reference runner and ncu. Any of them can hang
(a kernel in an infinite loop, a reference that never returns), so every child gets its
own session, and stopping it means TERM to the whole group, a grace period, then KILL,
and a ``wait`` so no zombie is left. Pipes are drained by threads while the child runs,
because compiler and profiler output can be long enough to fill a pipe and block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


def exit_when_parent_dies(poll_s: float = 0.5) -> None:
    """Exit this process once its parent is gone (no orphaned GPU workers holding the device).

    A polling thread rather than PR_SET_PDEATHSIG: that signal fires when the *thread* that
    started the child exits, and the tuner restarts its worker from a thread that ends
    before the run does.
    """
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def spawn(
    cmd: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    stdin: int | None = subprocess.DEVNULL,
    text: bool = True,
) -> subprocess.Popen:
    """Start ``cmd`` in a new session (its own process group), with stdout and stderr piped."""
    return subprocess.Popen(
        list(cmd),
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=text,
        bufsize=1 if text else -1,
        start_new_session=True,
    )


def kill_group(proc: subprocess.Popen, grace_s: float = 2.0) -> int | None:
    """TERM the child's process group, wait ``grace_s``, then KILL it; always reap the child.

    The child was started with ``start_new_session``, so its group id is its pid; the
    group is signalled even when the leader already exited, to reach what it left behind.
    """
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process that survives SIGKILL
        return None


@dataclass
class PipeReader:
    """Drains one pipe in a thread; keeps the last ``keep`` lines and forwards each to ``sink``."""

    stream: object
    keep: int = 400
    sink: Callable[[str], None] | None = None
    lines: deque[str] = field(default_factory=deque)
    thread: threading.Thread | None = None

    def start(self) -> PipeReader:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        for line in iter(self.stream.readline, ""):  # type: ignore[attr-defined]
            line = line.rstrip("\n")
            self.lines.append(line)
            while len(self.lines) > self.keep:
                self.lines.popleft()
            if self.sink is not None:
                with contextlib.suppress(Exception):
                    self.sink(line)

    def join(self, timeout: float = 5.0) -> None:
        if self.thread is not None:
            self.thread.join(timeout)

    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Completed:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float


def run(
    cmd: Sequence[str],
    *,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    keep_lines: int = 100_000,
) -> Completed:
    """Run ``cmd`` to completion (or kill its group at ``timeout_s``), reading both pipes as it runs."""
    start = time.monotonic()
    proc = spawn(cmd, env=env, cwd=cwd)
    out = PipeReader(proc.stdout, keep=keep_lines).start()
    err = PipeReader(proc.stderr, keep=keep_lines).start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        code = kill_group(proc)
        out.join()
        err.join()
    return Completed(code, out.text(), err.text(), timed_out, time.monotonic() - start)
