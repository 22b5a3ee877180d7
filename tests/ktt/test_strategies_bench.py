"""bench/search_large_space.py on the CPU: the harness with FAKE tuners (--dry-run), the re-timing spec, the figures."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ktt.expressions import Expression
from ktt.space import SearchSpace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import search_large_space as bench  # noqa: E402


def test_the_large_space_has_over_100k_valid_configurations() -> None:
    spec = yaml.safe_load(bench.SPEC.read_text())
    space = SearchSpace(spec["tune_params"], [Expression(r) for r in spec["restrictions"]])
    assert sum(1 for _ in space.iter_valid()) == 359_856


def test_dry_run_establishes_and_compares_with_fakes(tmp_path: Path) -> None:
    recorded = bench.BEST_KNOWN.read_bytes() if bench.BEST_KNOWN.exists() else None
    out = tmp_path / "out"
    cmd = [sys.executable, "bench/search_large_space.py", "--dry-run", "--out", str(out)]
    est = subprocess.run([*cmd, "--establish", "--establish-budget", "20"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)  # fmt: skip
    assert est.returncode == 0, est.stderr
    known = json.loads((out / "best_known.json").read_text())
    assert known["fake"] and known["time_ms"] > 0 and len(known["config"]) == 11
    run = subprocess.run([*cmd, "--seeds", "2", "--budget", "5", "--strategies", "auto,genetic,surrogate,random"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "FAKE RUN" in run.stdout and "time to band" in run.stdout
    report = json.loads((out / "search_large_space.json").read_text())
    rows = {(r["tool"], r["strategy"]): r for r in report["analysis"]["rows"]}
    for s in ("auto", "genetic", "surrogate", "random"):
        assert rows[("fake ktt", s)]["runs"] == 2 and not rows[("fake ktt", s)]["failed_runs"]
    for s in bench.KT_STRATEGIES:
        assert rows[("fake kernel_tuner", s)]["runs"] == 2
    assert report["fake"] and report["analysis"]["verdict"]["best_peer"] in bench.KT_STRATEGIES
    assert report["best_known_retimed_ms"] == pytest.approx(known["time_ms"])
    for r in report["runs"]:
        assert all(e[0] <= 5 + 3 + 1e-6 for e in r["events"])  # simulated clocks stop with the budget
    # The recorded best-known of the GPU run is never touched by a dry run.
    assert (bench.BEST_KNOWN.read_bytes() if bench.BEST_KNOWN.exists() else None) == recorded


def test_compare_without_a_best_known_is_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "bench/search_large_space.py", "--dry-run", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "run --establish first" in proc.stderr


def test_the_retiming_spec_admits_exactly_the_picked_configurations(tmp_path: Path) -> None:
    world = bench.FakeWorld()
    import random

    rng = random.Random(5)
    picks = [world.space.config(world.space.sample(rng, set())) for _ in range(bench.RETIME_MAX)]
    picks.sort(key=lambda c: list(c.values()))  # as ktt_retime orders them
    path = tmp_path / "retime.yaml"
    bench.retime_spec(picks, path)
    spec = yaml.safe_load(path.read_text())
    space = SearchSpace(spec["tune_params"], [Expression(r) for r in spec["restrictions"]])
    got = space.enumerate(10_000)
    assert got is not None and len(got) == len(picks)
    names = list(spec["tune_params"])
    as_dicts = sorted(json.dumps({n: v for n, v in zip(names, k, strict=True) if n != "PICK"}, sort_keys=True)
                       for k in got)  # fmt: skip
    assert as_dicts == sorted(json.dumps(p, sort_keys=True) for p in picks)
    assert spec["launches"] == yaml.safe_load(bench.SPEC.read_text())["launches"]


def test_figures_time_to_band_and_censored_medians() -> None:
    names = ["X"]
    run = bench.Run("ktt", "auto", 0, events=[[1.0, {"X": 1}, 2.0], [2.0, {"X": 2}, None], [3.0, {"X": 3}, 1.01],
                                              [9.0, {"X": 4}, 1.0]])  # fmt: skip
    hit, best, n = bench.run_figures(run, 8.0, 1.0, None, names)
    assert (hit, best, n) == (3.0, 1.01, 3)  # 1.01 is inside the 2 % band; the result at 9 s is past the budget
    retimed = {bench.ckey({"X": 1}, names): 1.5, bench.ckey({"X": 3}, names): 1.03}
    assert bench.run_figures(run, 8.0, 1.0, retimed, names)[:2] == (None, 1.5 if 1.5 < 1.03 else 1.03)
    assert bench.summarise([3.0, None, 1.0]) == (3.0, 1.0, math.inf)
    assert bench.summarise([None, None, 1.0])[0] == math.inf
