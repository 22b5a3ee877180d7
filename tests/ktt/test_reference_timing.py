"""How a CPU reference is timed (issue 30): a reference slower than the quick threshold is timed over
at least three calls, the median is the denominator and the fastest, the slowest and the count go
with it (the JSON line, reference_time.json's provenance, --check, --best); a spread over 10 % is a
warning naming it; and no compile job runs while the calls are timed (ktt.cpu_quiet)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
from ktt_paths import ROOT

from ktt import cpu_quiet
from ktt.compile_pool import CompilePool
from ktt.nvrtc import CompileOutput, CompileRequest
from ktt.reference_times import Measurement, read_reference_times, record_measurements
from ktt.tune import _calls

INPUTS = """
args:
  - {kind: scalar, name: N, value: 8}
  - {kind: buffer, name: X, dtype: float, size: N, access: read, min: 1, max: 2}
  - {kind: buffer, name: S, dtype: float, size: N, access: write, validate: true}
"""

# Each call sleeps: the output calls (sets 0 and 1) and then the timed ones; SLEEPS picks by call number.
SLEEPY = """import time
import numpy as np

calls = [0]
SLEEPS = {sleeps}

def ref(scalars, buffers):
    time.sleep(SLEEPS[calls[0] % len(SLEEPS)])
    calls[0] += 1
    return buffers["X"] + 1
