"""The app as a daily tool (issue 32), in a real terminal at 80x24 and 200x60: what a new user
tripped over, by keys alone, read back with tmux's capture-pane."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from test_home_terminals import Pane

from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
]
SIZES = [(80, 24), (200, 60)]


def _env(**more: str) -> dict[str, str]:
    return {"TERM": "xterm-256color", "LANG": "C.UTF-8", "TZ": "UTC", "PYTHONPATH": child_pythonpath(), **more}


def _cacao(cwd: Path, args: str = "", before: str = "") -> str:
    return f"cd {shlex.quote(str(cwd))} && {before}{shlex.quote(sys.executable)} -m cacao_tui {args}"


def _detail(screen: str) -> str:
    """The home screen's panel under the table: its first line names the highlighted problem."""
    lines = screen.splitlines()
    rule = max(i for i, line in enumerate(lines) if line.startswith("───"))
    return lines[rule + 1]


@pytest.mark.parametrize("size", SIZES)
def test_keys_typed_while_the_app_starts_are_kept(size: tuple[int, int], tmp_path: Path) -> None:
    """Item 8: `cacao`, then `j j` before the home screen is up: the cursor ends on the third row."""
    folder = tmp_path / "problems"
    for name in ("aaa", "bbb", "ccc", "ddd"):
        copy_problem(folder, name)
    # The keys go into the terminal while the shell still sleeps, before Python has even started.
    pane = Pane(_cacao(tmp_path, before="sleep 2; "), *size, _env())
    try:
        pane.keys("j", "j")
        pane.wait_text("4 problems")
        screen = pane.wait_text("? help")
        assert _detail(screen).split()[0] == "ccc", screen
    finally:
        pane.tmux("kill-server")
