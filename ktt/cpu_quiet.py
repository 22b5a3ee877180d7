"""While a CPU reference is timed, no CPU-heavy job of ktt runs on the machine.

A cpu_c or numpy reference is timed by wall clock. A compile (the NVRTC pools of ``ktt tune``
and ``ktt check``, the host compiler building a reference) or another reference computing its
outputs on the same cores slows it by an amount that changes from one run to the next, and that
amount goes straight into every speedup's denominator. So:

- a CPU-heavy job holds a *shared* ``flock`` on ``cacao-cpu-quiet.lock`` while it works
  (``heavy()``, or a ``HeavyHold`` that a compile pool takes while it has jobs in flight);
- the timing holds it *exclusively* (``quiet()``): it waits until the jobs at work finish, and
  new ones wait until the timing is done. A turnstile, ``cacao-cpu-gate.lock``, gives the timing
  precedence: a job passes the gate (shared, for an instant) before it takes its shared lock,
  and the timing holds the gate while it waits, so a stream of compiles cannot starve it.

The files sit beside the GPU locks (``KTT_GPU_LOCK_DIR``, default /tmp): machine-wide, so another
run's compiles wait too. Locks are ``flock``s: the kernel drops them when their holder dies,
SIGKILL included. Every wait is bounded; past it the work goes on and says so (the timing's
warning names what it could not exclude). ``KTT_CPU_QUIET_TRACE=FILE`` appends one line per
held section, ``kind pid start end`` (wall-clock seconds), for a look at what overlapped.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ktt.gpu_lock import lock_dir

QUIET_NAME = "cacao-cpu-quiet.lock"
GATE_NAME = "cacao-cpu-gate.lock"
POLL_S = 0.05
HEAVY_WAIT_S = 900.0  # a job waits this long for a timing to end, then goes on (it never hangs)
QUIET_WAIT_S = 600.0  # a timing waits this long for the running jobs, then is taken anyway (warned)
TRACE_ENV = "KTT_CPU_QUIET_TRACE"


def _open(name: str) -> int | None:
    """A descriptor of the lock file (created world-writable, never through a link); None when the
    directory cannot hold it (the work then goes on unsynchronised rather than failing)."""
    path = lock_dir() / name
    flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)
        return fd
    except PermissionError:
        with contextlib.suppress(OSError):
            return os.open(path, os.O_RDONLY | flags)
    except OSError:
        pass
    return None


def _take(fd: int, mode: int, deadline: float | None) -> bool:
    """flock ``mode`` on ``fd``, polling until ``deadline`` (None: one try). True when taken."""
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is None or time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        except OSError:
            return False


def _close(fd: int | None) -> None:
    if fd is not None and fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


def _trace(kind: str, start: float) -> None:
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    with contextlib.suppress(OSError), Path(path).open("a", encoding="utf-8") as f:
        f.write(f"{kind} {os.getpid()} {start:.6f} {time.time():.6f}\n")


class HeavyHold:
    """A shared hold of the quiet lock, taken without blocking: a compile pool's dispatcher takes it
    before it starts jobs and lets it go when none is in flight. ``take()`` is False while a CPU
    reference is being timed (or waited for): start nothing then, and ask again a moment later."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._since = 0.0

    @property
    def held(self) -> bool:
        return self._fd is not None

    def take(self) -> bool:
        """Whether new work may start now. Asked again while held, it looks at the gate again: a
        timing waiting there stops new work (the work in flight ends, then ``release()``)."""
        gate = _open(GATE_NAME)
        if gate is None:
            return True  # no lock directory: nothing to wait for
        try:
            if not _take(gate, fcntl.LOCK_SH, None):
                return False  # a timing holds the gate
            if self._fd is not None:
                return True
            fd = _open(QUIET_NAME)
            if fd is None:
                return True
            if not _take(fd, fcntl.LOCK_SH, None):
                _close(fd)
                return False
            self._fd, self._since = fd, time.time()
            return True
        finally:
            _close(gate)

    def release(self) -> None:
        if self._fd is not None:
            _close(self._fd)
            self._fd = None
            _trace("heavy", self._since)


@contextlib.contextmanager
def heavy(wait_s: float = HEAVY_WAIT_S) -> Iterator[bool]:
    """Hold the shared lock around CPU-heavy work, waiting (up to ``wait_s``) while a CPU reference
    is timed. Yields False when the wait ran out and the work goes on anyway."""
    deadline = time.monotonic() + wait_s
    hold = HeavyHold()
    taken = hold.take()
    while not taken and time.monotonic() < deadline:
        time.sleep(POLL_S)
        taken = hold.take()
    try:
        yield taken
    finally:
        hold.release()


@contextlib.contextmanager
def quiet(wait_s: float = QUIET_WAIT_S) -> Iterator[bool]:
    """Hold the lock exclusively while a CPU reference is timed: no heavy job starts, and the ones at
    work are waited for (up to ``wait_s``). Yields True when the machine was quiet, False when the
    wait ran out (or the lock could not be used) and the timing goes on beside other work."""
    deadline = time.monotonic() + wait_s
    gate = _open(GATE_NAME)
    fd = _open(QUIET_NAME)
    quiet_now = False
    try:
        if gate is not None and fd is not None and _take(gate, fcntl.LOCK_EX, deadline):
            quiet_now = _take(fd, fcntl.LOCK_EX, deadline)
        start = time.time()
        try:
            yield quiet_now
        finally:
            _trace("quiet" if quiet_now else "unquiet", start)
    finally:
        _close(fd)
        _close(gate)
