"""Issue 23, items 10 and 11: output/reference_time.json is never read through a link, and what
a traceback used to report is one line.

Before: a link ``output/reference_time.json`` -> any host JSON file was read, and the next fresh
run copied its content into output/ (and onto cluster nodes); ``cacao collect`` with mistyped
token or cost fields, deep JSON in reference_time.json or in a replay session.jsonl, ended in
a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.llm.session_file import SESSION_FORMAT
from cacao_tui.store.archive import prepare_output
from cacao_tui.store.layout import RunLayout
from ktt.reference_times import ReferenceTimeError, read_reference_times
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem, started, write_log

MARKER = "host-file-marker-7d1c"
DEEP = "[" * 50_000 + "]" * 50_000


def _cacao(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(cwd / "config")}
    return subprocess.run([sys.executable, "-m", "cacao_tui", *argv], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)  # fmt: skip


def _host_json(tmp_path: Path) -> Path:
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"reference_time_us": 123.0, "note": MARKER}))
    return host


def _anywhere(root: Path, needle: str) -> list[Path]:
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return [p for p in files if needle in p.read_text(errors="replace")]


def test_a_linked_reference_time_refuses_the_run_and_copies_nothing(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_log(problem, [started()])  # an earlier run: a fresh run would archive it
    layout.reference_time.symlink_to(_host_json(tmp_path))
    result = _cacao("--dir", str(problem), "--no-ui", "--dry-run", "--provider", "replay", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "reference_time.json" in line and "symbolic link" in line
    assert not (problem / "archive").exists() and not (problem / "output.lock").exists()
    assert not _anywhere(problem, MARKER)


def test_archiving_never_copies_a_linked_seed(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_log(problem, [started()])
    layout.reference_time.symlink_to(_host_json(tmp_path))
    prepared = prepare_output(problem, resume=False, no_clean=False)
    assert prepared.archived_to is not None and not prepared.reference_time_carried
    assert not layout.reference_time.exists()
    assert not _anywhere(problem, MARKER)  # the archive keeps the link itself, never its target's text


@pytest.mark.parametrize("text", [DEEP, '{"reference_time_us": ' + "9" * 400 + "}", '{"cases": ' + DEEP + "}"])
def test_a_hostile_reference_time_is_one_line(text: str, tmp_path: Path) -> None:
    path = tmp_path / "reference_time.json"
    path.write_text(text)
    with pytest.raises(ReferenceTimeError) as info:
        read_reference_times(path, "base")
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    problem = copy_problem(tmp_path)
    RunLayout(problem).output.mkdir()
    RunLayout(problem).reference_time.write_text(text)
    result = _cacao("--dir", str(problem), "--no-ui", "--dry-run", "--provider", "replay", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert len(result.stderr.strip().splitlines()) == 1


def test_collect_with_mistyped_numbers_is_a_table(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_log(problem, [started()])
    with layout.run_log.open("a") as f:
        f.write(json.dumps({"type": "llm_call", "ts": "soon", "run": {"input_tokens": "many", "output_tokens": 1e400,
                                                                      "cost_usd": "free"}}) + "\n")  # fmt: skip
        f.write(json.dumps({"type": "llm_call", "ts": 5, "run": {"input_tokens": [1], "cost_usd": {"x": 1}}}) + "\n")
        f.write('{"type": "job_placed", "host": ' + DEEP + "}\n")
    layout.final_results.write_text(json.dumps({"tokens": {"input": "abc"}, "cost_usd": "x"}))
    result = _cacao("collect", str(problem), "--output", str(tmp_path / "summary"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "mmul" in result.stdout


def test_a_replay_session_with_deep_json_is_one_line(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    (problem / "session.jsonl").write_text(json.dumps({"format": SESSION_FORMAT}) + "\n" + DEEP + "\n")
    result = _cacao("--dir", str(problem), "--no-ui", "--dry-run", "--provider", "replay", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert "session.jsonl:2" in line


def test_a_fifo_given_to_from_says_what_it_is(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    result = _cacao("--dir", str(problem), "--no-ui", "--dry-run", "--provider", "replay", "--from", str(fifo),
                    cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "FIFO" in line and "not found" not in line


def test_a_validate_config_nested_too_deeply_is_a_tool_error() -> None:
    """The model's ``validate`` tool argument: 2,000 characters of ``[`` parsed to a RecursionError."""
    from cacao_tui.nodes.validate import ValidateRefused, config_argument

    with pytest.raises(ValidateRefused, match="config must be an object"):
        config_argument("[" * 1999)
