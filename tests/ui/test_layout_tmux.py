"""Nothing hidden at 80x24 (issue 24 item 4, Deliver 3), and the same at 200x60, in a real terminal:
the footers keep the most used keys (the run view's / d b z q, the home's n e q), z maximises the
focused pane so a cut tree label is read whole, and the check page and the launch log scroll
sideways with → where a line is wider than the page. Keys only; read back with capture-pane."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from test_home_terminals import Pane

from cacao_tui.engine import events as ev
from cacao_tui.store.state import Decision
from tests.pathenv import child_pythonpath
from tests.runs.run_files import T0, copy_problem, finished_run_events, write_log

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
]
SUMMARY = "16x16 shared tiles with coalesced loads, next: register blocking of 4x4 outputs per thread"
LONG_LINE = "cacao: error: " + "a launch log line wider than any page, " * 6 + "THE END"


def _folder(root: Path) -> Path:
    folder = root / ("a-long-folder-name-" * 9) / "problems"  # a check page line wider than the page (200)
    mmul = copy_problem(folder, "mmul")
    events = finished_run_events()
    decision = Decision(action="continue", reason="improving", iteration_summary=SUMMARY)
    events.insert(-4, ev.DecisionMade(ts=T0 + 10, branch="b1-tiling", iteration=1, action="continue",
                                      reason="improving", decision=decision))  # fmt: skip
    write_log(mmul, events, mtime=T0 + 12)
    (mmul / "output" / "launch.log").write_text(f"== started from the app\n{LONG_LINE}\n")
    return folder


def _right_until(pane: Pane, needle: str, presses: int = 40) -> str:
    """→ until ``needle`` has scrolled into view (ten columns a press); the screen then."""
    for _ in range(presses):
        screen = pane.tmux("capture-pane", "-p", "-t", "t")
        if needle in screen:
            return screen
        pane.keys("Right")
    return pane.wait_text(needle, timeout=5)


def _footer(screen: str) -> str:
    return next(line for line in reversed(screen.splitlines()) if line.strip())


@pytest.mark.parametrize("size", [(80, 24), (200, 60)])
def test_nothing_is_hidden(size: tuple[int, int], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    command = f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m cacao_tui --problems " \
              f"{shlex.quote(str(folder))}"  # fmt: skip
    pane = Pane(command, *size, {"TERM": "xterm-256color", "LANG": "C.UTF-8", "TZ": "UTC",
                                 "PYTHONPATH": child_pythonpath()})  # fmt: skip
    try:
        pane.wait_text("1 problem")
        footer = _footer(pane.wait_text("? help"))
        for key in ("? help", "enter open", "r run", "b results", "n new", "e edit", "q quit"):
            assert key in footer, (key, footer)
        # The check page: → scrolls a line wider than the page into view.
        pane.keys("c")
        pane.wait_text("Check · mmul")
        pane.wait_text("boundary")  # the check has finished
        pane.keys("End")  # its last line: wider than the page (the problem's long path)
        page = pane.wait_text("OK: ")
        assert "is a valid problem" not in page
        moved = _right_until(pane, "is a valid problem")
        assert "OK: " not in moved, moved
        pane.keys("Escape")
        pane.wait_gone("Check · mmul")
        # The launch log: the same.
        pane.keys("l")
        log = pane.wait_text("launch log line")
        assert "THE END" not in log  # wider than the page, at either size
        assert "THE END" in _right_until(pane, "THE END")
        pane.keys("Escape")
        pane.wait_gone("launch log line")
        # The run view: its footer keeps / d b z q; z shows the focused tree whole.
        pane.keys("Enter")
        pane.wait_text("finished")
        view = pane.wait_text("z zoom")  # the run view's footer, painted after its body
        footer = _footer(view)
        for key in ("? help", "p pause", "/ filter", "d diff", "b results", "z zoom", "q quit"):
            assert key in footer, (key, footer)
        if size[0] == 80:
            assert SUMMARY not in view  # the tree's label is cut at 80 columns
        pane.keys("z")
        pane.wait_gone("Log  LLM")  # the tree alone fills the screen (the Log holds the summary too)
        if size[0] == 80:  # the whole screen's width, and → for what is wider still
            pane.wait_text("16x16 shared tiles")
            assert "per thread" in _right_until(pane, "per thread")
        else:
            zoomed = pane.wait_text(SUMMARY)
            assert "Log  LLM" not in zoomed
        pane.keys("Escape")
        pane.wait_text("Log  LLM")
        pane.keys("q")
        pane.wait_text("1 problem")
        pane.keys("q")
        pane.wait_gone("? help")
    finally:
        pane.tmux("kill-server")
