"""Issue 23, item 6: every file under output/ and the launch log is read as a capped, non-blocking
regular file (``ktt.capped_read``), never through a link.

Before: ``launch.log`` as a FIFO froze the home screen, as a link to /dev/zero exhausted memory and
as a link to a private key showed it on screen; a FIFO ``branch_config.json`` made ``--resume`` hang
for 779 s ignoring SIGINT and SIGTERM; FIFO or 3 GB state files hung or crashed ``--best``, the
attached view, ``cacao collect`` and run start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "ui"))

from scripted_engine import write_run_files

from cacao_tui.runs.launcher import LAUNCH_LOG, log_tail
from cacao_tui.store.atomic import StateFileError, read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import BranchManifest
from cacao_tui.suite.collect import collect_row
from cacao_tui.ui.disk import load_selection, read_all_branches
from cacao_tui.ui.run_view import Selection
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem

pytestmark = pytest.mark.timeout(300)
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- marker-5f3a9"
KINDS = ["fifo", "dev-zero", "sparse-3gb", "link-to-secret"]


def make_hostile(path: Path, kind: str, secret: Path) -> None:
    """Replace ``path`` with a FIFO, a link to /dev/zero, a sparse 3 GB file or a link to a secret file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "sparse-3gb":
        with open(path, "wb") as f:
            f.truncate(3 * 1024**3)
    else:
        path.symlink_to(secret)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "id_ed25519"
    path.write_text(SECRET + "\n")
    return path


def _run(tmp_path: Path) -> RunLayout:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_run_files(layout)
    return layout


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_launch_log_shows_nothing_and_never_blocks(kind: str, tmp_path: Path, secret: Path) -> None:
    log = tmp_path / "output" / LAUNCH_LOG
    make_hostile(log, kind, secret)
    started = time.monotonic()
    lines = log_tail(log)
    assert time.monotonic() - started < 5
    assert SECRET not in "\n".join(lines)
    assert lines == [] or kind == "sparse-3gb"  # a regular file: its (empty) tail


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_state_file_is_one_error(kind: str, tmp_path: Path, secret: Path) -> None:
    layout = _run(tmp_path)
    manifest = layout.branch("tiled").manifest
    make_hostile(manifest, kind, secret)
    started = time.monotonic()
    with pytest.raises(StateFileError) as info:
        read_model(manifest, BranchManifest)
    assert time.monotonic() - started < 5
    assert "\n" not in str(info.value) and SECRET not in str(info.value)


@pytest.mark.parametrize("kind", KINDS)
def test_the_attached_views_loaders_survive_hostile_files(kind: str, tmp_path: Path, secret: Path) -> None:
    layout = _run(tmp_path)
    tiled = layout.branch("tiled")
    for path in (tiled.manifest, tiled.iteration(1).kernel, tiled.iteration(1).tune_results, layout.master,
                 tiled.iteration(1).llm / "plan_0.json", layout.master_llm / "analyze_000.json"):  # fmt: skip
        make_hostile(path, kind, secret)
    started = time.monotonic()
    branches = read_all_branches(layout)
    details = [load_selection(layout, Selection(branch="tiled", iteration=1)), load_selection(layout, Selection())]
    assert time.monotonic() - started < 10
    assert SECRET not in repr(branches) + repr(details)


@pytest.mark.parametrize("kind", KINDS)
def test_collect_reads_a_hostile_run_log_within_its_bounds(kind: str, tmp_path: Path, secret: Path) -> None:
    layout = _run(tmp_path)
    make_hostile(layout.run_log, kind, secret)
    make_hostile(layout.final_results, kind, secret)
    started = time.monotonic()
    row = collect_row(layout.problem_dir)
    assert time.monotonic() - started < 10
    assert SECRET not in repr(row)


def _cacao(problem: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(problem.parent / "config")}
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), *flags]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=problem.parent)


@pytest.mark.parametrize("kind", KINDS)
def test_best_with_hostile_state_files_is_bounded(kind: str, tmp_path: Path, secret: Path) -> None:
    layout = _run(tmp_path)
    make_hostile(layout.final_results, kind, secret)
    make_hostile(layout.branch("tiled").manifest, kind, secret)
    started = time.monotonic()
    result = _cacao(layout.problem_dir, "--best", "--no-ui")
    assert time.monotonic() - started < 60
    out = result.stdout + result.stderr
    assert "Traceback" not in out and SECRET not in out, out[-2000:]
    assert result.returncode in (0, 1)


def test_resume_with_a_fifo_branch_config_is_refused_at_once(tmp_path: Path) -> None:
    layout = _run(tmp_path)
    make_hostile(layout.branch("tiled").config, "fifo", tmp_path / "none")
    started = time.monotonic()
    result = _cacao(layout.problem_dir, "--resume", "--no-ui", "--dry-run", "--provider", "replay")
    assert time.monotonic() - started < 60  # before: 779 s, deaf to SIGINT and SIGTERM
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "branch_config.json" in line and "FIFO" in line
    assert not (layout.problem_dir / "output.lock").exists()  # a refused run leaves no lock file
