"""Issue 27, items 1, 2 and 9, and the two points it left to decide: a tampered output/ on --resume.

Before: a strategy named ``x/../../../../../pwn`` in master.json made ``--resume`` create that tree
outside the problem and write branch.json there (rc 0); with 200,001 files at the top of output/ the
link walk returned before reaching branches/, and a branch directory that was a link was written
through; a mistyped or too-deep master.json, a branch_config.json ``max_iter`` of 1e308 or a FIFO
branch_config.json under ``--branch --decision`` printed their one line *and* a traceback (rc 1);
readers followed ``branches/b1 -> elsewhere``; a context.json naming a paid provider switched a
resume to it with the user's key.

Now the names, paths and numbers of every state file are checked where the file is read (one
reader, ``store.atomic.read_model``, with the models of store/state.py), ``--resume`` reads them
all before it writes (store/run_state.py), the walk refuses past its limit, readers refuse a link
anywhere below output/, and a resume never switches to a paid provider unasked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.store.atomic import StateFileError, read_model
from cacao_tui.store.layout import RunLayout, UnsafeName
from cacao_tui.store.run_state import check_run_state
from cacao_tui.store.state import BranchManifest, IterState
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem

pytestmark = pytest.mark.timeout(600)
MARKER = "marker-of-elsewhere-27"


def _cacao(problem: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_API_BASE"))}
    base.pop("LLM_PROVIDER", None)
    full = {**base, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(problem.parent / "config"),
            **(env or {})}  # fmt: skip
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), *flags]
    return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=240, cwd=problem.parent)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    out = result.stdout + result.stderr
    assert result.returncode == 2, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    (line,) = result.stderr.strip().splitlines()
    return line


RESUME = ("--resume", "--no-ui", "--dry-run", "--max-iter", "1")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished replay dry-run of mmul (one iteration per branch), copied by each test."""
    problem = copy_problem(tmp_path_factory.mktemp("finished"))
    done = _cacao(problem, "--no-ui", "--dry-run", "--max-iter", "1", "--provider", "replay")
    assert done.returncode == 0, done.stderr[-3000:]
    return problem


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    problem = tmp_path / "work" / "mmul"
    shutil.copytree(finished, problem, symlinks=True)
    (problem / "output.lock").unlink(missing_ok=True)
    return problem


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


# -- item 1: names read back are checked by the branch-name rule -------------------------------


@pytest.mark.parametrize("name", ["x/../../../../../pwn", "../../../../pwn", "pwn\x1b]0;x\x07", "a" * 300, ""])
def test_resume_refuses_strategy_names_that_are_no_branch_names(name: str, run: Path, tmp_path: Path) -> None:
    layout = RunLayout(run)
    master = json.loads(layout.master.read_text())
    master["strategies"][0]["name"] = name
    master["phase"] = "dispatched"
    layout.master.write_text(json.dumps(master))
    shutil.rmtree(layout.branches)  # the branches are created again from master.json's names
    line = _one_line(_cacao(run, *RESUME))
    assert "master.json" in line and "strategies" in line and "\x1b" not in line
    assert not (tmp_path / "pwn").exists() and not list(tmp_path.rglob("pwn*"))
    assert not layout.branches.exists()  # refused before its first write
    assert not (run / "output.lock").exists()


def test_names_in_manifests_and_decisions_are_checked_when_read(run: Path) -> None:
    layout = RunLayout(run)
    name = layout.branch_names()[0]
    branch = layout.branch(name)
    _edit(branch.manifest, children=["../../../../elsewhere"])
    with pytest.raises(StateFileError, match="children"):
        read_model(branch.manifest, BranchManifest)
    with pytest.raises(StateFileError, match="children"):
        check_run_state(layout)
    _edit(branch.manifest, children=[])
    state = branch.iteration(1).state
    decision = {"action": "branch", "reason": "r", "sub_strategies": [{"name": "a/../../../../pwn", "title": "t",
                                                                       "description": "d"}]}  # fmt: skip
    _edit(state, decision=decision)
    with pytest.raises(StateFileError, match="sub_strategies"):
        read_model(state, IterState)
    with pytest.raises(StateFileError, match="sub_strategies"):
        check_run_state(layout)
    with pytest.raises(UnsafeName):
        layout.branch("../x")


