"""One GPU job at a time per device, across processes: a machine-wide lock per GPU.

Two tunings (two cacao runs of different problems, or a run and a hand-started ``python -m
ktt tune``) timing kernels on one GPU at once time them against each other. So ``ktt tune``
and ``ktt profile`` hold ``flock`` on ``/tmp/cacao-gpu-<id>.lock`` (``KTT_GPU_LOCK_DIR``
moves it) for as long as they use the device; ``<id>`` is the GPU's UUID where the
driver gives one (CUDA_VISIBLE_DEVICES renumbers devices, a UUID stays), else its ordinal.
A second job waits, and says once what for: ``waiting for GPU 0 (held by pid N, ktt tune
of problem X since 12:03:05)``. The kernel releases the lock when its holder dies, SIGKILL
included, so a killed job never leaves the GPU locked. (The original tool serialised GPU
jobs inside one engine only, with an asyncio lock; across processes it relied on its web
server.) Inside one engine the GPU scheduler already hands each device to one job at a
time; this lock is what keeps separate processes apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ktt.capped_read import parse_json
from ktt.terminal_text import safe_line

POLL_S = 0.25
_MAX_NOTE = 4096
MAX_PID = 2**22  # Linux's pid_max cannot exceed it


def lock_dir() -> Path:
    return Path(os.environ.get("KTT_GPU_LOCK_DIR") or "/tmp")


def lock_file(ordinal: int, uuid: str | None = None) -> Path:
    key = re.sub(r"[^A-Za-z0-9_.-]", "_", uuid)[:80] if uuid else f"index{int(ordinal)}"
    return lock_dir() / f"cacao-gpu-{key}.lock"


@dataclass(frozen=True)
class GpuHolder:
    pid: int
    host: str
    what: str
    since: str

    def describe(self) -> str:
        when = self.since
        with contextlib.suppress(ValueError, OverflowError):  # "9999-12-31T23:59:59-12:00" leaves any zone
            when = dt.datetime.fromisoformat(self.since).astimezone().strftime("%H:%M:%S")
        text = f"pid {self.pid}, {self.what} since {when}"
        return safe_line(text, 200)


def read_holder(path: Path) -> GpuHolder | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = parse_json(os.read(fd, _MAX_NOTE).decode("utf-8", errors="replace") or "null")
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    return holder_of(data)


def holder_of(note: object) -> GpuHolder | None:
    """A lock note (anyone can write one: the file is world-writable by design) as a holder: a pid
    outside 1..2^22 ("pid": Infinity, 1e400, -1, a string) is no process (0), each text at most
    200 characters; anything but an object is no note."""
    if not isinstance(note, dict):
        return None
    pid = note.get("pid")
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid <= MAX_PID:
        pid = 0
    host, what, since = (str(note.get(k, ""))[:200] if isinstance(note.get(k), str) else "" for k in
                         ("host", "what", "since"))  # fmt: skip
    return GpuHolder(pid, host, what or "another process", since)


def holder_now(ordinal: int, uuid: str | None = None) -> GpuHolder | None:
    """Who holds GPU ``ordinal``'s lock right now, or None when nobody does (the note a killed job
    left says nothing: the kernel released its lock). Looks at the UUID's lock file and the
    ordinal's; probing takes a shared lock for an instant, never the GPU's exclusive one."""
    for path in dict.fromkeys((lock_file(ordinal, uuid), lock_file(ordinal))):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return read_holder(path) or GpuHolder(0, "", "another process", "")
            except OSError:
                continue
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    return None


class GpuLockError(OSError):
    """The lock file cannot be used (a link, not a regular file); one line."""


@dataclass
class GpuLock:
    path: Path
    fd: int
    writable: bool
    waited_s: float

    def release(self) -> None:
        if self.fd < 0:
            return
        if self.writable:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1


def _open(path: Path) -> tuple[int, bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o666)
        writable = True
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # every user's jobs share the GPU (works when we created it)
    except PermissionError:  # another user's lock file: a read-only descriptor can still be locked
        fd = os.open(path, os.O_RDONLY | flags)
        writable = False
    except OSError as exc:
        raise GpuLockError(exc.errno, f"{path}: cannot open the GPU lock ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise GpuLockError(0, f"{path}: is not a regular file; remove it (it is the GPU lock)")
    return fd, writable


def _say(message: str) -> None:
    print(f"ktt: {message}", file=sys.stderr, flush=True)


def acquire(
    ordinal: int,
    what: str,
    *,
    uuid: str | None = None,
    on_wait: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
) -> GpuLock:
    """Wait for and take GPU ``ordinal``'s lock; ``what`` says who holds it ("ktt tune of problem X").

    ``on_wait`` hears one line when the GPU is busy and one when it is free again
    (default: stderr; the engine shows both in its log, and does not count the wait against
    the tuning's watchdog). Raises TimeoutError after ``timeout_s`` (default: wait as long as needed).
    """
    path = lock_file(ordinal, uuid)
    fd, writable = _open(path)
    start = time.monotonic()
    announced: int | None = None
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = read_holder(path)
                if holder is not None and holder.pid != announced:
                    announced = holder.pid
                    (on_wait or _say)(f"waiting for GPU {ordinal} (held by {holder.describe()})")
                elif holder is None and announced is None:
                    announced = -1
                    (on_wait or _say)(f"waiting for GPU {ordinal} (held by another process)")
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    raise TimeoutError(f"GPU {ordinal} stayed busy for {timeout_s:g} s") from None
                time.sleep(POLL_S)
    except BaseException:
        os.close(fd)
        raise
    waited = time.monotonic() - start
    if announced is not None:
        (on_wait or _say)(f"GPU {ordinal} is free after {waited:.0f} s of waiting")
    if writable:
        note = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "what": what[:200],
            "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(note) + "\n").encode(), 0)
    return GpuLock(path, fd, writable, waited)


@contextlib.contextmanager
def hold(ordinal: int, what: str, **kw: object) -> Iterator[GpuLock]:
    lock = acquire(ordinal, what, **kw)  # type: ignore[arg-type]
    try:
        yield lock
    finally:
        lock.release()
