"""The whole day in a real terminal, with the replay provider (no key, no GPU: a dry run).

Open the home screen, create a problem in the editor (saved only once it passes --check),
start a dry-run replay of mmul from the run dialog, pause it through its control files,
quit the app while it runs, check the run process lives on, reopen the app, attach, resume,
watch it finish and open its results; at 80x24 and at 200x60.

Needs tmux (skipped with that reason when it is missing).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cacao_tui.runs.last_run import last_run
from cacao_tui.store.run_lock import lock_path
from ktt.procs import pid_alive
from tests.pathenv import child_pythonpath

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


@pytest.mark.parametrize(("width", "height"), [(80, 24), (200, 60)])
def test_the_whole_day(width: int, height: int, tmp_path: Path, cleanup: list[Callable[[], None]]) -> None:
    folder = tmp_path / "problems"
    mmul = folder / "mmul"
    shutil.copytree(MMUL, mmul, ignore=shutil.ignore_patterns("output", "archive", "demo"))
    env = {"TERM": "xterm-256color", "TZ": "UTC", "COLORTERM": "truecolor", "LANG": "C.UTF-8",
           "PYTHONPATH": child_pythonpath(), "HOME": str(tmp_path)}  # fmt: skip
    shell = Shell(width, height, env)
    cleanup.append(shell.kill)
    app = f"cd {shlex.quote(str(tmp_path))} && {shlex.quote(sys.executable)} -m cacao_tui"

    def stop_run() -> None:  # a failed test leaves no run behind
        pid = _holder_pid(mmul)
        if pid is not None and pid_alive(pid):
            os.kill(pid, 15)

    cleanup.append(stop_run)

    # -- morning: the home screen, and a new problem from the editor ----------------------------
    shell.type_line(f"{app}; echo APP-EXIT-1 $?")  # cacao with no --dir, in the folder's parent
    shell.wait_text("1 problem ·")
    shell.keys("n")
    shell.wait_text("New problem")
    shell.wait_text("--check OK", timeout=60)  # the editor's live check of its starting point
    assert not (folder / "new-problem").exists()  # nothing written before Save
    shell.keys("C-s")
    shell.wait_text("2 problems ·", timeout=60)
    assert (folder / "new-problem" / "problem.yaml").is_file()

    # -- a dry-run replay from the run dialog -------------------------------------------------
    shell.keys("k")  # back to mmul (the new problem was selected)
    shell.wait_for(lambda s: "mmul  " in s and "not run yet" in s, what="mmul's details")
    shell.keys("r")
    shell.wait_text("Run · mmul")
    shell.choose_replay()
    shell.keys(*["Tab"] * 9, "Space")  # Dry run
    shell.keys("C-s")
    shell.wait_text("b1-tiling", timeout=90)  # attached: the run's branches, from its log
    launch = (mmul / "output" / "launch.log").read_text()
    assert "--provider replay" in launch and "--dry-run" in launch
    pid = _holder_pid(mmul)
    assert pid is not None and pid_alive(pid) and os.getsid(pid) == pid  # a session of its own

    # Pause every branch through its control file, so the run is still there after lunch.
    shell.keys("P")
    shell.wait_for(lambda s: s.count("‖") >= 2, timeout=120, what="paused branches")

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
    shell.wait_for(lambda s: "b1-tiling" in s and "‖" in s, timeout=60, what="the paused run, attached")
    shell.keys("P")  # every branch paused: P resumes them all
    shell.wait_text("· finished", timeout=300)
    deadline = time.monotonic() + 60  # the run writes its end, prints its summary, then exits
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(pid)
    shell.keys("b")
    shell.wait_text("Results · mmul")
    screen = shell.wait_text("b1-tiling")
    assert "dry-run" in screen
    shell.keys("Escape")
    shell.wait_text("Log  LLM  Kernel")
    shell.keys("q")
    shell.wait_for(lambda s: "problems ·" in s and "✓ ok" in s, what="mmul's finished run on the home screen")
    shell.keys("b")  # results straight from the home screen
    shell.wait_text("Results · mmul")
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
