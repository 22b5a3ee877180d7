"""The whole day in a real terminal, with the replay provider and a FAKE tuner (no key, no GPU).

Open the home screen, create a problem in the editor (saved only once it passes --check), give
mmul two cases in the editor, start a replay of mmul from the run dialog, pause it through its
control files, quit the app while it runs, check the run process lives on, reopen the app,
attach, resume, watch it finish and open its results: the per-branch best-time plot with its
points and the per-case table and bars; at 80x24 and at 200x60.

The run is not a dry run: it measures, with the FAKE tuner of tests/ui/fake_run_site
(``tests.fake_tuner.FakeTuner`` answering per case, which the run process takes through the
product's tuner seam, ``CACAO_TUNER`` and the entry points of ``cacao_tui.tuners``) and a fake
``nvidia-smi`` listing one GPU.

Needs tmux (skipped with that reason when it is missing).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from cacao_tui.runs.last_run import last_run
from cacao_tui.runs.remote_control import stop_run
from cacao_tui.store.run_lock import lock_path
from cacao_tui.tuners import TUNER_ENV
from ktt.procs import pid_alive
from tests.pathenv import child_pythonpath
from tests.ui.fake_run_site import fake_cases_tuner

REPO = Path(__file__).resolve().parents[2]
MMUL = REPO / "problems" / "mmul"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)"),
    pytest.mark.skipif(not (MMUL / "session.jsonl").exists(), reason="needs problems/mmul/session.jsonl"),
]


class Shell:
    """A shell in a tmux server of our own, at a fixed size; commands are typed into it."""

    def __init__(self, width: int, height: int, env: dict[str, str]) -> None:
        self.socket = f"cacao-day-{uuid.uuid4().hex[:8]}"
        self.width, self.height = width, height
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # COLUMNS/LINES inherited from the test process would override the pane's real size.
        shell = f"unset COLUMNS LINES; export {exports}; exec bash --norc --noprofile"
        subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(width),
             "-y", str(height), shell],
            check=True, timeout=20,
        )  # fmt: skip
        self._tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20).stdout

    def type_line(self, line: str) -> None:
        self._tmux("send-keys", "-t", "t", "-l", line)
        self._tmux("send-keys", "-t", "t", "Enter")

    def choose_replay(self) -> None:
        """In the run dialog: open the provider list, type to search, pick replay."""
        self.keys("Enter")
        self.wait_text("✗ gemini")  # the list is open
        self._tmux("send-keys", "-t", "t", "-l", "replay")
        time.sleep(0.3)
        self.keys("Enter")
        self.wait_for(lambda s: "✗ gemini" not in s and "✓ replay · no key needed" in s, what="replay chosen")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "t", key)
            time.sleep(0.15)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "t")

    def text_boxes(self) -> list[tuple[str, str]]:
        """Each text area on the screen, top to bottom: (the label line above it, its top border's
        glyphs and colour as the terminal draws them). The focused one's border differs."""
        plain = self.screen().splitlines()
        coloured = self._tmux("capture-pane", "-e", "-p", "-t", "t").splitlines()
        boxes = []
        for i, line in enumerate(plain):
            if line.startswith((BOX_TOP, FOCUSED_TOP)) and i > 0 and i < len(coloured):
                colour = re.match(r"(?:\x1b\[[0-9;]*m)*", coloured[i])
                boxes.append((plain[i - 1].strip(), line[:2] + (colour.group(0) if colour else "")))
        return boxes

    def tab_to_field(self, label: str, presses: int = 4) -> None:
        """Tab from where the focus is until the text area under ``label`` has it, one key at a time,
        each press waiting until the screen shows where the focus went (however slowly the app
        draws on a loaded machine): the text typed next lands in that field, never another."""
        blurred = {colour for _, colour in self.text_boxes()}  # the focus is on the tab bar: no box has it
        assert len(blurred) == 1, f"expected every text area unfocused, got {self.text_boxes()}"

        def focused() -> str | None:
            lit = [name for name, colour in self.text_boxes() if colour not in blurred]
            return lit[0] if len(lit) == 1 else None

        def moved_from(before: str | None) -> Callable[[str], bool]:
            return lambda _screen: focused() not in (None, before)

        where: str | None = None
        for _ in range(presses):
            self.keys("Tab")
            self.wait_for(moved_from(where), what="the focus to move to the next text area")
            where = focused()
            if where is not None and where.startswith(label):
                return
        raise AssertionError(f"{presses} Tabs did not reach the field {label!r} (the focus is on {where!r})")

    def wait_for(self, predicate: Callable[[str], bool], timeout: float = 30.0, what: str = "") -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; the screen was:\n{text}")

    def wait_text(self, needle: str, timeout: float = 30.0) -> str:
        return self.wait_for(lambda s: needle in s, timeout, repr(needle))

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def cleanup() -> Iterator[list[Callable[[], None]]]:
    todo: list[Callable[[], None]] = []
    yield todo
    for fn in reversed(todo):
        fn()


