"""Issue 27, items 5-7 and 10-17: hostile numbers in run files, hostile lock notes, launch logs,
directory names, model text in reports, suite names, llm.toml, and the problem editor's save.

Before: a 400-digit number in an original-layout output/ crashed --best, --json, --export and
``cacao collect`` (OverflowError); a FIFO launch.log blocked a resumed start from the app for
good; a GPU lock note with ``"pid": Infinity``, ``1e400`` or 4,000-deep JSON took the GPU panel
down and made the tuner's lock raise instead of wait; collect's CSV kept a directory name's ESC,
BEL and newline; the Markdown export passed the model's HTML, images and ``javascript:`` links
on; -5 ms, ``inf`` speedup and cost, 1e308 ms and 10^12 s of GPU time were shown as results;
problems ``x``, ``x`` and ``x-2`` shared a suite log; llm.toml with deep nesting was a
RecursionError, a 4 GiB one was read whole, an infinite price was taken; the editor's save
recursed (3,000 deep: RecursionError) and dropped a top-level FIFO silently; ``ktt validate
--config`` with deep JSON was a traceback and exit 4.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from cacao_tui.cli import main as cacao_main
from cacao_tui.llm.errors import LLMError
from cacao_tui.llm.recording import CallRecord
from cacao_tui.llm.user_config import load_llm_settings
from cacao_tui.problem.writer import read_problem_source, save_problem
from cacao_tui.runs.gpu_status import GpuStatus
from cacao_tui.runs.last_run import gpu_seconds
from cacao_tui.runs.launcher import LAUNCH_LOG, LaunchRefused, RunOptions, start_detached
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.results import FROM_FILE, LoadedResults
from cacao_tui.store.results_export import render_markdown
from cacao_tui.store.state import BranchSummary, FinalResults, IterationPoint, IterState
from cacao_tui.suite.collect import collect_row, to_csv, to_markdown
from cacao_tui.suite.runner import unique_names
from cacao_tui.ui.disk import read_tuning
from ktt import gpu_lock
from ktt.problem import ProblemError
from tests.pathenv import child_pythonpath
from tests.runs.run_files import copy_problem
from tests.ui.scripted_engine import write_final_results, write_run_files

pytestmark = pytest.mark.timeout(300)
ROOT = Path(__file__).resolve().parents[2]
OLD_RUN = ROOT / "tests" / "compat" / "problems" / "old_run"
BIG = "1" + "0" * 400  # a JSON number no float holds


def _raw_replace(path: Path, pattern: str, replacement: str, *, required: bool = True) -> None:
    """Edit a JSON file as text (numbers JSON cannot spell through json.dumps: 10^400, Infinity)."""
    text = path.read_text()
    new, n = re.subn(pattern, replacement, text)
    assert n or not required, (path, pattern)
    path.write_text(new)


# -- item 5: 400-digit numbers in an original-layout output/ ------------------------------------


def test_an_original_run_with_400_digit_numbers_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "suite"
    problem = folder / "old_run"
    shutil.copytree(OLD_RUN, problem)
    out = problem / "output"
    _raw_replace(out / "final_results.json", r'"speedup": [0-9.e+-]+', f'"speedup": {BIG}')
    for path in out.rglob("*.json"):  # final_results, branch.json, state.json's results_summary, KTT results
        for key in ("best_time_us", "Duration", "TotalDuration"):
            _raw_replace(path, f'"{key}": [0-9.e+-]+', f'"{key}": {BIG}', required=False)
    assert BIG in (out / "branches" / "vectorized" / "iter2" / "state.json").read_text()
    shutil.copytree(OLD_RUN, folder / "good_run")  # one bad problem must not end collect for the folder
    assert cacao_main(["--dir", str(problem), "--best", "--no-ui"]) in (0, 1)
    assert cacao_main(["--dir", str(problem), "--best", "--json"]) in (0, 1)
    for suffix in (".csv", ".md"):
        assert cacao_main(["--dir", str(problem), "--best", "--export", str(tmp_path / f"r{suffix}")]) in (0, 1)
    assert cacao_main(["collect", str(problem), str(folder / "good_run"), "--output", str(tmp_path / "table")]) == 0
    printed = capsys.readouterr().out
    assert "0" * 300 not in printed + (tmp_path / "table.csv").read_text() + (tmp_path / "r.md").read_text()
    assert "good_run" in (tmp_path / "table.csv").read_text()


# -- item 6: a FIFO launch.log ------------------------------------------------------------------


def test_a_fifo_launch_log_refuses_a_resumed_start_at_once(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_run_files(layout)
    log = layout.output / LAUNCH_LOG
    os.mkfifo(log)
    outcome: list[object] = []

    def start() -> None:
        try:
            outcome.append(start_detached(problem, RunOptions(resume=True, dry_run=True, provider="replay")))
        except LaunchRefused as exc:
            outcome.append(exc)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():  # blocked in open(): let it go, then fail
        os.close(os.open(log, os.O_RDONLY | os.O_NONBLOCK))
        pytest.fail("starting a resumed run blocked on a FIFO launch.log")
    (refused,) = outcome
    assert isinstance(refused, LaunchRefused) and "launch.log" in str(refused) and "\n" not in str(refused)


# -- item 7: a GPU lock note anyone can write ---------------------------------------------------

HOLD = "import fcntl, os, sys, time\nfd = os.open(sys.argv[1], os.O_RDWR)\nfcntl.flock(fd, fcntl.LOCK_EX)\n" \
       "print('held', flush=True)\ntime.sleep(60)\n"  # fmt: skip


NOTES = ['{"pid": Infinity, "host": "h", "what": "w", "since": "s"}',
         '{"pid": 1e400, "host": "h", "what": "w", "since": "s"}',
         "[" * 4000 + "]" * 4000,
         '{"pid": 5, "host": "h", "what": "w", "since": "9999-12-31T23:59:59-12:00"}']  # fmt: skip


@pytest.mark.parametrize("note", NOTES)
def test_a_hostile_gpu_lock_note_is_waited_on(note: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_GPU_LOCK_DIR", str(tmp_path))
    path = gpu_lock.lock_file(0)
    path.write_text(note)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        found = gpu_lock.holder_now(0)
        assert found is not None and "\n" not in found.describe()
        heard: list[str] = []
        with pytest.raises(TimeoutError):  # waits for the GPU, as for any holder
            gpu_lock.acquire(0, "ktt tune of problem x", on_wait=heard.append, timeout_s=0.6)
        assert heard and heard[0].startswith("waiting for GPU 0")
        spec = importlib.util.spec_from_file_location("pynvml", ROOT / "tests" / "fake_nvml" / "pynvml.py")
        assert spec is not None and spec.loader is not None
        nvml = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(nvml)
        samples = GpuStatus(nvml=nvml).sample()
        assert samples and samples[0].holder is not None  # the panel shows a busy GPU, it does not vanish
    finally:
        holder.kill()
        holder.wait()


# -- items 10 and 11: CSV cells and the Markdown report ------------------------------------------


def test_collect_escapes_control_characters_of_directory_names(tmp_path: Path) -> None:
    name = "x\x1b[31m\x07\ny"
    problem = copy_problem(tmp_path, name)
    write_run_files(RunLayout(problem))
    rows = [collect_row(problem)]
    for table in (to_csv(rows), to_markdown(rows)):
        assert "\x1b" not in table and "\x07" not in table
        assert len(table.strip().splitlines()) == (2 if "|" not in table else 3)  # no row forged by the newline
        assert "\\x1b" in table


HOSTILE_NOTE = ('<img src="http://127.0.0.1:9/pixel.png"> ![seen](http://127.0.0.1:9/x.png) '
                "[click](javascript:alert(1)) <script>alert(2)</script>")  # fmt: skip


def test_the_markdown_report_shows_the_models_markup_as_text(tmp_path: Path) -> None:
    branch = BranchSummary(name="b1", title="t", status="stopped", iterations=1, stop_reason=HOSTILE_NOTE,
                           timeline=[IterationPoint(iteration=1, status="decided", action=HOSTILE_NOTE)])  # fmt: skip
    results = FinalResults(problem_name="p", branches=[branch], complete=True)
    md = render_markdown(LoadedResults(results, FROM_FILE, []), RunLayout(tmp_path))
    html = MarkdownIt("commonmark").enable("table").render(md)
    assert "<img" not in html and "<script" not in html and "<a " not in html, html
    assert "javascript:alert" in html  # shown, as text


# -- item 12: impossible numbers from hostile run files -------------------------------------------


def test_impossible_numbers_in_run_files_are_no_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = copy_problem(tmp_path)
    layout = RunLayout(problem)
    write_run_files(layout)
    write_final_results(layout)
    tiled = layout.branch("tiled")
    _raw_replace(tiled.iteration(1).state, r'"best_ms": [0-9.e+-]+', '"best_ms": -5')
    _raw_replace(tiled.iteration(1).state, r'"speedup": [0-9.e+-]+', '"speedup": Infinity')
    _raw_replace(tiled.iteration(2).state, r'"best_ms": [0-9.e+-]+', '"best_ms": 1e308')
    _raw_replace(layout.final_results, r'"cost_usd": [0-9.e+-]+|"cost_usd": null', '"cost_usd": Infinity')
    final = read_model(layout.final_results, FinalResults)
    assert final.cost_usd is None  # Infinity dollars is no cost
    _raw_replace(layout.final_results, r'"time_ms": [0-9.e+-]+', '"time_ms": -5')
    _raw_replace(tiled.iteration(1).tune_summary, r'"wall_s": [0-9.e+-]+', '"wall_s": 1e12')
    _raw_replace(tiled.iteration(2).tune_summary, r'"wall_s": [0-9.e+-]+', '"wall_s": -5')
    results = tiled.iteration(1).tune_results
    row = json.loads(results.read_text().splitlines()[0])
    hostile_rows = [json.dumps({**row, "index": 90, "time_ms": -5.0}), json.dumps({**row, "index": 91, "time_ms": 1.0})]
    hostile_rows[1] = hostile_rows[1].replace('"time_ms": 1.0', f'"time_ms": 1{"0" * 400}')
    results.write_text(results.read_text() + "\n".join(hostile_rows) + "\n")
    shown = read_tuning(tiled.iteration(1)).top  # the Tuning tab's fastest configurations
    assert shown and all(r.time_ms is not None and 0 < r.time_ms < 1e8 for r in shown), shown
    first, second = read_model(tiled.iteration(1).state, IterState), read_model(tiled.iteration(2).state, IterState)
    assert first.run is not None and first.run.best_ms is None and first.run.speedup is None
    assert second.run is not None and second.run.best_ms is None
    assert gpu_seconds(layout.output, stamp=time.time()) is None  # neither 277,777,777 h nor -5 s
    assert cacao_main(["--dir", str(problem), "--best", "--no-ui"]) in (0, 1)
    printed = capsys.readouterr().out
    assert "1.2 ms" in printed  # the one possible best is still shown
    assert not re.search(r"-5(\.0*)? ?ms|\binf|\d{20}", printed, re.IGNORECASE), printed


# -- item 13: suite log names -------------------------------------------------------------------------


def test_suite_log_names_are_unique_even_against_real_names() -> None:
    for order in (["a/x", "b/x", "c/x-2"], ["c/x-2", "a/x", "b/x"], ["a/x", "b/x", "c/x", "d/x-2", "e/x-3"]):
        names = unique_names([Path(p) for p in order])
        assert len(set(names)) == len(names), names


# -- item 14: llm.toml --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["deep", "4gib", "inf-price", "fifo"])
def test_a_hostile_llm_toml_is_one_line(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "llm.toml"
    if kind == "deep":
        path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    elif kind == "4gib":
        with open(path, "wb") as f:
            f.truncate(4 * 1024**3)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        price = "inf"
        path.write_text(f'[models."openai/m"]\ninput_price = {price}\noutput_price = 1.0\n')
    started = time.monotonic()
    with pytest.raises(LLMError) as info:
        load_llm_settings(path)
    assert time.monotonic() - started < 5 and "\n" not in str(info.value) and "llm.toml" in str(info.value)


def test_a_call_record_with_an_infinite_cost_reads_back_finite() -> None:
    text = json.dumps({"node": "author", "index": 0, "provider": "p", "model": "m",
                       "usage": {"input_tokens": -7, "output_tokens": 3, "cost_usd": 1}})  # fmt: skip
    record = CallRecord.model_validate_json(text.replace('"cost_usd": 1', '"cost_usd": Infinity'))
    assert record.usage is not None and record.usage.cost_usd < float("inf") and record.usage.input_tokens == 0


def test_a_run_with_a_deep_llm_toml_is_one_line(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    config = tmp_path / "config" / "cacao_tui"
    config.mkdir(parents=True)
    (config / "llm.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    done = subprocess.run([sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--no-ui", "--dry-run",
                           "--provider", "replay"], capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    (line,) = done.stderr.strip().splitlines()
    assert "llm.toml" in line


# -- items 15 and 17: the problem editor's save ---------------------------------------------------------


def _deep_chain(top: Path, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)


def _remove_chain(top: Path) -> None:
    """rmtree recurses too; remove the chain from the bottom, one directory descriptor at a time."""
    fds = [os.open(top, os.O_RDONLY | os.O_DIRECTORY)]
    while True:
        try:
            fds.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fds[-1]))
        except FileNotFoundError:
            break
    os.close(fds.pop())
    while fds:
        os.rmdir("d", dir_fd=fds[-1])
        os.close(fds.pop())


def test_the_editors_save_refuses_a_chain_too_deep_in_one_line(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    (problem / "deep").mkdir()
    _deep_chain(problem / "deep", 3000)
    try:
        with pytest.raises(ProblemError) as info:
            save_problem(read_problem_source(problem), problem, existing=True, preflight=lambda _p: [])
        assert "deep" in str(info.value.file) and "\n" not in info.value.line()
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".mmul.save-")] == []
    finally:
        _remove_chain(problem / "deep")


def test_the_editors_save_does_not_drop_a_fifo_silently(tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    os.mkfifo(problem / "pipe")
    before = sorted(p.name for p in problem.iterdir())
    with pytest.raises(ProblemError) as info:
        save_problem(read_problem_source(problem), problem, existing=True, preflight=lambda _p: [])
    assert info.value.file.name == "pipe" and "FIFO" in info.value.line()
    assert sorted(p.name for p in problem.iterdir()) == before  # the problem is as it was, its FIFO too


# -- item 16: ktt validate --config ----------------------------------------------------------------------


@pytest.mark.parametrize("config", ["[" * 5000 + "]" * 5000, '{"BX": ' + "9" * 5000 + "}"])
def test_ktt_validate_with_hostile_config_json_is_one_line_exit_2(config: str, tmp_path: Path) -> None:
    problem = copy_problem(tmp_path)
    argv = [sys.executable, "-m", "ktt", "validate", "--problem", str(problem), "--kernel", str(problem / "k.cu"),
            "--spec", str(problem / "t.yaml"), "--output", str(tmp_path / "out"), "--config", config]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert "--config" in done.stdout + done.stderr

