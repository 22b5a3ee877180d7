"""The README as a new user reads it (issue 24 item 12): what the main command needs, the demo in
the app, what a dry run shows, how to leave, and two installs with their sizes; every key and
label the demo recipe names is the app's own, and CI installs as the README says."""

from __future__ import annotations

import re
from pathlib import Path

from cacao_tui.runs.providers import provider_statuses
from cacao_tui.store.results import DRY_RUN_BEST
from cacao_tui.ui.home.keys import HOME, RUN_DIALOG
from cacao_tui.ui.home.run_dialog import provider_label

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 3)
    return README[start : end if end != -1 else None]


def test_the_main_command_says_it_needs_a_key_and_a_gpu() -> None:
    run = _section("Run")
    assert "cacao --dir problems/mmul" in run
    assert "API key" in run and "NVIDIA GPU" in run and "--dry-run" in run


def test_the_demo_recipe_uses_the_apps_own_keys_and_labels() -> None:
    demo = _section("The demo: no key, no GPU")
    home = {k.keys.split(",")[0]: k.action for k in HOME}
    assert home["r"] == "run" and home["b"] == "results" and home["q"] == "quit"
    assert "`r`" in demo and "`b`" in demo and "`q`" in demo
    assert "`ctrl+s`" in demo and any(k.keys == "ctrl+s" and k.action == "start" for k in RUN_DIALOG)
    replay = next(s for s in provider_statuses({}) if s.name == "replay")
    assert provider_label(replay).removeprefix("✓ ") in demo  # "replay · no key needed", as the list shows it
    dialog = (REPO / "cacao_tui" / "ui" / "home" / "run_dialog.py").read_text(encoding="utf-8")
    assert '"Dry run (no GPU)"' in dialog and "*Dry run (no GPU)*" in demo
    assert "cacao --dir problems/mmul --provider replay --no-ui --dry-run" in demo


def test_a_dry_runs_best_none_is_explained() -> None:
    demo = _section("The demo: no key, no GPU")
    assert "nothing is timed" in demo
    assert DRY_RUN_BEST.startswith("a dry run times nothing") and "no best, `a dry run times\nnothing`" in demo


def test_leaving_is_said() -> None:
    assert "`q` leaves a run's view" in _section("Run") and "quits" in _section("Run")


def test_two_installs_with_their_sizes_and_ci_installs_as_the_readme_says() -> None:
    setup = _section("Set up")
    assert "pip install -e .\n" in setup and "pip install -e '.[dev,cluster]'" in setup
    sizes = re.findall(r"\d+ MB", setup)
    assert len(sizes) >= 3, setup  # the light install, the full one, Ray's part of it
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    line = next(ln for ln in ci.splitlines() if "pip install" in ln)
    assert line.strip() in setup
