"""Every number a run takes is bounded by one table (cacao_tui.flag_bounds), which the command
line, `cacao suite`, the run dialog and the README's flag table read (issue 32 item 2): a number
outside it is one line and exit 2, before anything is written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cacao_tui.cli import main
from cacao_tui.flag_bounds import BOUNDS, BY_FLAG, GPU_ORDINAL, OutOfBounds, readme_row
from cacao_tui.run_options import build_parser
from cacao_tui.suite.cli import suite_parser
from cacao_tui.ui.home.run_dialog import FieldError, options_from_fields

REPO = Path(__file__).resolve().parents[1]
HUGE = "99999999999999999999999"
# Flags whose value is a word, a name or a path: a number there is not a number of anything.
WORDS = {"--dir", "--problems", "--clone", "--cluster", "--export", "--provider", "--model", "--model-plan",
         "--model-decide", "--from", "--reasoning", "--branch", "--message", "--decision", "--output",
         "--target", "--gpu-submit", "--lock-token", "--models"}  # fmt: skip


def _value_flags(parser: object) -> list[str]:
    out = []
    for action in parser._actions:  # type: ignore[attr-defined]
        if action.option_strings and action.nargs is None and action.const is None and not action.choices:
            out += [o for o in action.option_strings if o.startswith("--")]
    return out


def test_every_number_flag_of_cacao_is_in_the_table_and_refuses_a_huge_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = REPO / "problems" / "mmul"
    numbers = [f for f in _value_flags(build_parser()) if f not in WORDS]
    assert numbers and all(f in BY_FLAG for f in numbers), [f for f in numbers if f not in BY_FLAG]
    for flag in numbers:
        extra = ["--branch", "b1"] if flag == "--revert" else []
        code = main(["--dir", str(problem), *extra, flag, HUGE])
        err = capsys.readouterr().err.strip()
        assert code == 2, (flag, err)
        assert len(err.splitlines()) == 1 and flag in err and "must be at most" in err, (flag, err)
    assert not (problem / "output").exists() or (problem / "output").is_dir()


@pytest.mark.parametrize("flag", ["--max-iter", "--max-depth", "--samples", "--timeout", "--llm-concurrency"])
def test_one_past_the_high_end_is_refused_and_the_high_end_taken(flag: str) -> None:
    bound = BY_FLAG[flag]
    high = f"{bound.high:g}" if not bound.whole else str(int(bound.high))
    assert getattr(build_parser().parse_args([flag, high]), bound.dest) == bound.high
    with pytest.raises(OutOfBounds, match=f"must be at most {int(bound.high):,}"):
        bound.parse(str(int(bound.high) + 1))


def test_the_issues_examples_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    problem = str(REPO / "problems" / "mmul")
    for argv, words in (
        (["--max-iter", HUGE], "--max-iter: must be at most 100"),
        (["--max-depth", "1000"], "--max-depth: must be at most 5"),
        (["--samples", "100000"], "--samples: must be at most 16"),
        (["--gpus", "0,99"], "a device ordinal must be at most 63"),
    ):
        assert main(["--dir", problem, *argv]) == 2
        assert words in capsys.readouterr().err


def test_suite_takes_the_same_bounds() -> None:
    # --fast-p is a list with its own check (suite/fast_p.py)
    numbers = [f for f in _value_flags(suite_parser()) if f not in WORDS and f not in ("--gpus", "--fast-p")]
    assert numbers and all(f in BY_FLAG for f in numbers), numbers
    for flag in numbers:
        with pytest.raises(Exception, match="must be at most"):
            suite_parser().parse_args(["P", flag, HUGE])


@pytest.mark.parametrize(
    ("field", "label", "value"),
    [("strategies", "strategies", "17"), ("max_iter", "max-iter", HUGE), ("max_depth", "depth", "1000"),
     ("path_budget", "path budget", "1001"), ("timeout", "timeout", "1e9"), ("budget", "budget", "1e12"),
     ("gpus", "GPUs", "0,64")],
)  # fmt: skip
def test_every_number_field_of_the_run_dialog_is_bounded(field: str, label: str, value: str) -> None:
    with pytest.raises(FieldError, match=f"^{label}: .*at most"):
        options_from_fields({field: value})


def test_the_readmes_flag_table_shows_the_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    flags = readme[readme.index("## Flags") :]
    flags = flags[: flags.index("\n## ", 4)]
    assert readme_row() in flags.splitlines()
    for bound in BOUNDS:
        assert re.search(rf"`{bound.flag}` {re.escape(bound.span())}", readme_row()) or bound is GPU_ORDINAL