# -- item 2: the walk refuses past its limit ----------------------------------------------------


def test_resume_past_the_walk_limit_is_refused_not_passed(run: Path, tmp_path: Path) -> None:
    layout = RunLayout(run)
    padding = layout.output / "padding"
    padding.mkdir()
    for i in range(200_001):  # at the top of output/'s walk, before branches/ is reached
        os.close(os.open(padding / f"f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
    elsewhere = tmp_path / "elsewhere"
    name = layout.branch_names()[0]
    shutil.move(layout.branch(name).root, elsewhere)
    layout.branch(name).root.symlink_to(elsewhere)
    before = sorted(str(p) for p in elsewhere.rglob("*"))
    line = _one_line(_cacao(run, *RESUME))
    assert "more than 200,000 entries" in line
    assert sorted(str(p) for p in elsewhere.rglob("*")) == before  # nothing written through the link


# -- item 9: one line, exit 2, for every state file that is not what the run wrote -------------


@pytest.mark.parametrize(
    "file, change",
    [
        ("master.json", {"strategies": "nope"}),
        ("master.json", {"analysis": json.loads("[" * 90 + "]" * 90), "x": "deep"}),
        ("branch_config.json", {"max_iter": 1e308}),
        ("branch_config.json", {"max_iter": -3}),
        ("branch.json", {"iterations_done": "many"}),
    ],
)
def test_a_state_file_error_is_one_line_and_exit_2(file: str, change: dict[str, object], run: Path) -> None:
    layout = RunLayout(run)
    branch = layout.branch(layout.branch_names()[0])
    path = {"master.json": layout.master, "branch_config.json": branch.config, "branch.json": branch.manifest}[file]
    if change.get("x") == "deep":
        path.write_text('{"analysis": ' + "[" * 4000 + "]" * 4000 + "}")
    else:
        _edit(path, **change)
    line = _one_line(_cacao(run, *RESUME))
    assert file in line


def test_a_fifo_branch_config_under_branch_decision_is_one_line(run: Path) -> None:
    layout = RunLayout(run)
    name = layout.branch_names()[0]
    config = layout.branch(name).config
    config.unlink()
    os.mkfifo(config)
    line = _one_line(_cacao(run, "--branch", name, "--decision", "continue"))  # continue reads the config
    assert "branch_config.json" in line and "FIFO" in line


# -- decided: readers follow no link below output/ (SECURITY.md says "never through a link") ----


def test_readers_refuse_a_link_in_the_middle_of_a_path(run: Path, tmp_path: Path) -> None:
    layout = RunLayout(run)
    name = layout.branch_names()[0]
    elsewhere = tmp_path / "elsewhere"
    shutil.move(layout.branch(name).root, elsewhere)
    _edit(elsewhere / "branch.json", title=MARKER)
    layout.branch(name).root.symlink_to(elsewhere)
    with pytest.raises(StateFileError, match="symbolic link"):
        read_model(layout.branch(name).manifest, BranchManifest)  # the last part is a plain file
    assert name not in layout.branch_names()
    best = _cacao(run, "--best", "--no-ui")
    out = best.stdout + best.stderr
    assert MARKER not in out and "Traceback" not in out, out[-3000:]
    resumed = _one_line(_cacao(run, *RESUME))
    assert "symbolic link" in resumed


# -- decided: --resume never switches to another paid provider on its own -----------------------


def test_resume_does_not_switch_to_a_paid_provider_named_by_context_json(run: Path) -> None:
    layout = RunLayout(run)
    context = json.loads(layout.context.read_text())
    context["settings"]["provider"], context["settings"]["model"] = "openai", "gpt-6.1-sol"
    layout.context.write_text(json.dumps(context))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-not-a-key", "OPENAI_API_KEY": "sk-test-not-a-key"}
    line = _one_line(_cacao(run, *RESUME, env=env))
    assert "--provider openai" in line and "anthropic" in line and "context.json" in line
    assert "sk-" not in line
