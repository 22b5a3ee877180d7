"""``cacao serve`` in a real browser: headless Chromium (Debian's package) driven by Playwright.

The page opens with the printed URL's token and shows the home screen; Enter on a problem with a
finished run opens that run; the screenshots are kept in docs/images/ (serve_home.png,
serve_run.png) when CACAO_UPDATE_SCREENSHOTS=1. Without the token, or with a wrong one, the page
and the websocket are refused (403) and no app is started.

The screen is drawn on a canvas (xterm.js), so what the app shows is read from the websocket's
frames (the app's terminal output, escape sequences stripped). Skips, saying why, where Chromium
(``apt-get install -y chromium``) or Playwright (``pip install playwright``; never
``playwright install``: the system's Chromium is used) or textual-serve is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.pathenv import child_pythonpath
from tests.runs.run_files import problems_folder

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "docs" / "images"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install -y chromium)"
    for module, how in (("playwright", "pip install playwright"), ("textual_serve", "pip install textual-serve")):
        try:
            __import__(module)
        except ModuleNotFoundError:
            return f"{module} is not installed ({how})"
    return None


pytestmark = [pytest.mark.slow, pytest.mark.skipif(_missing() is not None, reason=_missing() or "")]


def _wait(predicate: Callable[[], object], what: str, timeout: float = 60.0,
          pause: Callable[[], object] = lambda: time.sleep(0.2)) -> None:  # fmt: skip
    """Poll ``predicate`` until it holds (a loaded 2-core machine is slow); ``pause`` between polls
    (in a Playwright page: the page's own wait, so its events are delivered meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        pause()
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    # Pictures for the docs are taken in a fixed, neutral folder (the app shows its path).
    root = Path("/tmp/cacao-serve") if os.environ.get("CACAO_UPDATE_SCREENSHOTS") else tmp_path
    shutil.rmtree(root / "problems", ignore_errors=True)
    folder = problems_folder(root / "problems")  # mmul has a finished run
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    argv = [sys.executable, "-m", "cacao_tui", "serve", "--problems", str(folder), "--port", "0"]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        _wait(lambda: "token=" in log.read_text(errors="replace") or proc.poll() is not None, "the server's URL", 60)
        found = re.search(r"open (http://\S+)/\?token=([0-9a-f]+)", log.read_text(errors="replace"))
        assert found, log.read_text(errors="replace")
        yield found.group(1), found.group(2), folder, log
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_the_token_is_required(server) -> None:  # type: ignore[no-untyped-def]
    base, token, _, log = server
    assert _status(f"{base}/") == 403
    assert _status(f"{base}/?token=") == 403
    assert _status(f"{base}/?token={'0' * len(token)}") == 403
    assert _status(f"{base}/ws/{'0' * len(token)}") == 403  # the websocket, before any upgrade
    assert _status(f"{base}/static/") in (403, 404)  # no directory listing
    assert _status(f"{base}/?token={token}") == 200
    assert "Traceback" not in log.read_text(errors="replace")


def test_home_screen_and_a_run_in_the_browser(server) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    base, token, _, log = server
    frames: list[str] = []

    def screen() -> str:
        return ANSI.sub("", "".join(frames))

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})

            def on_ws(ws) -> None:  # type: ignore[no-untyped-def]
                def on_frame(payload: str | bytes) -> None:
                    frames.append(payload.decode("utf-8", "replace") if isinstance(payload, bytes) else payload)

                ws.on("framereceived", on_frame)

            page.on("websocket", on_ws)
            page.goto(f"{base}/?token={token}")
            tick = lambda: page.wait_for_timeout(200)  # noqa: E731
            # The home screen, mmul's row with its finished run's best loaded (what Enter opens).
            _wait(lambda: "4 problems" in screen() and "×3.25" in screen(), "the home screen", pause=tick)
            page.wait_for_timeout(500)
            if os.environ.get("CACAO_UPDATE_SCREENSHOTS"):
                SHOTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SHOTS / "serve_home.png"))
            page.click("canvas.xterm-cursor-layer", position={"x": 200, "y": 300})
            frames.clear()
            page.keyboard.press("Home")  # mmul, the first row: its finished run
            page.keyboard.press("Enter")
            # The run's view, its log replayed to the end (its keys are live from then on).
            _wait(lambda: "b1-tiling" in screen() and "Run finished" in screen(), "the run's view", pause=tick)
            page.wait_for_timeout(500)
            if os.environ.get("CACAO_UPDATE_SCREENSHOTS"):
                page.screenshot(path=str(SHOTS / "serve_run.png"))
            frames.clear()
            page.keyboard.press("q")  # back to the home screen: the same session goes on
            try:
                _wait(lambda: "4 problems" in screen(), "the home screen again", pause=tick)
            except AssertionError as exc:
                tail = log.read_text(errors="replace")[-3000:]
                shown = screen()[-3000:]
                raise AssertionError(f"{exc}; the page's frames since q: {shown!r}; serve.log: {tail}") from None
        finally:
            browser.close()
