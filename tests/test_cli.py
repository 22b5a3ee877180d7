"""The cacao command: flags, their validation, and the seam to the engine."""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path

import pytest

from cacao_tui import cli
from cacao_tui.cli import ENGINE_MODULE, PROVIDERS, build_parser, main, parse_args
from cacao_tui.run_options import run_request
from cacao_tui.run_request import RunRequest
from ktt.problem import load_problem

REPO = Path(__file__).resolve().parents[1]
MMUL = REPO / "problems" / "mmul"

ORIGINAL_FLAGS = [
    "--dir", "--resume", "--max-iter", "--max-depth", "--path-budget", "--timeout", "--provider", "--model",
    "--no-clean", "--clone", "--best", "--prune-archives",
]  # fmt: skip
OUR_FLAGS = [
    "--no-ui", "--dry-run", "--check", "--strategies", "--gpus", "--budget-usd", "--from", "--json", "--single-shot",
    "--verbose", "-v", "--budget-iters", "--samples", "--model-plan", "--model-decide",
]  # fmt: skip


def test_every_flag_is_there(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for flag in ORIGINAL_FLAGS + OUR_FLAGS:
        assert flag in text, flag


def test_defaults_leave_room_for_the_engine() -> None:
    args = parse_args(["--dir", str(MMUL)])
    assert args.mode == "run"
    assert args.dir == MMUL and args.dir.is_absolute()
    for name in ("max_iter", "max_depth", "path_budget", "strategies", "timeout", "gpus", "provider", "model",
                 "budget_usd", "from_path", "dry_run"):  # fmt: skip
        assert getattr(args, name) is None, name  # None: not given (the engine applies defaults, --resume keeps)
    for name in ("resume", "no_clean", "no_ui", "json", "single_shot", "verbose"):
        assert getattr(args, name) is False, name


def test_values_are_parsed() -> None:
    args = parse_args(
        ["--dir", str(MMUL), "--max-iter", "3", "--max-depth", "1", "--path-budget", "7", "--strategies", "2",
         "--timeout", "12.5", "--gpus", "0, 1", "--provider", "Anthropic", "--model", "m", "--budget-usd", "0.5",
         "--no-ui", "--dry-run", "--json", "--single-shot", "-v", "--resume", "--no-clean"]
    )  # fmt: skip
    assert (args.max_iter, args.max_depth, args.path_budget, args.strategies) == (3, 1, 7, 2)
    assert (args.timeout, args.gpus, args.provider, args.budget_usd) == (12.5, [0, 1], "anthropic", 0.5)


def test_the_search_flags_are_parsed() -> None:
    args = parse_args(["--dir", str(MMUL), "--budget-iters", "30", "--samples", "3",
                       "--model-plan", "anthropic:claude-haiku-4-5", "--model-decide", "llama3:8b"])  # fmt: skip
    assert (args.budget_iters, args.samples) == (30, 3)
    assert args.model_plan == ("anthropic", "claude-haiku-4-5")
    assert args.model_decide == (None, "llama3:8b")  # no provider called llama3: a model name with a colon


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--max-iter", "-3"], "argument --max-iter: must be at least 1, got -3"),
        (["--max-iter", "0"], "must be at least 1"),
        (["--max-iter", "two"], "expected a whole number, got 'two'"),
        (["--max-depth", "0"], "argument --max-depth: must be at least 1"),  # N levels; 1: no sub-branches
        (["--path-budget", "-1"], "argument --path-budget"),  # 0 is valid: off
        (["--strategies", "0"], "argument --strategies"),
        (["--timeout", "0"], "argument --timeout: must be a positive number"),
        (["--timeout", "nan"], "must be a positive number"),
        (["--budget-usd", "-1"], "argument --budget-usd"),
        (["--gpus", ""], "argument --gpus"),
        (["--gpus", "0,,1"], "like 0,1"),
        (["--gpus", "0,-1"], "'-1' is not a device ordinal"),
        (["--gpus", "a"], "'a' is not a device ordinal"),
        (["--gpus", "1,1"], "listed twice"),
        (["--provider", "foo"], "unknown provider 'foo'"),
        (["--model", " "], "argument --model: must not be empty"),
        (["--from", "x.jsonl"], "--from names a recorded session; it needs --provider replay"),
        (["--provider", "replay", "--from", "/nonexistent/x.jsonl"], "--from: /nonexistent/x.jsonl: no such file"),
        (["--check", "--best"], "not allowed with argument"),
        (["--clone", "a", "--prune-archives"], "not allowed with argument"),
        (["--export", "r.md"], "--export writes the results of --best"),  # a run with an ignored flag: refused
        (["--check", "--export", "r.md"], "--export writes the results of --best"),
        (["--budget-iters", "0"], "argument --budget-iters: must be at least 1"),
        (["--samples", "0"], "argument --samples: must be at least 1"),
        (["--model-plan", " "], "argument --model-plan: must not be empty"),
        (["--model-decide", "openai:"], "names no model after the provider"),
        (["--target", "H100"], "--target chooses the GPU of a dry run"),  # a run on a GPU measures its own
        (["--dry-run", "--target", "GTX480"], "unknown GPU 'GTX480'; choose one of H200"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--max-i", "3"], "unrecognized arguments"),  # no abbreviations: a typo is an error
    ],
)
def test_bad_flags_are_one_line_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(MMUL), *argv]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0].startswith("cacao: error: ") and words in lines[0], err
    assert len(lines) <= 2 and all(line.startswith("hint: ") for line in lines[1:])


