"""One run per problem directory: an exclusive lock held for the whole run.

Two runs on one directory corrupt each other (the second archives the first's live
``output/``), so a run takes ``<problem>/output.lock`` before it archives or writes
anything, and holds it until the process ends. The lock is ``flock`` on an open file: the
kernel releases it when the holder dies, SIGKILL included, so a lock is never stale in
the sense of blocking; what a killed run leaves is only its note in the file (pid, host,
start time, command), which the next run reports as taken over. A second run while the
first lives gets one line naming the holder and exit 2. Reading (``--best``, ``--check``,
the app's views of a finished run) takes no lock.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ktt.capped_read import open_regular, parse_json, read_bytes_capped
from ktt.procs import pid_alive
from ktt.terminal_text import safe_line

LOCK_NAME = "output.lock"
_MAX_NOTE = 4096
MAX_PID = 2**22  # the kernel's largest pid_max: a note naming a larger one is not a run's
_MAX_PROC_LOCKS = 8 * 1024 * 1024


class RunLocked(Exception):
    """The directory is in use (or the lock file is unusable); the message is one line."""


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    started: str
    command: str
    delegate: str = ""  # --gpu-submit: the token of the GPU phase it started, which runs under this lock

    def describe(self) -> str:
        """One line for the terminal (a lock file in a problem directory is untrusted text)."""
        when = self.started
        with contextlib.suppress(ValueError):
            when = dt.datetime.fromisoformat(self.started).astimezone().strftime("%Y-%m-%d %H:%M:%S")
        text = f"pid {self.pid} on {self.host}, started {when}" + (f": {self.command}" if self.command else "")
        return safe_line(text, 300)

    def gone(self) -> bool:
        """True when the holder was on this machine and its process no longer runs."""
        return self.host == socket.gethostname() and not pid_alive(self.pid)


@dataclass
class RunLock:
    path: Path
    fd: int
    took_over: LockHolder | None  # the note of a run that ended without releasing (killed)
    created: bool = False  # this process made the lock file (there was none)

    def release(self) -> None:
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)  # closing the only descriptor releases the flock
        self.fd = -1
        _held.pop(_key(self.path.parent), None)

    def delegate(self, token: str | None) -> None:
        """Let the process that presents ``token`` (the GPU phase --gpu-submit starts, maybe on
        another host) run under this lock while this process waits for it; None takes it back."""
        if self.fd < 0:
            return
        with contextlib.suppress(OSError, ValueError):
            note = json.loads(os.pread(self.fd, _MAX_NOTE, 0).decode("utf-8", errors="replace") or "{}")
            if token:
                note["delegate"] = token
            else:
                note.pop("delegate", None)
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, (json.dumps(note) + "\n").encode(), 0)

    def abandon(self) -> None:
        """Release for a run that was refused after taking the lock: a lock file it made goes too,
        so a refused run leaves nothing in the problem directory. Unlinked while still held: a
        process that opened it meanwhile is refused, one that starts later makes its own."""
        if self.fd >= 0 and self.created:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.release()


_held: dict[str, RunLock] = {}  # problem directory (real path) -> the lock this process holds


def _key(problem_dir: Path) -> str:
    return os.path.realpath(problem_dir)


def lock_path(problem_dir: Path) -> Path:
    return Path(problem_dir) / LOCK_NAME


def read_holder(path: Path) -> LockHolder | None:
    """The note in a lock file, or None (no file, empty, not ours)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = parse_json(os.read(fd, _MAX_NOTE).decode("utf-8", errors="replace") or "null")
        pid = data["pid"]
        if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < MAX_PID:
            return None  # 10^30 in a note: not a process (os.kill would overflow)
        command, delegate = str(data.get("command", ""))[:300], str(data.get("delegate", ""))[:128]
        return LockHolder(pid, str(data["host"])[:256], str(data["started"])[:64], command, delegate)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)


