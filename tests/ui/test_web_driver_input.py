"""``cacao serve``'s one stdin reader for the apps a session runs in turn (ui/web_driver.py).

Input reaches only the app whose driver is current; what arrives between two apps (a key typed
while the home screen hands over to a run's view) is held and given to the next app, with the
browser's last size. Before this reader each app's driver had its own thread on the same pipe,
and on a loaded machine the ended app's thread took the next key (tests/ui/test_serve_browser.py
lost its ``q``)."""

from __future__ import annotations

from typing import Any

from cacao_tui.ui import web_driver
from cacao_tui.ui.web_driver import HELD_MAX, _SharedInput


class FakeDriver:
    """A FAKE driver: records what the shared reader hands it."""

    def __init__(self) -> None:
        self.got: list[tuple[str, Any]] = []

    def process_message(self, message: Any) -> None:
        self.got.append(("event", message))

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        self.got.append(("meta", packet_type))


def _reader(monkeypatch) -> _SharedInput:  # type: ignore[no-untyped-def]
    shared = _SharedInput()
    monkeypatch.setattr(shared, "_run", lambda: None)  # no stdin here: the test sends the packets
    return shared


def test_input_goes_to_the_current_app_only(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    shared = _reader(monkeypatch)
    home, view = FakeDriver(), FakeDriver()
    shared.attach(home)  # type: ignore[arg-type]
    shared._send("event", "enter")
    shared.detach(home)  # type: ignore[arg-type]
    shared.attach(view)  # type: ignore[arg-type]
    shared._send("event", "q")
    shared.detach(home)  # type: ignore[arg-type]  # a late detach of the ended app changes nothing
    shared._send("event", "j")
    assert home.got == [("event", "enter")]
    assert view.got == [("event", "q"), ("event", "j")]


def test_what_arrives_between_two_apps_is_held_for_the_next(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    shared = _reader(monkeypatch)
    home, view = FakeDriver(), FakeDriver()
    shared.attach(home)  # type: ignore[arg-type]
    shared._send("meta", {"type": "resize", "width": 120, "height": 40})
    shared.detach(home)  # type: ignore[arg-type]
    shared._send("event", "q")  # typed during the switch
    shared.attach(view)  # type: ignore[arg-type]
    # The next app gets the browser's size first (it starts at the session's first size), then the key.
    assert view.got == [("meta", "resize"), ("event", "q")]
    assert home.got == [("meta", "resize")]


def test_the_held_input_is_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    shared = _reader(monkeypatch)
    for i in range(HELD_MAX + 100):
        shared._send("event", i)
    view = FakeDriver()
    shared.attach(view)  # type: ignore[arg-type]
    assert len(view.got) == HELD_MAX
    assert view.got[-1] == ("event", HELD_MAX + 99)  # the newest kept


def test_the_serve_driver_reads_through_the_shared_reader() -> None:
    # Textual's own per-app input thread is replaced: starting it only attaches the app.
    assert web_driver.LoopWebDriver.run_input_thread is not web_driver.WebDriver.run_input_thread
    assert isinstance(web_driver._INPUT, _SharedInput)
