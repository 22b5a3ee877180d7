"""Class 6 of issue 10, text read back from disk: a run directory whose files (branch names,
manifests, states, kernels, LLM records, tuner results, NCU profiles, final_results.json) hold
escape sequences, NUL, C1 controls and U+202E is shown with every such character escaped — in
the app's panes (a late subscriber seeds itself from these files), the results view, ``cacao
--best`` and the headless renderer's final table. What the app would write to the terminal is
read from Textual's compositor (every visible cell of the screen)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from textual.app import App

sys.path.insert(0, str(Path(__file__).parents[1] / "ui"))

from scripted_engine import T0, write_final_results, write_run_files
from ui_helpers import Run, select, settle, start

from cacao_tui import cli
from cacao_tui.engine import events as ev
from cacao_tui.headless import HeadlessRenderer
from cacao_tui.store.atomic import write_json_atomic, write_model, write_text_atomic
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest, FinalResults, IterState, Strategy
from cacao_tui.ui.app import ResultsApp
from cacao_tui.ui.disk import load_selection, read_all_branches
from cacao_tui.ui.run_view import Selection
from ktt.protocol import ProfileReport

# Clears the screen, retitles the terminal, a NUL, a C1 CSI, a right-to-left override.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x00\x9b31m\u202eexe.txt"
HOSTILE_DIR = "evil\x1b[2J\u202e\x9b"  # a branch directory name (no NUL or '/' in a file name)


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on (line breaks aside)."""
    return sorted({c for c in text if not c.isprintable() and c != "\n"})


def hostile_run(root: Path) -> RunLayout:
    """The scripted run's files, with hostile text in everything the app reads back."""
    layout = RunLayout(root)
    write_run_files(layout)
    make_hostile(layout)
    return layout


def make_hostile(layout: RunLayout) -> None:
    write_final_results(layout)
    tiled = layout.branch("tiled")
    manifest = BranchManifest.model_validate_json(tiled.manifest.read_text())
    write_model(tiled.manifest, manifest.model_copy(update={"title": "tiles " + HOSTILE}))
    for i in (1, 2):
        it = tiled.iteration(i)
        write_text_atomic(it.kernel, it.kernel.read_text() + f"// {HOSTILE}\r\n")
        state = IterState.model_validate_json(it.state.read_text())
        assert state.decision is not None
        decision = state.decision.model_copy(update={"reason": "because " + HOSTILE})
        write_model(it.state, state.model_copy(update={"plan": "plan " + HOSTILE, "decision": decision}))
        profile = ProfileReport.model_validate_json(it.profile.read_text())
        kernel = profile.kernels[0]
        metrics = [m.model_copy(update={"label": m.label + HOSTILE}) for m in kernel.metrics]
        kernels = [kernel.model_copy(update={"metrics": metrics})]
        write_model(it.profile, profile.model_copy(update={"kernels": kernels}))
        lines = it.tune_results.read_text().splitlines()
        bad = [json.loads(line) for line in lines]
        for row in bad:
            if row.get("error"):
                row["error"] = "launch failed " + HOSTILE
        write_text_atomic(it.tune_results, "".join(json.dumps(row) + "\n" for row in bad))
        record = json.loads((it.llm / "plan_0.json").read_text())
        record["response"]["text"] = "the plan: " + HOSTILE
        record["request"]["messages"][1]["content"] = "prompt " + HOSTILE
        write_json_atomic(it.llm / "plan_0.json", record)
    write_json_atomic(layout.master, {"phase": "dispatched", "analysis": "analysis " + HOSTILE})
    # A directory no run names (issue 27: RunLayout.branch refuses the name, the models refuse it in
    # a manifest): put there by hand, it must be neither shown raw nor read as a branch.
    evil = layout.branches / HOSTILE_DIR
    evil.mkdir()
    strategy = Strategy(name="evil", title=HOSTILE, description=HOSTILE)
    manifest = {"name": HOSTILE_DIR, "title": HOSTILE, "strategy": strategy.model_dump(), "status": "failed",
                "created_at": T0, "updated_at": T0}  # fmt: skip
    (evil / "branch.json").write_text(json.dumps(manifest))
    results = FinalResults.model_validate_json(layout.final_results.read_text())
    branches = [b.model_copy(update={"stop_reason": HOSTILE, "title": HOSTILE}) for b in results.branches]
    branches[1] = branches[1].model_copy(update={"name": HOSTILE_DIR})
    hostile = results.model_copy(update={"problem_name": "mmul" + HOSTILE, "branches": branches})
    write_model(layout.final_results, hostile)


def screen_controls(app: App[object]) -> list[str]:
    """Control characters in what the app would draw now: every cell of the composed screen."""
    strips = app.screen._compositor.render_strips()
    return raw_controls("".join(seg.text for strip in strips for seg in strip if not seg.control))


def screen_text(app: App[object]) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip if not seg.control) for strip in strips)


