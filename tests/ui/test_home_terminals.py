"""The home screen in real terminals: 16 and 256 colours, NO_COLOR, 80x24 and 200x60, keys only
(no mouse). Read back with tmux's capture-pane, escapes included."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BestResult, FinalResults
from tests.pathenv import child_pythonpath
from tests.runs.run_files import problems_folder

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def _colours(escaped: str) -> set[str]:
    """The colour parameters of every SGR sequence: '38;5;N', '48;2;R;G;B', '31', '100', ..."""
    found = set()
    for params in SGR.findall(escaped):
        parts = params.split(";")
        i = 0
        while i < len(parts):
            p = parts[i]
            if p in ("38", "48") and i + 1 < len(parts):
                width = 3 if parts[i + 1] == "5" else 5
                found.add(";".join(parts[i : i + width]))
                i += width
                continue
            if p.isdigit() and (30 <= int(p) <= 37 or 40 <= int(p) <= 47 or 90 <= int(p) <= 107):
                found.add(p)
            i += 1
    return found


class Pane:
    def __init__(self, command: str, width: int, height: int, env: dict[str, str]) -> None:
        self.socket = f"cacao-term-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        shell = f"unset COLUMNS LINES COLORTERM NO_COLOR; export {exports}; {command}; sleep 600"
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x",
                        str(width), "-y", str(height), shell], check=True, timeout=20)  # fmt: skip
        self.tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20).stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "t", key)
            time.sleep(0.15)

    def wait_text(self, needle: str, timeout: float = 40.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.tmux("capture-pane", "-p", "-t", "t")
            if needle in text:
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {needle!r}; the screen was:\n{text}")

    def wait_gone(self, needle: str, timeout: float = 20.0) -> None:
        """Until ``needle`` has left the screen (a lone Escape is only sent after a pause)."""
        deadline = time.monotonic() + timeout
        while needle in self.tmux("capture-pane", "-p", "-t", "t"):
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} is still on the screen")
            time.sleep(0.2)

    def escaped(self) -> str:
        return self.tmux("capture-pane", "-e", "-p", "-t", "t")


@pytest.mark.parametrize(
    ("name", "env", "size"),
    [
        ("16 colours", {"TERM": "xterm"}, (80, 24)),
        ("256 colours", {"TERM": "xterm-256color"}, (80, 24)),
        ("NO_COLOR", {"TERM": "xterm-256color", "NO_COLOR": "1"}, (80, 24)),
        ("truecolor, large", {"TERM": "xterm-256color", "COLORTERM": "truecolor"}, (200, 60)),
    ],
)
def test_home_in_a_terminal(name: str, env: dict[str, str], size: tuple[int, int], tmp_path: Path) -> None:
    folder = problems_folder(tmp_path / "problems")
    command = f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m cacao_tui"
    pane = Pane(command, *size, {**env, "LANG": "C.UTF-8", "TZ": "UTC", "PYTHONPATH": child_pythonpath()})
    try:
        pane.wait_text("4 problems")
        screen = pane.wait_text("? help")
        # Status is told by icon and word, not by colour alone (NO_COLOR, a 16-colour palette).
        for row in ("✓ ok", "■ interrupted", "· not run", "▶ running"):
            assert row in screen, (name, screen)
        footer = next(line for line in screen.splitlines() if "? help" in line)
        assert "r run" in footer and "b results" in footer
        colours = _colours(pane.escaped())
        if name == "16 colours":
            assert colours and all(c.isdigit() for c in colours), colours
            # The terminal's own yellow, not Monokai's orange "yellow" brought back as bright red
            # (91): a status's colour means what it says.
            cut = re.search(r"\x1b\[(?:1;)?(\d+)m■ interrupted", pane.escaped())
            assert cut is not None and cut.group(1) in ("33", "93"), pane.escaped()
        elif name == "256 colours":
            assert any(c.startswith(("38;5;", "48;5;")) for c in colours)
            assert not any(c.startswith(("38;2;", "48;2;")) for c in colours)
        elif name == "NO_COLOR":
            # Textual keeps a grey ramp for contrast; nothing with a hue is left.
            assert all(c.startswith(("38;5;", "48;5;")) and 232 <= int(c.split(";")[2]) <= 255 for c in colours), (
                colours
            )
        # Every screen by keys alone: help, the run dialog, results, and back.
        pane.keys("?")
        pane.wait_text("Keys  (esc closes)")
        pane.keys("Escape")
        pane.wait_gone("Keys  (esc closes)")
        pane.keys("a")  # run again: the dialog filled in from the last run (a dry run)
        pane.wait_text("Run again · mmul")
        dialog = pane.wait_text("Start (ctrl+s)")
        # A tick and its absence tell apart without colour (NO_COLOR, 16 colours): ✓ or a blank.
        assert "▐✓▌ Dry run" in dialog and "▐ ▌ Single-shot" in dialog, dialog
        pane.keys("Escape")
        pane.wait_gone("Start (ctrl+s)")
        pane.keys("b")
        pane.wait_text("No results yet")  # the fixture's run is only a run log
        pane.keys("Escape")
        pane.wait_gone("No results yet")
        pane.keys("q")
        deadline = time.monotonic() + 20
        while "problems ·" in pane.tmux("capture-pane", "-p", "-t", "t") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "problems ·" not in pane.tmux("capture-pane", "-p", "-t", "t")  # q left the app
        assert sorted(p.name for p in folder.iterdir()) == ["mmul", "softmax", "stencil", "transpose"]
    finally:
        pane.tmux("kill-server")


@pytest.mark.parametrize("view", ["home", "run view", "results"])
def test_sigterm_leaves_the_terminal_as_quitting_does(view: str, tmp_path: Path) -> None:
    """`kill PID` (SIGTERM) on any of the apps: the process ends with 143 and the terminal is back
    in its own modes (main screen, mouse reporting off, cursor shown), not left in the app's."""
    folder = problems_folder(tmp_path / "problems")
    if view == "results":  # --best opens the results view when the run left its final results
        best = BestResult(branch="b1-a", iteration=1, time_ms=0.5, speedup=20.0, kernel_path="k")
        write_model(RunLayout(folder / "mmul").final_results, FinalResults(problem_name="mmul", best=best))
    pid_file = tmp_path / "pid"
    args = f"--dir {shlex.quote(str(folder / 'mmul'))} --best" if view == "results" else ""
    command = (f"cd {shlex.quote(str(tmp_path))} && sh -c 'echo $$ > {shlex.quote(str(pid_file))}; "
               f"exec {shlex.quote(sys.executable)} -m cacao_tui {args}'; echo EXIT=$?")  # fmt: skip
    pane = Pane(command, 100, 30, {"TERM": "xterm-256color", "LANG": "C.UTF-8", "TZ": "UTC",
                                   "PYTHONPATH": child_pythonpath()})  # fmt: skip
    try:
        if view == "results":
            pane.wait_text("b1-a")
        else:
            pane.wait_text("4 problems")
            pane.wait_text("? help")
        if view == "run view":
            pane.keys("Enter")  # mmul, first in the list: its finished run
            pane.wait_text("finished")
        assert pane.tmux("display", "-p", "-t", "t", "#{alternate_on}").strip() == "1"
        os.kill(int(pid_file.read_text()), signal.SIGTERM)
        screen = pane.wait_text("EXIT=143")
        modes = pane.tmux("display", "-p", "-t", "t", "#{alternate_on} #{mouse_any_flag} #{cursor_flag}").split()
        assert modes == ["0", "0", "1"], (modes, screen)
        assert "Traceback" not in screen
    finally:
        pane.tmux("kill-server")
