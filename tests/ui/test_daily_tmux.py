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


REASON = "the tiled kernel's decision, long enough to pass any column: " * 2 + "THE END"


def _best_folder(root: Path) -> Path:
    from cacao_tui.store.atomic import write_model
    from cacao_tui.store.layout import RunLayout
    from cacao_tui.store.state import BranchSummary, FinalResults
    from tests.runs.run_files import finished_run_events, write_log

    folder = root / "problems"
    mmul = copy_problem(folder, "mmul")
    write_log(mmul, finished_run_events())
    (mmul / "output" / "launch.log").write_text("== started from the app\n" + "x" * 60 + " launch line end\n")
    branches = [BranchSummary(name=f"b{i}-branch", title="t", status="stopped", iterations=1, stop_reason=REASON)
                for i in (1, 2)]  # fmt: skip
    write_model(RunLayout(mmul).final_results, FinalResults(problem_name="mmul", branches=branches))
    return folder


def _width_of_page(screen: str) -> int:
    """How wide the page is drawn: its top border row."""
    return max(len(line.rstrip()) for line in screen.splitlines() if line.startswith("█▀"))


@pytest.mark.parametrize("size", SIZES)
def test_nothing_clipped_that_cannot_be_reached(size: tuple[int, int], tmp_path: Path) -> None:
    """Item 6: --best shows the highlighted branch's whole reason and → scrolls ten columns; the check
    page and the launch log use the whole width; the editor's footer keeps ctrl+r, ctrl+t and f1 with
    the args table focused; `?` in the run view keeps a description on one line."""
    folder = _best_folder(tmp_path)
    mmul = folder / "mmul"
    pane = Pane(_cacao(tmp_path, f"--dir {shlex.quote(str(mmul))} --best"), *size, _env())
    try:
        screen = pane.wait_text("stopped because:")
        why = " ".join(line.strip() for line in screen.split("stopped because:", 1)[1].splitlines())
        assert "THE END" in why, screen  # the reason whole, under the table
        pane.wait_text("esc quit")
        if size[0] == 80:
            pane.keys("Right")
            moved = pane.tmux("capture-pane", "-p", "-t", "t")
            header = next(line for line in moved.splitlines() if "stopped because" in line and "status" in line)
            assert not header.lstrip().startswith("branch"), moved  # ten columns to the right
        pane.keys("Escape")
        pane.wait_gone("stopped because:")
    finally:
        pane.tmux("kill-server")
    pane = Pane(_cacao(tmp_path, f"--problems {shlex.quote(str(folder))}"), *size, _env())
    try:
        pane.wait_text("1 problem")
        pane.wait_text("? help")
        pane.keys("c")
        page = pane.wait_text("is a valid problem", timeout=90) if size[0] > 100 else pane.wait_text("boundary")
        assert _width_of_page(page) == size[0], page
        pane.keys("Escape")
        pane.wait_gone("Check · mmul")
        pane.keys("l")
        page = pane.wait_text("Launch log · mmul")
        assert _width_of_page(page) == size[0] and "launch line end" in page, page
        pane.keys("Escape")
        pane.wait_gone("Launch log · mmul")
        pane.keys("e")
        pane.wait_text("Edit problem")
        pane.keys("C-t")  # Args
        pane.wait_text("+ scalar (s)")
        pane.keys("Tab")  # into the args table
        footer = [line for line in pane.wait_text("ctrl+s save").splitlines() if "ctrl+s save" in line][-1]
        for key in ("ctrl+r", "ctrl+t", "f1"):
            assert key in footer, footer
        pane.keys("Escape")
        pane.wait_text("1 problem")
        pane.keys("Enter")
        pane.wait_text("z zoom")
        pane.keys("?")
        help_page = pane.wait_text("Branch control")
        assert "Pause every branch; press again to resume them all" in help_page, help_page
    finally:
        pane.tmux("kill-server")


FOCUS_MARK = "▌"


@pytest.mark.parametrize(
    ("colours", "size"),
    [({"TERM": "xterm"}, (80, 24)), ({"TERM": "xterm-256color"}, (80, 24)),
     ({"TERM": "xterm-256color", "NO_COLOR": "1"}, (80, 24)), ({"TERM": "xterm-256color"}, (200, 60))],
)  # fmt: skip
def test_the_focused_field_is_marked_in_any_colours(
    colours: dict[str, str], size: tuple[int, int], tmp_path: Path
) -> None:
    """Item 7: a bar left of the focused field, a glyph, not a shade of background (235 against 234
    in 256 colours, nothing with NO_COLOR); in the editor's Args tab, Tab goes from the table
    straight to the form's first field, past no button."""
    folder = tmp_path / "problems"
    copy_problem(folder, "mmul")
    pane = Pane(_cacao(tmp_path, f"--problems {shlex.quote(str(folder))}"), *size, _env(**colours))
    try:
        pane.wait_text("? help")
        pane.keys("e")
        pane.wait_text("Edit problem")
        pane.keys("Tab")  # from the tab bar to the first field, Name
        screen = pane.wait_text(f"{FOCUS_MARK}mmul")
        assert any(line.startswith(FOCUS_MARK + "mmul") for line in screen.splitlines()), screen
        pane.keys("Tab")  # on to the description: Name's bar goes
        screen = pane.wait_text("▀▀▀")
        assert f"{FOCUS_MARK}mmul" not in screen and " mmul" in screen, screen
        pane.keys("C-t")  # Args: the tab bar, then the table, then the kind of the highlighted arg
        pane.wait_text("+ scalar (s)")
        pane.keys("Tab", "Tab")
        kind = pane.wait_text(f"{FOCUS_MARK}buffer")
        assert f"{FOCUS_MARK}buffer" in kind, kind
    finally:
        pane.tmux("kill-server")