def test_the_loaders_return_terminal_safe_text(tmp_path: Path) -> None:
    layout = hostile_run(tmp_path)
    branches = read_all_branches(layout)
    assert HOSTILE_DIR not in [b.name for b in branches]
    shown = repr([(b.name, b.manifest, b.states) for b in branches])
    assert "\\\\x1b" in shown and "\\\\u202e" in shown  # escaped, visibly
    details = load_selection(layout, Selection("tiled", 2))
    assert details.iteration is not None and details.iteration.kernel is not None
    kernel = details.iteration.kernel
    assert not raw_controls(kernel) and "\\x1b[2J" in kernel and "\t" not in raw_controls(kernel)
    assert "\r" not in kernel  # a CRLF line ends as a line, not as a raw carriage return
    for call in details.llm_calls:
        assert not raw_controls(call.response_text) and not raw_controls(json.dumps(call.messages, ensure_ascii=False))
    assert details.iteration.profile is not None
    labels = [m.label for k in details.iteration.profile.kernels for m in k.metrics]
    assert not raw_controls("".join(labels)) and any("\\u202e" in label for label in labels)
    errors = [r.error or "" for r in details.iteration.tuning.failures]
    assert errors and not raw_controls("".join(errors))
    run = load_selection(layout, Selection())
    assert run.analysis is not None and not raw_controls(run.analysis)


async def test_app_seeded_from_hostile_files_draws_no_raw_control(tmp_path: Path) -> None:
    run = Run(tmp_path)  # the scripted files ...
    make_hostile(run.layout)  # ... made hostile; no event is played: the app reads them back
    async with run.app().run_test(size=(160, 50)) as pilot:
        app = await start(pilot, run, play=False)
        # A directory whose name no branch can have is not read as a branch (issue 27), not even escaped.
        assert not any("u202e" in name or "\u202e" in name for name in app.view.branches)
        seen = []
        for selection in ((None, None), ("tiled", 2), ("tiled", 1)):
            await select(pilot, *selection)
            for tab in ("log", "llm", "kernel", "tuning", "profile"):
                app.main_screen.details.show_tab(tab)
                await settle(pilot)
                assert screen_controls(app) == [], (selection, tab)
                seen.append(screen_text(app))
            app.main_screen.action_toggle_diff()  # the kernel diff
            await settle(pilot)
            assert screen_controls(app) == [], (selection, "diff")
            app.main_screen.action_toggle_diff()
            await settle(pilot)
        assert "\\u202e" in "".join(seen)  # the hostile text is there, escaped


async def test_results_view_of_hostile_files_draws_no_raw_control(tmp_path: Path) -> None:
    layout = hostile_run(tmp_path)
    app = ResultsApp(layout)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        for row in range(3):
            app.screen.query_one("#results-branches").move_cursor(row=row)  # type: ignore[attr-defined]
            await settle(pilot)
            assert screen_controls(app) == [], row
        assert "\\u202e" in screen_text(app)


@pytest.mark.parametrize("json_out", [False, True])
def test_best_prints_no_raw_control(tmp_path: Path, capsys: pytest.CaptureFixture[str], json_out: bool) -> None:
    problem = tmp_path / "p"
    hostile_run(problem)
    (problem / "problem.yaml").write_text("name: p\n")
    argv = ["--dir", str(problem), "--best", "--no-ui"] + (["--json"] if json_out else [])
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert raw_controls(out.out + out.err) == []
    if json_out:
        assert json.loads(out.out)["problem_name"] == "mmul" + HOSTILE  # the same value for a program
    else:
        assert "\\u202e" in out.out and "tiled" in out.out


async def test_an_app_attached_to_a_hostile_run_log_draws_no_raw_control(tmp_path: Path) -> None:
    """The home screen's view of a run it did not start replays output/run.jsonl through the bus."""
    from cacao_tui.engine.runlog import RunLog
    from cacao_tui.ui.home.attach import AttachApp

    layout = hostile_run(tmp_path)
    log = RunLog(layout.run_log)
    log(ev.RunStarted(problem="p" + HOSTILE, problem_dir=str(tmp_path), provider="replay", model="m" + HOSTILE,
                      gpus=[0], max_iter=5, max_depth=2, n_strategies=2))  # fmt: skip
    log(ev.BranchAdded(branch="tiled", title=HOSTILE, description=HOSTILE, max_iter=5))
    log(ev.LogLine(message="from the model: " + HOSTILE, branch="tiled", iteration=1))
    log(ev.MasterPhase(phase="dispatched", message=HOSTILE))
    log.close()
    app = AttachApp(tmp_path, poll_interval=0.05)
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot)
        await select(pilot, "tiled")
        app.main_screen.details.show_tab("log")
        await settle(pilot)
        assert screen_controls(app) == []
        assert "\\u202e" in screen_text(app)


def test_headless_final_table_from_hostile_files(tmp_path: Path) -> None:
    layout = hostile_run(tmp_path)
    out = io.StringIO()
    HeadlessRenderer(out)(ev.RunFinished(status="ok", final_results=str(layout.final_results)))
    assert raw_controls(out.getvalue()) == [] and "\\u202e" in out.getvalue()
