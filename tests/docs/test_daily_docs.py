"""The docs as a new user follows them, true to the app (issue 32 items 4, 5, 14): SETUP's first
runs, what `cacao --help` lists, and the words the README and PROVIDERS.md quote."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.run_options import build_parser
from tests.pathenv import child_pythonpath

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
SETUP = (REPO / "SETUP.md").read_text(encoding="utf-8")
NO_GPU_PATH = "/usr/bin:/bin"  # no nvidia-smi there: a machine without a GPU, as cacao sees it


def _first_runs() -> list[tuple[str, str]]:
    """(command, its comment) of SETUP's step 6."""
    step = SETUP[SETUP.index("## 6. First runs") :]
    block = re.search(r"```\n(.*?)```", step, re.DOTALL)
    assert block is not None
    out = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        if command.strip():
            out.append((command.strip(), comment.strip()))
    return out


@pytest.mark.slow
def test_setups_first_run_without_a_gpu_works_on_a_machine_without_one(tmp_path: Path) -> None:
    """Item 4: SETUP says which of its first runs works without a GPU; that one does, exit 0."""
    assert shutil.which("nvidia-smi", path=NO_GPU_PATH) is None
    no_gpu = [c for c, comment in _first_runs() if "no GPU" in comment]
    assert no_gpu, "SETUP's first runs name none that works without a GPU"
    shutil.copytree(REPO / "problems" / "mmul", tmp_path / "problems" / "mmul",
                    ignore=shutil.ignore_patterns("output", "archive"))  # fmt: skip
    env = {"PATH": NO_GPU_PATH, "PYTHONPATH": child_pythonpath(), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    for command in no_gpu:
        words = shlex.split(command)
        assert words[0] == "cacao"
        done = subprocess.run([sys.executable, "-m", "cacao_tui", *words[1:]], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=280, stdin=subprocess.DEVNULL)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-2000:])
    for command, comment in _first_runs():
        if command not in no_gpu and "--best" not in command:
            assert "--dry-run" not in command and "GPU" in comment, (command, comment)
    assert "the replay demo work on any machine" not in SETUP


def test_help_lists_every_command_and_flag_the_readme_names() -> None:
    """Item 5: README says `cacao --help` lists them all; suite and collect included."""
    text = build_parser().format_help()
    assert "cacao suite DIR..." in text and "cacao collect DIR..." in text
    flags = README[README.index("## Flags") :]
    flags = flags[: flags.index("\n## ", 4)]
    named = set(re.findall(r"`(--[a-z-]+)", flags)) - {"--jobs"}  # --jobs is cacao suite's (its own --help)
    missing = sorted(f for f in named if f not in text)
    assert not missing, missing
    assert "`cacao --help` lists them all" in README and "cacao suite" in README


def test_the_readme_quotes_the_words_a_dry_runs_results_show(tmp_path: Path) -> None:
    """Item 14: the README quoted `best none: …`, which neither the app nor --best prints."""
    from cacao_tui.store.layout import RunLayout
    from cacao_tui.store.results import load_results, render_results
    from cacao_tui.store.state import FinalResults
    from cacao_tui.ui.screens.results import results_header

    layout = RunLayout(tmp_path)
    layout.output.mkdir(parents=True)
    layout.final_results.write_text(FinalResults(problem_name="p", dry_run=True).model_dump_json())
    loaded = load_results(layout)
    shown = [results_header(loaded, layout).plain.replace("\n", " "), render_results(loaded, layout)]
    demo = README[README.index("## The demo") :]
    demo = demo[: demo.index("\n## ", 4)]
    prose = re.sub(r"```.*?```", "", demo, flags=re.DOTALL).replace("\n", " ")
    quoted = [q for q in re.findall(r"`([^`]+)`", prose) if "dry run times" in q]
    assert quoted, "the demo no longer quotes what a dry run's results say"
    for words in quoted:
        assert all(words in text for text in shown), (words, shown)


def test_the_docs_say_each_problem_ships_a_session_built_by_its_script() -> None:
    """Item 14: PROVIDERS.md said only mmul ships a session; the README that only the others are built."""
    problems = sorted(p.parent for p in REPO.glob("problems/*/problem.yaml"))
    assert len(problems) == 6
    for problem in problems:
        assert (problem / "session.jsonl").is_file() and (problem / "demo" / "build_session.py").is_file(), problem
    providers = (REPO / "docs" / "PROVIDERS.md").read_text(encoding="utf-8")
    assert "mmul problem ships a hand-written demo session" not in providers
    assert "every\n  shipped problem has a hand-written demo session" in providers
    assert "the others are built by their" not in README
    assert "built by\nits `demo/build_session.py`" in README