def _holder_pid(problem: Path) -> int | None:
    try:
        return int(json.loads(lock_path(problem).read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


BOX_TOP = "▊▔"  # the top border of a text area (Textual's tall border)
FOCUSED_TOP = "█▀"  # a focused text area's thick frame (its mark in any colour mode)
CASES = "[{name: square}, {name: small, scalars: {DIM_M: 512, DIM_N: 512, DIM_K: 512}}]"  # typed in the editor


def fake_measuring_env(tmp_path: Path) -> dict[str, str]:
    """PATH with a FAKE nvidia-smi (one GPU 0); PYTHONPATH with the FAKE tuner's entry point, chosen."""
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    fake_cases_tuner.write_fake_nvidia_smi(bin_dir)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{fake_cases_tuner.SITE}{os.pathsep}{child_pythonpath()}",
        TUNER_ENV: fake_cases_tuner.NAME,
    }


def _plot_points(screen: str) -> int:
    """Cells of the history plot's points: plotext's braille marker, without the legend's ⢕⢕."""
    return sum(1 for ch in screen.replace("⢕⢕", "") if "\u2801" <= ch <= "\u28ff")


def _all_paused(screen: str) -> bool:
    """The tree shows each of the run's three branches paused (they pause one by one)."""
    return all(f"‖ {name} " in screen for name in ("b1-tiling", "b2-strip", "b3-quad"))


def _case_rows_shown(screen: str) -> bool:
    """The results view with the best kernel's per-case table: a measured row per case."""
    rows = [line.split() for line in screen.splitlines()]
    measured = {r[0] for r in rows if len(r) > 3 and r[1] == "ok" and r[0] in ("square", "small") and "ms" in r}
    return "Results · mmul" in screen and measured == {"square", "small"}


def _pictures_shown(screen: str) -> bool:
    """The per-branch best-time plot with its points, and the per-case bars (a bar per case)."""
    return (
        "iteration" in screen  # the plot's x label (its title is left out where it does not fit)
        and _plot_points(screen) >= 3
        and "speedup per case" in screen
        and "square┤" in screen
        and "small┤" in screen
    )


@pytest.mark.parametrize(("width", "height"), [(80, 24), (200, 60)])
def test_the_whole_day(width: int, height: int, tmp_path: Path, cleanup: list[Callable[[], None]]) -> None:
    folder = tmp_path / "problems"
    mmul = folder / "mmul"
    shutil.copytree(MMUL, mmul, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    env = {"TERM": "xterm-256color", "TZ": "UTC", "COLORTERM": "truecolor", "LANG": "C.UTF-8",
           "HOME": str(tmp_path), **fake_measuring_env(tmp_path)}  # fmt: skip
    shell = Shell(width, height, env)
    cleanup.append(shell.kill)
    app = f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m cacao_tui"

    def stop_run() -> None:  # a failed test leaves no run behind
        pid = _holder_pid(mmul)
        if pid is not None and pid_alive(pid):
            os.kill(pid, 15)

    cleanup.append(stop_run)

    # -- morning: the home screen, a new problem from the editor, and cases for mmul ---------
    shell.type_line(f"{app}; echo APP-EXIT-1 $?")  # cacao with no --dir, in the folder's parent
    shell.wait_text("1 problem ·")
    shell.keys("n")
    shell.wait_text("New problem")
    # The editor's live check of its starting point: it passes, and says the reference is the stub.
    shell.wait_text("the checks pass, but the reference is still the stub", timeout=60)
    assert not (folder / "new-problem").exists()  # nothing written before Save
    shell.keys("C-s")
    shell.wait_text("2 problems ·", timeout=60)
    assert (folder / "new-problem" / "problem.yaml").is_file()

    shell.keys("k")  # back to mmul (the new problem was selected)
    shell.wait_for(lambda s: "mmul  " in s and "not run yet" in s, what="mmul's details")
    shell.keys("e")
    shell.wait_text("Edit problem")
    shell.wait_text("--check OK", timeout=60)
    shell.keys("C-t", "C-t", "C-t")  # the Rules & cases tab
    shell.wait_text("cases (YAML list")
    shell.tab_to_field("cases (YAML list")  # from the tab bar (where ctrl+t leaves the focus): rules, then cases
    shell._tmux("send-keys", "-t", "t", "-l", CASES)
    shell.wait_for(lambda s: "{name: square}, {name: small" in s and "rules: not YAML" not in s, what="the cases")
    shell.keys("C-s")  # checks, then saves
    shell.wait_for(lambda s: "2 problems ·" in s and "2 cases" in s, timeout=60, what="mmul with 2 cases")
    assert [c["name"] for c in yaml.safe_load((mmul / "problem.yaml").read_text())["cases"]] == ["square", "small"]
    assert not (mmul / "output").exists() and not lock_path(mmul).exists()  # Save wrote the definition only

    # -- a replay that measures (the FAKE tuner), from the run dialog -------------------------
    shell.keys("r")
    shell.wait_text("Run · mmul")
    shell.choose_replay()
    shell.keys("C-s")
    shell.wait_text("b1-tiling", timeout=90)  # attached: the run's branches, from its log
    launch = (mmul / "output" / "launch.log").read_text()
    assert "--provider replay" in launch and "--dry-run" not in launch
    pid = _holder_pid(mmul)
    assert pid is not None and pid_alive(pid) and os.getsid(pid) == pid  # a session of its own

    # Pause every branch through its control file, so the run is still there after lunch. Each
    # branch pauses at its next step; P after lunch resumes only if every active one shows paused.
    shell.keys("P")
    shell.wait_for(_all_paused, timeout=120, what="every branch paused")

    # -- quit the app while the run goes on ---------------------------------------------------
    shell.keys("q")
    shell.wait_for(lambda s: "problems ·" in s and "▶ running" in s, what="home, with mmul's run live")
    shell.keys("q")
    shell.wait_text("APP-EXIT-1 0")
    time.sleep(1)
    assert pid_alive(pid) and _holder_pid(mmul) == pid, "the run stopped with the app"
    assert last_run(mmul).status == "running"

    # -- after lunch: reopen, attach, resume, watch it finish, results ------------------------
    shell.type_line(f"clear; {app}; echo APP-EXIT-2 $?")
    shell.wait_text("1 running")
    shell.keys("Enter")  # mmul is the first row
    shell.wait_for(_all_paused, timeout=60, what="the paused run, attached")
    shell.keys("P")  # every branch paused: P resumes them all
    shell.wait_text("· finished", timeout=300)
    deadline = time.monotonic() + 60  # the run writes its end, prints its summary, then exits
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(pid)
    final = json.loads((mmul / "output" / "final_results.json").read_text())
    assert final["best"]["time_ms"] and len(final["best"]["cases"]) == 2  # measured, per case

    shell.keys("b")
    screen = shell.wait_for(_case_rows_shown, what="the results with the per-case table")
    assert "dry-run" not in screen and "score ×" in screen
    shell.keys("Tab")  # the pictures: on a short terminal the view scrolls to them
    shell.wait_for(_pictures_shown, what="the history plot's points and the per-case bars")
    shell.keys("Escape")
    shell.wait_text("Log  LLM  Kernel")
    shell.keys("q")
    shell.wait_for(lambda s: "problems ·" in s and "✓ ok" in s, what="mmul's finished run on the home screen")
    shell.keys("b")  # results straight from the home screen
    shell.wait_for(_case_rows_shown, what="the results from the home screen")
    shell.keys("Tab")
    shell.wait_for(_pictures_shown, what="the pictures, from the home screen")
    shell.keys("Escape")
    shell.wait_for(lambda s: "Results · mmul" not in s, what="the results view to close")
    shell.keys("q")
    shell.wait_text("APP-EXIT-2 0")
    assert last_run(mmul).status == "ok"


def test_dropping_the_terminal_leaves_the_run(tmp_path: Path, cleanup: list[Callable[[], None]]) -> None:
    """SSH drops: the terminal goes away (the tmux server is killed: the app gets SIGHUP) while
    a run started from the app is live; the run goes on to its end."""
    folder = tmp_path / "problems"
    mmul = folder / "mmul"
    shutil.copytree(MMUL, mmul, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "PYTHONPATH": child_pythonpath(), "HOME": str(tmp_path)}
    shell = Shell(100, 30, env)
    cleanup.append(shell.kill)
    cleanup.append(lambda: (pid := _holder_pid(mmul)) and pid_alive(pid) and os.kill(pid, 15))
    shell.type_line(f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m cacao_tui")
    shell.wait_text("1 problem ·")
    shell.keys("r")
    shell.wait_text("Run · mmul")
    shell.choose_replay()
    shell.keys(*["Tab"] * 9, "Space", "C-s")
    shell.wait_text("b1-tiling", timeout=90)
    pid = _holder_pid(mmul)
    assert pid is not None and pid_alive(pid)
    shell.kill()  # the terminal is gone: the shell and the app get SIGHUP
    time.sleep(1)
    assert pid_alive(pid), "the run died with the terminal"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not last_run(mmul).finished:
        time.sleep(0.5)
    assert last_run(mmul).status == "ok"


def test_stop_from_another_app_ends_a_full_screen_run_cleanly(
    tmp_path: Path, cleanup: list[Callable[[], None]]
) -> None:
    """A run started full-screen (``cacao --dir X``, the engine in the app's process) is stopped the
    way S on the home screen or in an attached view stops it (``stop_run``: SIGTERM to the lock's
    holder): the app stops every branch, gives the terminal back, prints the summary and exits 130;
    the run's log ends with an interrupted run, so --resume continues it."""
    mmul = tmp_path / "mmul"
    shutil.copytree(MMUL, mmul, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    env = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "HOME": str(tmp_path), **fake_measuring_env(tmp_path)}
    shell = Shell(100, 30, env)
    cleanup.append(shell.kill)
    cleanup.append(lambda: (pid := _holder_pid(mmul)) and pid_alive(pid) and os.kill(pid, 9))
    shell.type_line(f"{shlex.quote(sys.executable)} -m cacao_tui --dir {shlex.quote(str(mmul))} --provider replay; "
                    "echo RUN-EXIT $?")  # fmt: skip
    shell.wait_text("b1-tiling", timeout=90)
    pid = _holder_pid(mmul)
    assert pid is not None and last_run(mmul).status == "running"
    assert stop_run(mmul) == pid  # what S does
    screen = shell.wait_for(lambda s: re.search(r"RUN-EXIT \d", s) is not None, timeout=120, what="the run's exit")
    assert "RUN-EXIT 130" in screen and "run interrupted" in screen, screen
    assert "Terminated" not in screen and "Traceback" not in screen
    assert last_run(mmul).status == "interrupted"
