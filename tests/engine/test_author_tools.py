"""The authoring step's query tools: what they answer, and that hostile arguments get one
bounded error line (no path built from a name, no regular expression run, no huge output)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cacao_tui.llm import ToolCall
from cacao_tui.nodes.author_tools import run_file_tool, tool_specs
from cacao_tui.nodes.branch_queries import BranchQueries, QueryError
from cacao_tui.settings import DEFAULTS
from cacao_tui.store.atomic import write_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import (
    AuthorOutcome,
    BranchManifest,
    Decision,
    ErrorAnalysis,
    IterState,
    Strategy,
    TuneOutcome,
)
from ktt.protocol import ConfigResult, ValidationReport

LIMIT = DEFAULTS.tool_output_chars


def _branch(layout: RunLayout, name: str, *, iterations: int, parent: str | None = None, best: float = 1.0) -> None:
    b = layout.branch(name)
    write_model(
        b.manifest,
        BranchManifest(
            name=name,
            title=f"strategy {name}",
            strategy=Strategy(name=name, title=f"strategy {name}", description=f"does {name}"),
            parent=parent,
            status="running",
            iterations_done=iterations,
        ),
    )
    for i in range(1, iterations + 1):
        rows = []
        for k, (tile, pad) in enumerate((t, p) for t in (8, 16, 32) for p in (0, 1)):
            ok = not (tile == 32 and pad == 1)
            rows.append(
                ConfigResult(
                    index=k,
                    config={"TILE": tile, "PAD": pad},
                    status="ok" if ok else "validation_failed",
                    time_ms=best * (1 + abs(tile - 16) / 16 + pad / 10) if ok else None,
                    validation=None if ok else ValidationReport(reason="wrong values", max_abs_error=3.5, buffer="C"),
                )
            )
        it = b.iteration(i)
        it.tune_dir.mkdir(parents=True, exist_ok=True)
        it.tune_results.write_text("".join(r.model_dump_json() + "\n" for r in rows))
        write_model(
            it.state,
            IterState(
                branch=name,
                index=i,
                status="decided",
                author=AuthorOutcome(ok=True),
                run=TuneOutcome(
                    ran=True, best_ms=best, evaluated=6, valid=5, by_status={"ok": 5, "validation_failed": 1}
                ),
                decision=Decision(
                    action="retry" if i == 1 else "continue",
                    reason="r",
                    iteration_summary=f"{name} tried thing {i} -> {best} ms",
                    error_analysis=ErrorAnalysis(error_type="validation", root_cause=f"cause {i}", suggested_fix="fix")
                    if i == 1
                    else None,
                ),
            ),
        )


@pytest.fixture
def run_dir(tmp_path: Path) -> RunLayout:
    layout = RunLayout(tmp_path / "problem")
    _branch(layout, "b1-tiled", iterations=2)
    _branch(layout, "b2-other", iterations=1, best=3.0)
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    return layout


@pytest.fixture
def queries(run_dir: RunLayout) -> BranchQueries:
    return BranchQueries(run=run_dir, name="b1-tiled", current=3, limits=DEFAULTS)


def test_landscape_top_sweep_and_failures(queries: BranchQueries) -> None:
    top = queries.tuning_landscape(1, "top", n=3)
    assert "1.        1 ms  TILE=16, PAD=0" in top and "5/6 valid" in top and top.count(" ms  TILE=") == 3
    sweep = queries.tuning_landscape(1, "sweep", param="TILE")
    # The others held at the best configuration (PAD=0): one row per TILE value.
    assert "TILE swept with the others at the best (PAD=0)" in sweep
    assert "TILE=8: 1.5 ms" in sweep and "TILE=16: 1 ms" in sweep and "TILE=32: 2 ms (ok 1)" in sweep
    failures = queries.tuning_landscape(1, "failures")
    assert "validation_failed 1" in failures and "wrong values; max abs error 3.5 in C" in failures


def test_landscape_refuses_bad_arguments(queries: BranchQueries) -> None:
    for args, needle in [
        ((0, "top"), "iteration must be a number from 1 to 2"),
        ((3, "top"), "iteration must be a number from 1 to 2"),
        ((10**30, "top"), "iteration must be a number from 1 to 2"),
        ((1, "bogus"), "mode must be one of top, sweep, failures"),
    ]:
        with pytest.raises(QueryError, match=needle):
            queries.tuning_landscape(*args)
    with pytest.raises(QueryError, match="parameters: TILE, PAD"):
        queries.tuning_landscape(1, "sweep", param="../../etc")
    huge = queries.tuning_landscape(1, "top", n=10**9)  # clamped, not an error
    assert huge.count(" ms  TILE=") == 5


def test_grep_is_a_bounded_substring_search(queries: BranchQueries) -> None:
    hits = queries.grep_tuner_output(1, "VALIDATION")
    assert "1 matching line(s)" in hits and "validation_failed" in hits
    # A catastrophic regular expression is just text here: it is searched for literally, at once.
    started = time.monotonic()
    answer = queries.grep_tuner_output(1, "(a+)+$" + "a" * 150)
    assert time.monotonic() - started < 1.0 and "no line" in answer
    with pytest.raises(QueryError, match="longer than 200"):
        queries.grep_tuner_output(1, "x" * 5000)
    with pytest.raises(QueryError, match="non-empty"):
        queries.grep_tuner_output(1, "   ")


def test_list_iterations_and_history(queries: BranchQueries) -> None:
    listed = queries.list_iterations()
    assert "- iter 1" in listed and "b1-tiled tried thing 2" in listed and "iter 3" not in listed
    assert '"root_cause": "cause 1"' in queries.history(1)


def test_other_branches_by_exact_name_only(queries: BranchQueries, run_dir: RunLayout) -> None:
    index = queries.branch_index()
    assert "b2-other" in index and "b1-tiled" not in index
    log = queries.branch_log("b2-other")
    assert "b2-other tried thing 1 -> 3.0 ms" in log and "__global__" not in log
    assert "cause: cause 1" in queries.branch_errors("b2-other")
    for hostile in ("../b2-other", "b2-other/../../..", "/etc/passwd", "..", "b1-tiled", "x" * 10_000, "b2-other\n"):
        with pytest.raises(QueryError, match="no other branch named"):
            queries.branch_log(hostile)
        with pytest.raises(QueryError, match="no other branch named"):
            queries.branch_errors(hostile)
    # A directory that looks like a branch but is outside branches/ is never reached.
    with pytest.raises(QueryError):
        queries.branch_log("../../secret.txt")


def test_outputs_are_capped(run_dir: RunLayout) -> None:
    b = run_dir.branch("b1-tiled")
    it = b.iteration(1)
    rows = [
        ConfigResult(index=k, config={"TILE": k, "PAD": 0}, status="ok", time_ms=1.0 + k, error="e" * 2000)
        for k in range(3000)
    ]
    it.tune_results.write_text("".join(r.model_dump_json() + "\n" for r in rows))
    q = BranchQueries(run=run_dir, name="b1-tiled", current=3, limits=DEFAULTS)
    for answer in (
        q.tuning_landscape(1, "top", n=10_000),
        q.tuning_landscape(1, "sweep", param="TILE"),
        q.grep_tuner_output(1, "TILE"),
        q.list_iterations(),
        q.errors(),
    ):
        assert len(answer) <= LIMIT


def test_every_tool_is_offered_and_an_unknown_one_is_an_error(queries: BranchQueries) -> None:
    # A constant tool list: it is part of the prompt prefix providers cache.
    names = {t.name for t in tool_specs()}
    assert {"write_file", "edit_file", "read_file", "read_notes", "check_compilation", "end_step"} <= names
    assert "history" in names  # one tool for the questions about earlier iterations and other branches
    # Through the dispatcher: a tool not offered is an error naming the ones that are.
    offered = names - {"history"}
    call = ToolCall(id="1", name="history", arguments={"what": "branch_log", "name": "b2-other"})
    answer = run_file_tool(call, None, queries, offered)  # type: ignore[arg-type]
    assert answer.is_error and "unknown tool 'history'" in answer.content
    offered = names
    call = ToolCall(id="5", name="history", arguments={"what": "nonsense"})
    answer = run_file_tool(call, None, queries, offered)  # type: ignore[arg-type]
    assert answer.is_error and "what must be one of landscape" in answer.content
    call = ToolCall(id="6", name="history", arguments={"what": "grep", "iteration": 2, "text": "PAD=1"})
    assert "matching line" in run_file_tool(call, None, queries, offered).content  # type: ignore[arg-type]
    # The earlier tool names (one tool each) are still answered: recorded sessions replay.
    call = ToolCall(id="2", name="tuning_landscape", arguments={"iteration": True, "mode": "top"})
    assert run_file_tool(call, None, queries, offered).is_error  # type: ignore[arg-type]
    call = ToolCall(id="3", name="tuning_landscape", arguments={"iteration": "9" * 5000, "mode": "top"})
    assert run_file_tool(call, None, queries, offered).is_error  # type: ignore[arg-type]
    call = ToolCall(id="4", name="grep_tuner_output", arguments={"iteration": 2, "text": "PAD=1"})
    ok = run_file_tool(call, None, queries, offered)  # type: ignore[arg-type]
    assert not ok.is_error and "matching line" in ok.content
