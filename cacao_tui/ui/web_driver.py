"""Textual's web driver for ``cacao serve``, for a process that runs several apps one after the other.

The home screen and the run views it opens are separate Textual apps run in turn in one process
(ui/home/loop.py). Textual's ``WebDriver`` ends the browser session when an app stops (it writes
an ``exit`` packet, and textual-serve closes the websocket), and starts each app with the
``__GANGLION__`` line that textual-serve reads once, before the packets. This driver writes that
line only for the first app of the process and no ``exit`` when an app stops; ``end_session``
writes the one ``exit`` when the process has no further app to show (cacao_tui.cli).
``cacao serve`` names it in each session's ``TEXTUAL_DRIVER``.

Input: Textual's driver gives each app its own thread reading stdin, stopped when the app stops.
Run one after the other, the stopping app's thread and the starting app's could both be reading
the same pipe (on a loaded machine the old one was seen taking the browser's next key, ``q``, to
the app that had ended, and the new app never got input again). Here one reader per process reads
stdin for every app in turn (``_SharedInput``): its packets go to the app whose driver is current,
and what arrives while none is (between two apps) is held for the next, with the browser's last
size, so a key typed during the switch is not lost and the next app has the page's size.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from codecs import getincrementaldecoder
from collections import deque
from typing import Any

from textual._xterm_parser import XTermParser
from textual.drivers._byte_stream import ByteStream
from textual.drivers._input_reader import InputReader
from textual.drivers.web_driver import WebDriver

READY = b"__GANGLION__\n"
_started = False  # this process has written READY


HELD_MAX = 512  # input items kept between two apps (keys, mouse, metas); older ones are dropped


class _SharedInput:
    """The process's one reader of stdin (textual-serve's packets), feeding the current driver."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._driver: LoopWebDriver | None = None
        self._held: deque[tuple[str, Any]] = deque(maxlen=HELD_MAX)
        self._size: dict[str, object] | None = None  # the browser's last resize packet
        self._thread: threading.Thread | None = None

    def attach(self, driver: LoopWebDriver) -> None:
        """``driver``'s app takes the input from now on (what waited is delivered first)."""
        with self._lock:
            self._driver = driver
            held = list(self._held)
            self._held.clear()
            size = self._size
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cacao-web-input", daemon=True)
                self._thread.start()
        if size is not None and not any(kind == "meta" and item.get("type") == "resize" for kind, item in held):
            held.insert(0, ("meta", size))
        for kind, item in held:
            self._deliver(driver, kind, item)

    def detach(self, driver: LoopWebDriver) -> None:
        with self._lock:
            if self._driver is driver:
                self._driver = None

    def _send(self, kind: str, item: Any) -> None:
        with self._lock:
            if kind == "meta" and item.get("type") == "resize":
                self._size = item
            driver = self._driver
            if driver is None:
                self._held.append((kind, item))
                return
        self._deliver(driver, kind, item)

    @staticmethod
    def _deliver(driver: LoopWebDriver, kind: str, item: Any) -> None:
        if kind == "meta":
            driver.on_meta(str(item.get("type")), item)
        else:
            driver.process_message(item)

    def _run(self) -> None:
        parser = XTermParser()
        decode = getincrementaldecoder("utf-8")(errors="replace").decode
        packets = ByteStream()
        try:
            for data in InputReader():
                for packet_type, payload in packets.feed(data) if data else ():
                    if packet_type == "D":
                        for event in parser.feed(decode(payload)):
                            self._send("event", event)
                    else:
                        meta = json.loads(payload)
                        if isinstance(meta, dict) and isinstance(meta.get("type"), str):
                            self._send("meta", meta)
                for event in parser.tick():
                    self._send("event", event)
        except Exception:  # the server's exit packet ends the input (WebDriver raises it), as a closed pipe does
            return


_INPUT = _SharedInput()


class LoopWebDriver(WebDriver):
    def run_input_thread(self) -> None:
        """Textual's input thread for this app: it only hands the app to the shared reader."""
        _INPUT.attach(self)

    def stop_application_mode(self) -> None:
        _INPUT.detach(self)
        super().stop_application_mode()

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
