"""Whether a problem directory has a live run: its run lock is held, and by whom.

The run lock (``output.lock``, ``cacao_tui.store.run_lock``) is a ``flock`` held by the run
and a note naming the holder (pid, host, start, command), cleared when the run ends
cleanly. The note alone proves nothing: a SIGKILLed run leaves it, its pid may be reused
by any process, and anyone can write one. A run is live only while the ``flock`` is held
(read from the kernel's /proc/locks: looking takes no lock, so it never gets in a starting
run's way), and its process may be signalled only when the kernel names the note's pid as
a holder and that process has the lock file open (``RunLock.holds_lock``).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.store.run_lock import LockHolder, holds_lock, lock_is_held, lock_path, read_holder
from ktt.procs import pid_alive


@dataclass(frozen=True)
class LiveRun:
    holder: LockHolder
    here: bool  # on this machine: its pid can be checked
    verified: bool = False  # the note's pid holds the lock now: it may be signalled

    def describe(self) -> str:
        return self.holder.describe()


def live_run(problem_dir: Path) -> LiveRun | None:
    """The run holding the directory, or None when no run is live there.

    A note from another host (a shared file system) cannot be checked; it counts as live,
    so the app never starts a second run over it, and it is shown with its host.
    """
    path = lock_path(problem_dir)
    holder = read_holder(path)
    if holder is None:
        return None
    if holder.host != socket.gethostname():
        return LiveRun(holder, here=False)
    if not lock_is_held(path):
        return None  # a note left by a run that ended (killed): whatever runs under its pid now is not it
    if holds_lock(holder.pid, path):
        return LiveRun(holder, here=True, verified=True)
    if pid_alive(holder.pid):
        return LiveRun(holder, here=True)  # held, but not by the note's process: shown, never signalled
    return LiveRun(holder, here=True)  # a process the run started still holds it
