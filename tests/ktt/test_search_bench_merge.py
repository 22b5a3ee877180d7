"""bench/search_large_space.py --first-seed / --merge: a comparison split over two calls joins into one table.

Runs the harness with FAKE tuners (--dry-run) on the CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CMD = [sys.executable, "bench/search_large_space.py", "--dry-run"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_two_parts_merge_into_one_table_and_overlapping_seeds_are_refused(tmp_path: Path) -> None:
    a, b, m = tmp_path / "a", tmp_path / "b", tmp_path / "m"
    assert _run("--establish", "--establish-budget", "10", "--out", str(a)).returncode == 0
    known = a / "best_known.json"
    common = ["--budget", "4", "--strategies", "auto,random", "--kt-strategies", "random_sample"]
    common += ["--best-known", str(known)]
    assert _run("--seeds", "2", "--out", str(a), *common).returncode == 0
    assert _run("--first-seed", "2", "--seeds", "1", "--out", str(b), *common).returncode == 0
    merged = _run("--merge", str(a / "search_large_space.json"), str(b / "search_large_space.json"), "--out", str(m))
    assert merged.returncode == 0, merged.stderr
    assert "3 seeds" in merged.stdout
    report = json.loads((m / "search_large_space.json").read_text())
    assert report["seed_list"] == [0, 1, 2]
    assert sorted({r["seed"] for r in report["runs"]}) == [0, 1, 2]
    rows = {(r["tool"], r["strategy"]): r for r in report["analysis"]["rows"]}
    assert rows[("fake ktt", "auto")]["runs"] == 3 and rows[("fake kernel_tuner", "random_sample")]["runs"] == 3
    again = _run("--merge", str(a / "search_large_space.json"), str(a / "search_large_space.json"), "--out", str(m))
    assert again.returncode == 2 and "seed 0 is in two parts" in again.stderr
