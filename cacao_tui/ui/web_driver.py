"""Textual's web driver for ``cacao serve``, for a process that runs several apps one after the other.

The home screen and the run views it opens are separate Textual apps run in turn in one process
(ui/home/loop.py). Textual's ``WebDriver`` ends the browser session when an app stops (it writes
an ``exit`` packet, and textual-serve closes the websocket), and starts each app with the
``__GANGLION__`` line that textual-serve reads once, before the packets. This driver writes that
line only for the first app of the process and no ``exit`` when an app stops; ``end_session``
writes the one ``exit`` when the process has no further app to show (cacao_tui.cli).
``cacao serve`` names it in each session's ``TEXTUAL_DRIVER``.
"""

from __future__ import annotations

import json
import os
import sys

from textual.drivers.web_driver import WebDriver

READY = b"__GANGLION__\n"
_started = False  # this process has written READY


class LoopWebDriver(WebDriver):
    def start_application_mode(self) -> None:
        global _started
        write = self._write
        if _started:
            self._write = lambda data: None if data == READY else write(data)  # type: ignore[method-assign]
        try:
            super().start_application_mode()
        finally:
            self._write = write  # type: ignore[method-assign]
        _started = True

    def write_meta(self, data: dict[str, object]) -> None:
        if data.get("type") == "exit":
            return  # an app ended, not the session: end_session writes it
        super().write_meta(data)


def end_session() -> None:
    """Tell textual-serve that the session is over (the last app has ended)."""
    payload = json.dumps({"type": "exit"}).encode()
    os.write(sys.__stdout__.fileno(), b"M" + len(payload).to_bytes(4, "big") + payload)
