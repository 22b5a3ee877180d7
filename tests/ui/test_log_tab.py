"""The Log tab shows the run's progress lines as `cacao --no-ui` prints them (issue 32 item 3):
the analysis, strategies, tunings, decisions and bests among the log lines, in the order they came,
each under its branch when a branch is selected."""

from __future__ import annotations

import io

from scripted_engine import script
from ui_helpers import Run, select, start

from cacao_tui.engine import events as ev
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.ui.formatting import safe_event
from cacao_tui.ui.run_view import Selection


def _headless_lines(events: list[ev._Event]) -> list[str]:
    renderer = HeadlessRenderer(io.StringIO())
    out = []
    for e in events:
        if isinstance(e, ev.LogLine):
            continue
        text = renderer.render(safe_event(e))
        out += [line.rstrip() for line in (text or "").split("\n") if line.strip()]
    return out


def _shown(app: object, selection: Selection | None = None) -> list[str]:
    """The Log's lines without their clock and level: what the line says."""
    return [line.split(" ", 2)[2] for line in app.store.lines(selection or Selection())]  # type: ignore[attr-defined]


async def test_the_run_log_holds_every_progress_line_headless_prints_in_order(run: Run) -> None:
    async with run.app().run_test(size=(120, 40)) as pilot:
        app = await start(pilot, run)
        shown = _shown(app)
        expected = _headless_lines(script(run.layout))
        assert expected and any(line.startswith("master: analyzing") for line in expected)
        progress = [line for line in shown if line in expected]
        assert progress == expected, (expected, shown)  # every one, in the order headless prints them
        for words in ("master: dispatched (2 strategies)", "+ tiled: ", "tiled #1: tuned: best 1.8 ms",
                      "★ new run best: tiled #2", "tiled #2: decide → branch: try double buffering",
                      "master: LLM analyze#0: 1,200 in / 340 out"):  # fmt: skip
            assert any(line.startswith(words) for line in shown), (words, shown)
        # The log lines themselves are still there, among them.
        assert any(line == "tiled/1: iteration 1: planning" for line in shown), shown


async def test_a_branchs_log_holds_its_own_progress_lines(run: Run) -> None:
    async with run.app().run_test(size=(120, 40)) as pilot:
        app = await start(pilot, run)
        await select(pilot, "tiled")
        shown = _shown(app, Selection("tiled"))
        assert any(line.startswith("tiled #1: tuned:") for line in shown), shown
        assert not any("vectorized" in line for line in shown), shown
        assert not any(line.startswith("master:") for line in shown), shown
        await select(pilot, "tiled", 1)
        one = _shown(app, Selection("tiled", 1))
        assert any(line.startswith("tiled #1: tuned:") for line in one) and not any("#2:" in ln for ln in one), one
        pane_text = "\n".join(app.main_screen.details.log_pane.log_widget.lines)
        assert "tiled #1: tuned:" in pane_text