"""

C_SLEEPY = """#include <unistd.h>
void ref(const float* X, float* S) {
    usleep(300000);
    for (int i = 0; i < N; ++i) S[i] = X[i] + 1.0f;
}
"""


def problem(tmp_path: Path, sleeps: list[float], kind: str = "python") -> Path:
    d = tmp_path / "p"
    d.mkdir()
    (d / "inputs.yaml").write_text(INPUTS)
    ref = "ref.py" if kind == "python" else "ref_cpu.c"
    reference = f"reference: {{type: {kind}, file: {ref}, function: ref}}"
    (d / "problem.yaml").write_text(f"name: p\ngrid: {{x: 1}}\n{reference}\nvalidation: {{tolerance: 0}}\n")
    (d / ref).write_text(SLEEPY.format(sleeps=sleeps) if kind == "python" else C_SLEEPY)
    return d


def time_reference(d: Path, work: Path, env: dict[str, str] | None = None) -> dict:
    cmd = [sys.executable, "-m", "ktt.host_reference", "--problem", str(d), "--work", str(work), "--sets", "0,1",
           "--time"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=240, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["python", "cpu_c"])
def test_a_slow_cpu_reference_is_timed_over_three_calls_and_reports_their_range(tmp_path: Path, kind: str) -> None:
    if kind == "cpu_c" and shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    line = time_reference(problem(tmp_path, [0.3], kind), tmp_path / "work")
    assert line["samples"] == 3  # each call is over the quick threshold: three, not one
    assert line["method"] == "wall clock around the call"
    assert 290 <= line["min_ms"] <= line["ms"] <= line["max_ms"]


def test_a_wide_spread_is_a_warning_that_names_the_reference(tmp_path: Path) -> None:
    # Calls 0 and 1 compute the two sets' outputs; the timed calls 2, 3, 4 sleep 0.3, 0.5, 0.3 s.
    line = time_reference(problem(tmp_path, [0.3, 0.5]), tmp_path / "work")
    assert line["samples"] == 3 and line["ms"] < 450 and line["max_ms"] >= 500
    assert line["warning"] is not None and line["warning"].startswith("ref.py: its 3 timed calls took ")
    assert "spread (over 10%)" in line["warning"] and "the speedups use their median" in line["warning"]


def test_the_calls_go_into_reference_time_json_and_check_shows_them(tmp_path: Path) -> None:
    assert _calls({"samples": 3, "min_ms": 3781.0, "max_ms": 6585.0}) == (3, 3781.0, 6585.0)
    assert _calls({"ms": 5.0}) is None and _calls({"samples": "x", "min_ms": 1, "max_ms": 2}) is None
    path = tmp_path / "mmul" / "output" / "reference_time.json"
    shutil.copytree(ROOT / "problems" / "mmul", tmp_path / "mmul", ignore=shutil.ignore_patterns("output", "archive"))
    record_measurements(path, "default", {"default": Measurement(5092.0, "H200 host", "wall clock around the call",
                                                                 "cpu_c", 3, 3781.0, 6585.0)})  # fmt: skip
    prov = json.loads(path.read_text())["provenance"]["reference_time_us"]
    assert (prov["samples"], prov["min_ms"], prov["max_ms"]) == (3, 3781.0, 6585.0)
    ref = read_reference_times(path, "default").get("default")
    assert (ref.samples, ref.min_ms, ref.max_ms) == (3, 3781.0, 6585.0) and round(ref.spread or 0, 2) == 0.55
    assert ref.describe() == ("measured 5092 ms (H200 host), median of 3 calls, 3781 to 6585 ms, "
                              "55.1% spread (over 10%)")  # fmt: skip
    check = subprocess.run([sys.executable, "-m", "cacao_tui", "--dir", str(tmp_path / "mmul"), "--check"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    assert check.returncode == 0, check.stderr
    flat = " ".join(check.stdout.split())
    assert "default measured 5092 ms (H200 host), median of 3 calls, 3781 to 6585 ms, 55.1% spread (over 10%)" in flat
    assert "output/reference_time.json: default: measured 5092 ms" in flat
    assert "time it again on a quiet machine" in flat


# -- nothing CPU-heavy runs while the calls are timed ---------------------------------------


def burn_job(req: CompileRequest, cache_dir: str | None, pch_dir: str | None) -> tuple[CompileOutput, str]:
    """A FAKE compile that keeps a core busy for 0.15 s; its key is when it ran (wall clock)."""
    start = time.time()
    while time.time() - start < 0.15:
        pass
    out = CompileOutput(True, b"", [], "", 0.15, False, ())
    return out, f"{start} {time.time()}"


def test_no_compile_job_runs_while_a_cpu_reference_is_timed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compile pool kept busy (two workers, a FAKE compile that burns a core) while a reference is
    timed: the pool holds its jobs back while the calls are timed, and takes them up again after."""
    trace = tmp_path / "trace"
    monkeypatch.setenv(cpu_quiet.TRACE_ENV, str(trace))
    d = problem(tmp_path, [0.3])
    pool = CompilePool(2, None, timeout_s=60, pch=False, job=burn_job, dedup=False)
    done: list[tuple[float, float]] = []
    stop = threading.Event()

    def feed() -> None:  # four jobs in flight or queued, all the time, until told to stop
        n = 0
        pending: list[Future] = []
        while not stop.is_set():
            for f in [f for f in pending if f.done()]:
                start, end = f.result()[1].split()
                done.append((float(start), float(end)))
                pending.remove(f)
            while len(pending) < 4:
                n += 1
                request = CompileRequest(f"// {n}", "k.cu", "k.cu", "sm_90", (), ())
                pending.append(pool.submit(request))
            time.sleep(0.02)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        deadline = time.monotonic() + 120
        while not done and time.monotonic() < deadline:  # the pool is at work before the timing asks
            time.sleep(0.05)
        assert done, "the pool never compiled"
        line = time_reference(d, tmp_path / "work", env={**os.environ, cpu_quiet.TRACE_ENV: str(trace)})
        finished_at = time.time()
        while not any(start > finished_at for start, _ in done) and time.monotonic() < deadline:
            time.sleep(0.05)  # and it takes its work up again after
    finally:
        stop.set()
        feeder.join(timeout=30)
        pool.shutdown()
    assert line["samples"] == 3
    windows = [ln.split() for ln in trace.read_text().splitlines()]
    quiet = [(float(a), float(b)) for kind, _, a, b in windows if kind == "quiet"]
    assert len(quiet) == 1 and not [w for w in windows if w[0] == "unquiet"], windows
    q0, q1 = quiet[0]
    assert any(end <= q0 for _, end in done) and any(start >= q1 for start, _ in done)
    overlapping = [(s, e) for s, e in done if s < q1 and e > q0]
    assert not overlapping, (quiet, overlapping)  # no compile ran while the reference was timed


def test_the_lock_gives_the_timing_precedence(tmp_path: Path) -> None:
    held = cpu_quiet.HeavyHold()
    assert held.take()
    with cpu_quiet.quiet(wait_s=0.3) as was_quiet:  # a job in flight: the wait runs out, and says so
        assert not was_quiet
    held.release()
    with cpu_quiet.quiet(wait_s=5) as was_quiet:
        assert was_quiet
        assert not cpu_quiet.HeavyHold().take()  # no new job starts while the calls are timed
    fresh = cpu_quiet.HeavyHold()
    assert fresh.take()
    fresh.release()
