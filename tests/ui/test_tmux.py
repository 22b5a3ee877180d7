"""The app in a real terminal: started inside tmux, driven with send-keys, read with capture-pane.

Needs tmux (``apt-get install -y tmux``); skipped with that reason when it is missing.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cacao_tui.store.run_lock import RunLock, RunLocked, acquire_run_lock

REPO = Path(__file__).resolve().parents[2]
MMUL = REPO / "problems" / "mmul"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install -y tmux)")


class Tmux:
    """One tmux server of our own (-L), one session, a fixed window size."""

    def __init__(self, width: int = 100, height: int = 30) -> None:
        self.socket = f"cacao-test-{uuid.uuid4().hex[:8]}"
        self.width, self.height = width, height

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        return out.stdout

    def start(self, command: str, cwd: Path) -> None:
        env = {"TERM": "xterm-256color", "TZ": "UTC", "COLORTERM": "truecolor", "LANG": "C.UTF-8"}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # COLUMNS/LINES inherited from the test process would override the pane's real size.
        shell = f"cd {shlex.quote(str(cwd))} && unset COLUMNS LINES && export {exports} && {command}; sleep 600"
        subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", str(self.width),
             "-y", str(self.height), shell],
            check=True, timeout=20,
        )  # fmt: skip
        self._tmux("resize-window", "-t", "t", "-x", str(self.width), "-y", str(self.height))

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
        raise AssertionError(f"timed out waiting for {what or predicate}; the screen was:\n{text}")

    def wait_text(self, needle: str, timeout: float = 30.0) -> str:
        return self.wait_for(lambda s: needle in s, timeout, repr(needle))

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    yield t
    t.kill()


def _python() -> str:
    return shlex.quote(sys.executable)


def _lock_when_free(problem: Path, timeout: float = 20.0) -> RunLock:
    """The problem's run lock, once no process holds it (RunLocked after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return acquire_run_lock(problem, command="the test")
        except RunLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.skipif(
    not (REPO / "cacao_tui" / "launch.py").exists() or not (MMUL / "session.jsonl").exists(),
    reason="needs the engine (cacao_tui/launch.py) and the mmul replay session (problems/mmul/session.jsonl)",
)
def test_real_app_replays_mmul_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    """cacao --dir <copy of problems/mmul> --provider replay --dry-run, watched and driven in a terminal."""
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    done = tmp_path / "exit_code"
    cli = f"{_python()} -c 'import sys; from cacao_tui.cli import main; sys.exit(main())'"
    tmux.start(f"{cli} --dir {shlex.quote(str(problem))} --provider replay --dry-run; echo $? > {done}", tmp_path)

    tmux.wait_text(" cacao ")  # the status bar: the app is up
    tmux.wait_text("b1-tiling", timeout=60)  # a branch arrived from the event stream
    screen = tmux.wait_text("mmul · finished", timeout=120)  # the replay ran to its end
    assert "replay" in screen
    # The app still shows the finished run; the directory is free for another run meanwhile.
    lock = _lock_when_free(problem)
    lock.release()

    tmux.keys("j")  # first branch
    tmux.wait_for(lambda s: "iterations" in s.splitlines()[1], what="the branch header")
    tmux.keys("3")  # Kernel tab: the branch's latest kernel, highlighted
    tmux.wait_text("kernels.cu")
    tmux.keys("d")  # its diff against the previous iteration
    tmux.wait_text("Kernel diff vs iter")
    tmux.keys("2")  # LLM tab: the replayed calls of that iteration
    tmux.wait_text("call(s)")
    tmux.keys("?")
    tmux.wait_text("Keys  (esc closes)")
    tmux.keys("Escape")
    tmux.wait_for(lambda s: "Keys  (esc closes)" not in s, what="the help screen to close")
    tmux.keys("b")
    tmux.wait_text("Results · mmul")
    tmux.keys("Escape")
    tmux.wait_text("Log  LLM  Kernel")
    tmux.keys("q")  # the run has finished: no question, the app leaves
    deadline = time.monotonic() + 30
    while not done.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert done.exists(), tmux.screen()
    assert done.read_text().strip() in {"0", "1"}  # ok, or a dry run with no timed result


@pytest.mark.slow
def test_scripted_app_pause_and_detach_in_tmux(tmux: Tmux, tmp_path: Path) -> None:
    """The FAKE scripted engine in a real terminal: p pauses a branch, q asks, d detaches."""
    result = tmp_path / "result.json"
    script = REPO / "tests" / "ui" / "scripted_engine.py"
    tmux.start(f"{_python()} {shlex.quote(str(script))} {tmp_path} --speed 5 --result-file {result}", REPO)
    tmux.wait_text("tiled-db", timeout=30)  # from the files on disk
    tmux.wait_text("20k↑", timeout=30)  # from the script's events: the fake engine knows its branches now
    tmux.keys("j")
    tmux.wait_for(lambda s: "iterations" in s.splitlines()[1], what="the branch header")
    tmux.keys("p")
    tmux.wait_text("‖ tiled")
    tmux.keys("q")
    tmux.wait_text("still running")
    tmux.keys("d")
    deadline = time.monotonic() + 20
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert json.loads(result.read_text()) == {"result": "detach"}, tmux.screen()


@pytest.mark.slow
@pytest.mark.skipif(
    not (REPO / "cacao_tui" / "launch.py").exists() or not (MMUL / "session.jsonl").exists(),
    reason="needs the engine (cacao_tui/launch.py) and the mmul replay session (problems/mmul/session.jsonl)",
)
def test_a_message_sent_with_m_mid_run_reaches_the_branchs_next_prompt(tmux: Tmux, tmp_path: Path) -> None:
    """The real app on the mmul replay: m on a running branch, type, Enter; every prompt of the
    branch's later steps carries the message, and the branch plans again."""
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    cli = f"{_python()} -c 'import sys; from cacao_tui.cli import main; sys.exit(main())'"
    tmux.start(f"{cli} --dir {shlex.quote(str(problem))} --provider replay --dry-run", tmp_path)
    tmux.wait_text("b1-tiling", timeout=60)
    tmux.keys("j")  # the first branch: b1-tiling, in its first iteration
    tmux.wait_for(lambda s: "b1-tiling" in s.splitlines()[1], what="the branch header")
    tmux.keys("m")
    tmux.wait_text("Message to b1-tiling")
    message = "keep PAD in every tuning space"
    tmux.keys(message, "Enter")
    tmux.wait_text("message queued")
    tmux.wait_text("mmul · finished", timeout=180)

    branch = problem / "output" / "branches" / "b1-tiling"
    manifest = json.loads((branch / "branch.json").read_text())
    assert [m["text"] for m in manifest["messages"]] == [message]
    sent_at = manifest["messages"][0]["at"]
    records = sorted(
        (json.loads(p.read_text()) for p in branch.glob("iter*/llm/*.json")), key=lambda r: r["started_at"]
    )
    # A step in flight when the message came finishes as it began; every later step sees it.
    in_flight = {(r["iteration"], r["node"]) for r in records if r["started_at"] <= sent_at}
    after = [r for r in records if r["started_at"] > sent_at and (r["iteration"], r["node"]) not in in_flight]
    assert after, "no prompt of the branch after the message"
    assert all(message in r["messages"][0]["content"] for r in after)
    assert any(r["node"] == "plan" and r["iteration"] > 1 for r in after)  # it planned again