def test_missing_dir(capsys: pytest.CaptureFixture[str]) -> None:
    """No --dir is the home screen, an app: without a terminal it is one line and exit 2."""
    assert main([]) == 2
    assert capsys.readouterr().err.splitlines()[0].startswith("cacao: error: the home screen needs a terminal")
    assert main(["--check"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == "cacao: error: --check needs --dir (the problem directory)"
    assert main(["--max-iter", "3"]) == 2
    assert "--max-iter needs --dir" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("cacao ")


def test_from_is_resolved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "s.jsonl").write_text("")
    monkeypatch.chdir(tmp_path)
    args = parse_args(["--dir", str(MMUL), "--provider", "replay", "--from", "s.jsonl"])
    assert args.from_path == tmp_path / "s.jsonl"


class _FakeEngine(types.ModuleType):
    def __init__(self) -> None:
        super().__init__(ENGINE_MODULE)
        self.calls: list[RunRequest] = []

    def main(self, request: RunRequest) -> int:
        self.calls.append(request)
        return 7


def test_run_mode_hands_a_typed_request_to_the_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, engine)
    monkeypatch.chdir(tmp_path)
    code = main(["--dir", str(MMUL), "--no-ui", "--dry-run", "--max-iter", "2", "--gpus", "0", "--strategies", "3"])
    assert code == 7
    (request,) = engine.calls
    assert isinstance(request, RunRequest) and request.directory == MMUL
    assert request.problem.name == "mmul"  # loaded once, by the CLI
    assert (request.front_end, request.dry_run, request.max_iter, request.gpus) == ("lines", True, 2, (0,))
    assert (request.n_strategies, request.resume, request.provider, request.max_depth) == (3, False, None, None)
    main(["--dir", str(MMUL), "--json", "--provider", "replay", "--from", str(MMUL / "session.jsonl")])
    assert engine.calls[-1].front_end == "json" and engine.calls[-1].replay_from == MMUL / "session.jsonl"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    main(["--dir", str(MMUL)])
    assert engine.calls[-1].front_end == "app"


def test_without_a_terminal_the_run_is_headless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --no-ui, but stdout (or stdin) is a pipe or a file: progress lines, said on stderr."""
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, engine)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    main(["--dir", str(MMUL)])
    assert engine.calls[-1].front_end == "lines"
    assert capsys.readouterr().err == "cacao: no terminal (stdin or stdout is not one): running headless, as --no-ui\n"
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    main(["--dir", str(MMUL), "--json"])
    assert engine.calls[-1].front_end == "json"  # asked for: kept, and nothing said
    assert capsys.readouterr().err == ""


def test_cacao_inside_a_problem_directory_opens_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the original's --dir defaults to '.': a problem.yaml in the working directory means --dir ."""
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, engine)
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    monkeypatch.chdir(problem)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main([]) == 7  # the run (the full-screen app), not the home screen
    assert engine.calls[-1].directory == problem and engine.calls[-1].front_end == "app"
    assert main(["--no-ui", "--dry-run"]) == 7 and engine.calls[-1].dry_run
    assert main(["--best", "--no-ui"]) == 0  # nothing to show: said, exit 0 as the original's
    assert "mmul has not been run yet" in capsys.readouterr().out
    args = parse_args(["--check"])
    assert (args.mode, args.dir) == ("check", problem)
    # --problems still asks for the home screen; elsewhere no --dir is the home screen as before
    assert parse_args(["--problems", str(tmp_path)]).mode == "home"
    monkeypatch.chdir(tmp_path)
    assert parse_args([]).mode == "home"


def test_relative_dir_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _FakeEngine()
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, engine)
    monkeypatch.chdir(tmp_path)
    assert main(["--dir", os.path.relpath(MMUL, tmp_path)]) == 7
    assert engine.calls[0].directory == MMUL


def test_without_an_engine_nothing_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, None)  # import of it fails as if it did not exist
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    assert main(["--dir", str(problem), "--no-ui"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["cacao: the optimisation engine is not available in this build; nothing was run; "
                                "--check, --best, --clone and --prune-archives work without it"]  # one line
    assert not (problem / "output").exists()


def test_a_broken_engine_is_not_disguised(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> types.ModuleType:
        raise ModuleNotFoundError("No module named 'some_dependency'", name="some_dependency")

    monkeypatch.setattr(cli.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError):
        main(["--dir", str(MMUL)])


def test_verbose_run_prints_warnings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, ENGINE_MODULE, _FakeEngine())
    problem = tmp_path / "mmul"
    shutil.copytree(MMUL, problem, ignore=shutil.ignore_patterns("output", "archive"))
    with (problem / "problem.yaml").open("a") as f:
        f.write("colour: blue\n")
    main(["--dir", str(problem), "--no-ui", "-v"])
    assert "warning: problem.yaml: colour: unknown key (ignored)" in capsys.readouterr().err
    main(["--dir", str(problem), "--no-ui"])
    assert capsys.readouterr().err == ""


def test_provider_names_match_the_llm_layer() -> None:
    selection = pytest.importorskip("cacao_tui.llm.selection")
    assert set(PROVIDERS) == set(selection.PROVIDER_NAMES)


def test_python_m_entry_point() -> None:
    text = (REPO / "cacao_tui" / "__main__.py").read_text()
    assert "from cacao_tui.cli import main" in text


def test_target_names_the_gpu_of_a_dry_run() -> None:
    """--target (issue 28): a GPU of the datasheet table, by key or name; the dry run compiles for its arch."""
    from cacao_tui.launch import _gpu_info

    args = parse_args(["--dir", str(MMUL), "--dry-run", "--target", "rtx 4090"])
    assert args.target == "RTX4090"
    request = run_request(args, load_problem(MMUL))
    gpu = _gpu_info(request, request.problem)
    assert (gpu.name, gpu.arch, gpu.detected) == ("NVIDIA GeForce RTX 4090", "sm_89", False)
