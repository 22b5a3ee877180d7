"""Whether a problem directory has a live run, from the note in its run lock.

The run lock (``output.lock``, ``cacao_tui.store.run_lock``) is a ``flock`` held by the run
and a note naming the holder (pid, host, start, command), cleared when the run ends
cleanly. Reading the note takes no lock, so looking never gets in a starting run's way.
A note left by a killed run names a pid that is gone: that directory is not live.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from cacao_tui.store.run_lock import LockHolder, lock_path, read_holder
from ktt.procs import pid_alive


@dataclass(frozen=True)
class LiveRun:
    holder: LockHolder
    here: bool  # on this machine: its pid can be checked and signalled

    def describe(self) -> str:
        return self.holder.describe()


def live_run(problem_dir: Path) -> LiveRun | None:
    """The run holding the directory, or None when no run is live there.

    A note from another host (a shared file system) cannot be checked; it counts as live,
    so the app never starts a second run over it, and it is shown with its host.
    """
    holder = read_holder(lock_path(problem_dir))
    if holder is None:
        return None
    if holder.host != socket.gethostname():
        return LiveRun(holder, here=False)
    if holder.pid <= 0 or not pid_alive(holder.pid):
        return None
    return LiveRun(holder, here=True)
