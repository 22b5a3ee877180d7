"""A new run over an old one archives output/ and carries output/reference_time.json over unchanged.

The file is the speedup denominator. Written in the original CACAO's form (microseconds, a
hand-seeded primary, ``null`` for a case with no baseline), it must reach the new output/
byte for byte: not converted to milliseconds, not relabelled ``measured``, the null case kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cacao_tui.store.archive import prepare_output
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.run_lock import LOCK_NAME
from ktt.reference_times import read_reference_times
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]

# The original's form, with its own spacing and key order: any rewrite would show.
SEED = b'{ "reference_time_us" : 3138.25,\n  "cases": {"big": null} }\n'


def _old_run(output: Path) -> None:
    (output / "branches" / "b1" / "iter1").mkdir(parents=True)
    (output / "branches" / "b1" / "iter1" / "kernels.cu").write_text("// the old run's kernel\n")
    (output / "master.json").write_text('{"phase": "finished"}\n')
    (output / "reference_time.json").write_bytes(SEED)


def _check_seed(path: Path) -> None:
    assert path.read_bytes() == SEED
    times = read_reference_times(path, "default")
    assert times.form == "original"
    primary = times.get("default")
    assert primary.ms == pytest.approx(3.13825) and primary.source == "seeded"
    assert "big" in times.raw["cases"] and times.get("big").no_baseline  # the null case, kept: no baseline


def test_archiving_carries_the_original_form_seed_byte_for_byte(tmp_path: Path) -> None:
    _old_run(tmp_path / "output")
    prepared = prepare_output(tmp_path, resume=False, no_clean=False)
    assert prepared.archived_to == tmp_path / "archive" / "output_1" and prepared.reference_time_carried
    _check_seed(tmp_path / "output" / "reference_time.json")
    _check_seed(tmp_path / "archive" / "output_1" / "reference_time.json")
    assert (tmp_path / "archive" / "output_1" / "master.json").is_file()
    assert sorted(p.name for p in (tmp_path / "output").iterdir() if p.name != LOCK_NAME) == ["reference_time.json"]


def test_a_second_archive_carries_it_again(tmp_path: Path) -> None:
    _old_run(tmp_path / "output")
    prepare_output(tmp_path, resume=False, no_clean=False)
    (tmp_path / "output" / "context.json").write_text("{}\n")  # the second run wrote something
    prepare_output(tmp_path, resume=False, no_clean=False)
    for where in ("output", "archive/output_1", "archive/output_2"):
        _check_seed(tmp_path / where / "reference_time.json")


def test_a_dry_run_over_an_old_run_keeps_the_seed(tmp_path: Path) -> None:
    """The whole launch path: cacao --dry-run (replayed LLM) over an output/ that holds an earlier run."""
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    _old_run(problem / "output")
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--no-ui", "--dry-run"]
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    _check_seed(problem / "output" / "reference_time.json")
    _check_seed(problem / "archive" / "output_1" / "reference_time.json")
    assert (problem / "archive" / "output_1" / "branches" / "b1" / "iter1" / "kernels.cu").is_file()
    final = json.loads((problem / "output" / "final_results.json").read_text())
    # The new run's results name the seed as their denominator, in both key sets.
    assert final["reference_ms"] == pytest.approx(3.13825) and final["reference_source"] == "seeded"
    assert final["reference_time_us"] == pytest.approx(3138.25)
    assert RunLayout(problem).reference_time.read_bytes() == SEED
