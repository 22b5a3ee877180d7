"""``cacao --dir P`` without a terminal (stdout a file or a pipe, stdin /dev/null): plain progress
lines, never the app's escape codes, and the process ends by itself, or within 2 s of SIGTERM
(also once the pipe's reader has gone, as ``| head -c 100`` does)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.pathenv import child_pythonpath

REPO = Path(__file__).resolve().parents[1]
SIGTERM_S = 2.0


def _problem(tmp_path: Path) -> Path:
    problem = tmp_path / "mmul"
    shutil.copytree(REPO / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    return problem


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    return {**env, "PYTHONPATH": child_pythonpath(), "TERM": "xterm-256color"}


def test_a_run_into_a_file_prints_lines_and_exits(tmp_path: Path) -> None:
    problem = _problem(tmp_path)
    out = tmp_path / "out.txt"
    with out.open("wb") as f:
        done = subprocess.run([sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay",
                               "--dry-run"], stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT,
                              env=_env(), cwd=tmp_path, timeout=240)  # fmt: skip
    text = out.read_text()
    assert done.returncode == 0, text[-2000:]
    assert "\x1b" not in text  # no escape code: no app
    lines = text.splitlines()
    assert lines[0] == "cacao: no terminal (stdin or stdout is not one): running headless, as --no-ui"
    assert lines[1].startswith("cacao: starting mmul · replay/replay · dry run (no GPU)")
    assert "master: analyzing" in lines
    assert lines[-1].startswith("run ok")


def test_sigterm_ends_a_run_whose_reader_went_away(tmp_path: Path) -> None:
    """| head -c 100: the reader closes the pipe after 100 bytes; the run goes on quietly and stops
    cleanly within 2 s of SIGTERM (it used to spin in the app, deaf to SIGTERM)."""
    problem = _problem(tmp_path)
    # A slow session: the replay waits on nothing, so give the run enough iterations to outlive the read.
    child = subprocess.Popen([sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay",
                              "--dry-run", "--max-iter", "5"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=_env(), cwd=tmp_path)  # fmt: skip
    try:
        assert child.stdout is not None
        head = child.stdout.read(100)
        child.stdout.close()  # what head does after its 100 bytes
        assert b"\x1b" not in head and head.startswith(b"cacao: starting mmul")
        deadline = time.monotonic() + 60
        while not (problem / "output" / "branches").is_dir() and child.poll() is None:
            assert time.monotonic() < deadline, "the run made no branch"
            time.sleep(0.05)
        if child.poll() is None:
            sent = time.monotonic()
            child.send_signal(signal.SIGTERM)
            code = child.wait(timeout=30)
            took = time.monotonic() - sent
            assert took < SIGTERM_S, f"SIGTERM answered after {took:.2f} s"
            assert code in (130, 0, 1), code  # stopped cleanly (130), or it had just finished
        assert (problem / "output" / "final_results.json").is_file()  # a clean end, not a kill
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
