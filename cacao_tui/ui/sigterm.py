"""SIGTERM for the Textual apps: leave the way the quit key does, never mid-screen.

Python's default answer to SIGTERM (``kill PID``, a session manager ending the login) kills
the process at once, and the terminal stays in the app's modes: the alternate screen, mouse
reporting, a hidden cursor. Each app installs ``SigtermExit`` for its lifetime: the signal
asks the app to leave (``answer_sigterm``; by default ``exit()``), Textual puts the terminal back,
and ``sigterm_received`` tells the caller not to open the next view (the home loop ends).
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

EXIT_SIGTERM = 128 + signal.SIGTERM  # the shell's code for "ended by SIGTERM"


class SigtermExit:
    """Mixed into a Textual ``App``: the handler is installed on mount and removed on unmount
    (Textual calls the mount handlers of every class in the app's MRO, this one's included);
    override ``answer_sigterm`` for another answer."""

    sigterm_received = False
    _sigterm_before: Any = None
    _sigterm_installed = False

    def on_mount(self) -> None:
        self.install_sigterm()

    def on_unmount(self) -> None:
        self.remove_sigterm()

    def install_sigterm(self) -> None:
        previous = signal.getsignal(signal.SIGTERM)
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self._sigterm)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            return
        self._sigterm_before, self._sigterm_installed = previous, True

    def remove_sigterm(self) -> None:
        if not self._sigterm_installed:
            return
        self._sigterm_installed = False
        try:
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._sigterm_before)
        except (RuntimeError, ValueError, TypeError):
            pass

    def _sigterm(self) -> None:
        self.sigterm_received = True
        self.answer_sigterm()

    def answer_sigterm(self) -> None:
        self.exit()  # type: ignore[attr-defined]  # App.exit
