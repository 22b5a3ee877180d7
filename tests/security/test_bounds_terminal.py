"""Class 6 of issue 10: escape sequences, NUL, C1 controls and U+202E in problem names, branch names
and the model's log lines are shown escaped, never written raw to the terminal."""

from __future__ import annotations

import io
import json

import pytest

from cacao_tui.engine.events import BranchAdded, LogLine, RunStarted
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.ui.formatting import safe_event, safe_text

HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\x00\x9b31m\u202etxt.exe\u2066"


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on (line breaks aside)."""
    return [c for c in text if not c.isprintable() and c != "\n"]


def started(problem: str) -> RunStarted:
    return RunStarted(
        problem=problem, problem_dir="/p", provider="fake", model="m", gpus=[0], max_iter=1, max_depth=1, n_strategies=1
    )


def test_safe_text_escapes_every_control_and_keeps_plain_text() -> None:
    plain = "mmul (tiled) — ×1.5 µs"
    assert safe_text(plain) is plain
    shown = safe_text(HOSTILE)
    assert not raw_controls(shown)
    for visible in ("\\x1b", "\\x07", "\\x00", "\\x9b", "\\u202e", "\\u2066"):
        assert visible in shown
    assert safe_text("two\nlines", keep_newlines=True) == "two\nlines"
    assert safe_text("two\nlines") == "two\\x0alines"


@pytest.mark.parametrize("json_lines", [False, True])
def test_headless_output_has_no_raw_controls(json_lines: bool) -> None:
    out = io.StringIO()
    render = HeadlessRenderer(out, json_lines=json_lines, verbose=True)
    render(started(HOSTILE))
    render(BranchAdded(branch="b1", title=HOSTILE, description=HOSTILE, max_iter=1))
    render(LogLine(level="info", message=f"model says {HOSTILE}\nsecond line", branch="b1", iteration=1))
    text = out.getvalue()
    assert not raw_controls(text)
    assert "\\u202e" in text
    if json_lines:
        first = json.loads(text.splitlines()[0])
        assert first["problem"] == HOSTILE  # escaped on the terminal, the same value for a program


def test_events_reach_the_app_escaped() -> None:
    event = safe_event(LogLine(level="info", message=HOSTILE + "\nnext", branch="b\x1b", iteration=None))
    assert not raw_controls(event.message) and "\n" in event.message
    assert event.branch == "b\\x1b"
    calm = LogLine(level="info", message="fine", branch="b", iteration=None)
    assert safe_event(calm) is calm