def _proc_lock_pids(st: os.stat_result) -> set[int] | None:
    """Pids holding a ``flock`` on the file ``st`` describes, from the kernel's /proc/locks (nothing is
    taken, so a starting run is never in the way); None where /proc/locks cannot be read. The inode
    alone is compared: on overlayfs the device /proc/locks names is the layer's, not the mount's."""
    try:
        data = read_bytes_capped("/proc/locks", _MAX_PROC_LOCKS)
    except OSError:
        return None
    pids: set[int] = set()
    for line in data.decode("ascii", errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":  # "->" lines are waiters, not holders
            continue
        ino = parts[5].rsplit(":", 1)[-1]
        if ino.isdigit() and int(ino) == st.st_ino and parts[4].isdigit():
            pids.add(int(parts[4]))
    return pids


def lock_is_held(path: Path) -> bool:
    """True while some process holds the directory's run lock (the ``flock``, not the note)."""
    try:
        fd, st = open_regular(path, follow_links=False)
    except OSError:
        return False
    try:
        pids = _proc_lock_pids(st)
        if pids is not None:
            return bool(pids)
        try:  # no /proc/locks: probe with a shared lock, released at once
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False
    finally:
        os.close(fd)


def run_is_live(problem_dir: Path) -> bool:
    """Whether a run holds ``problem_dir`` now: the run lock's ``flock`` is held, or a note from another
    host (which cannot be checked from here) says so. False for a run whose process died."""
    path = lock_path(problem_dir)
    holder = read_holder(path)
    if holder is not None and holder.host != socket.gethostname():
        return True
    return lock_is_held(path)


def holds_lock(pid: int, path: Path) -> bool:
    """True when process ``pid`` of this machine holds the run lock at ``path``: the kernel lists it
    among the lock's holders (where it can tell) and it has the lock file open. Only then may it be
    signalled: a note outlives a killed run, and its pid may since belong to anyone."""
    if not 0 < pid < MAX_PID:
        return False
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    pids = _proc_lock_pids(st)
    if pids is not None and pid not in pids:
        return False
    if pids is None and not lock_is_held(path):
        return False
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in fds:
        try:
            other = os.stat(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if other.st_ino == st.st_ino and other.st_dev == st.st_dev:
            return True
    return False


def _open_lock_file(path: Path) -> tuple[int, bool]:
    """The lock file's descriptor, and whether this call created it (a refused run then removes it)."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    created = False
    try:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:  # another process made it a moment ago
                fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RunLocked(f"{path}: is a symbolic link; remove it (a run's lock file must be a plain file)") from None
        raise RunLocked(f"{path}: cannot create the run lock ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunLocked(f"{path}: is not a regular file; remove it (it is the run lock)")
    return fd, created


def acquire_run_lock(problem_dir: Path, command: str | None = None, delegate: str | None = None) -> RunLock:
    """Take the directory's run lock, or raise RunLocked naming the run that holds it.

    Idempotent within a process: a second call for the same directory returns the lock
    already held (the engine takes it first, the archiver checks it again). ``delegate``: the
    token a --gpu-submit run handed to the GPU phase it started; while that run holds the lock
    with this token in its note, this process runs under it (holding nothing itself).
    """
    key = _key(problem_dir)
    if key in _held:
        return _held[key]
    path = lock_path(problem_dir)
    fd, created = _open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = read_holder(path)
        os.close(fd)
        if delegate and holder is not None and holder.delegate == delegate:
            lock = RunLock(path, -1, None)  # the submitting run holds it for this one
            _held[key] = lock
            return lock
        if holder is None:
            who = "another process (no note in the lock file yet)"
        elif holder.gone():
            who = f"{holder.describe()}, no longer running; a process it started still holds the lock"
        else:
            who = holder.describe()
        raise RunLocked(
            f"{Path(problem_dir)}: another run is using this problem directory ({who}); "
            "wait for it to finish or stop it (--best and --check work meanwhile)"
        ) from None
    except OSError as exc:
        os.close(fd)
        raise RunLocked(f"{path}: cannot lock ({exc.strerror})") from None
    previous = read_holder(path)
    note = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": (command if command is not None else " ".join(["cacao", *sys.argv[1:]]))[:300],
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(note) + "\n").encode(), 0)
    except OSError:
        pass  # the lock is held; the note only helps the next run's message
    lock = RunLock(path, fd, previous if previous is not None and previous.pid != os.getpid() else None, created)
    _held[key] = lock
    return lock


def held_here(problem_dir: Path) -> RunLock | None:
    return _held.get(_key(problem_dir))


@atexit.register
def _release_all() -> None:
    """A run that ends (even by an exception) clears its note; only a killed one leaves it."""
    for lock in list(_held.values()):
        lock.release()
