"""Class 3: one GPU job per device across processes.

Two tunings on one GPU (real ``ktt tune`` orchestration and NVRTC, the fake GPU worker of
tests/ktt) never hold the device at once: the second waits and says what for. A lock left
by a killed process is released by the kernel. The engine hears the wait.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cacao_tui.ktt_client import KttTuner, TuneRequest, TunerError
from ktt import gpu_lock
from ktt.protocol import LogLine, TuneSummary
from ktt.tune import TuneOptions, tune
from tests.pathenv import child_pythonpath

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "ktt" / "data" / "tiny"
FAKE = ROOT / "tests" / "ktt" / "fake_worker.py"


@pytest.fixture(autouse=True)
def private_lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "gpu-locks"
    monkeypatch.setenv("KTT_GPU_LOCK_DIR", str(d))
    return d


def fake_worker(spans: Path) -> list[str]:
    """The fake GPU worker, recording when its process ran (start and end) in ``spans``."""
    code = textwrap.dedent(
        f"""
        import atexit, runpy, sys, time
        spans = open({str(spans)!r}, "a", buffering=1)
        spans.write(f"start {{time.time()}}\\n")
        atexit.register(lambda: spans.write(f"end {{time.time()}}\\n"))
        sys.argv = [{str(FAKE)!r}]
        runpy.run_path({str(FAKE)!r}, run_name="__main__")
        """
    )
    return [sys.executable, "-c", code]


def spans_of(path: Path) -> tuple[float, float]:
    marks = [line.split() for line in path.read_text().splitlines()]
    starts = [float(t) for kind, t in marks if kind == "start"]
    ends = [float(t) for kind, t in marks if kind == "end"]
    assert starts and ends
    return min(starts), max(ends)


def test_two_tunings_on_one_gpu_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTT_FAKE_EVAL_S", "0.15")
    results: dict[str, tuple[int, list]] = {}

    def one(name: str) -> None:
        lines: list = []
        opts = TuneOptions(
            problem_dir=TINY,
            kernel=TINY / "kernels.cu",
            spec=TINY / "tuning.yaml",
            output=tmp_path / name / "out",
            worker_command=fake_worker(tmp_path / f"{name}.spans"),
            arch="sm_90",
            cache_dir=tmp_path / "cache",
            compile_workers=1,
            reference_time=tmp_path / name / "reference_time.json",
            device=0,
            duration_s=0,
        )  # type: ignore[call-arg]
        results[name] = (tune(opts, lines.append), lines)

    first = threading.Thread(target=one, args=("a",))
    first.start()
    deadline = time.monotonic() + 60
    while not (tmp_path / "a.spans").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = threading.Thread(target=one, args=("b",))
    second.start()
    first.join(300)
    second.join(300)
    assert results["a"][0] == 0 and results["b"][0] == 0
    a, b = spans_of(tmp_path / "a.spans"), spans_of(tmp_path / "b.spans")
    assert a[1] <= b[0], f"the second tuning's worker ran while the first held the GPU: {a} {b}"
    waits = [x.message for x in results["b"][1] if isinstance(x, LogLine) and "waiting for GPU" in x.message]
    assert waits and waits[0].startswith(f"waiting for GPU 0 (held by pid {os.getpid()}, ktt tune of problem tiny")
    assert any(isinstance(x, TuneSummary) and x.ok for x in results["b"][1])


def test_a_lock_left_by_a_killed_job_is_released(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", "import time; from ktt import gpu_lock; gpu_lock.acquire(3, 'ktt tune of problem x');"
         "print('held', flush=True); time.sleep(600)"],
        env={**os.environ, "PYTHONPATH": child_pythonpath()}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    heard: list[str] = []
    with pytest.raises(TimeoutError):
        gpu_lock.acquire(3, "test", on_wait=heard.append, timeout_s=0.6)
    assert heard == [f"waiting for GPU 3 (held by pid {holder.pid}, ktt tune of problem x since " + heard[0][-9:]]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lock = gpu_lock.acquire(3, "test", timeout_s=2)  # at once: the kernel released the dead holder's lock
    assert lock.waited_s < 1.5
    lock.release()


def test_the_lock_file_is_keyed_by_uuid_and_never_a_link(tmp_path: Path, private_lock_dir: Path) -> None:
    assert gpu_lock.lock_file(0, "GPU-1234-ab/../x").name == "cacao-gpu-GPU-1234-ab_.._x.lock"
    assert gpu_lock.lock_file(2).name == "cacao-gpu-index2.lock"
    private_lock_dir.mkdir(parents=True, exist_ok=True)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    gpu_lock.lock_file(5).symlink_to(victim)
    with pytest.raises(gpu_lock.GpuLockError):
        gpu_lock.acquire(5, "test", timeout_s=1)
    assert victim.read_text() == "keep\n"


def stand_in(tmp_path: Path, stdout: str, stderr: str) -> str:
    fake = tmp_path / "python"
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint({stdout!r})\nprint({stderr!r}, file=sys.stderr)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return str(fake)


def test_the_engine_hears_what_a_tuning_waits_for(tmp_path: Path) -> None:
    message = "waiting for GPU 0 (held by pid 4242, ktt tune of problem other since 10:00:00)"
    line = LogLine(message=message).model_dump_json()
    heard: list[str] = []
    tuner = KttTuner(python=stand_in(tmp_path, line, "unrelated"), on_log=heard.append)
    request = TuneRequest(tmp_path, tmp_path / "k.cu", tmp_path / "t.yaml", tmp_path / "out", 0, 1.0, 30.0,
                          tmp_path / "reference_time.json")  # fmt: skip
    with pytest.raises(TunerError):
        asyncio.run(tuner.tune(request, lambda progress: None))
    assert heard == [message]
    heard.clear()
    profiler = KttTuner(python=stand_in(tmp_path, "{}", f"ktt: {message}"), on_log=heard.append)
    asyncio.run(profiler.profile(tmp_path, tmp_path / "k.cu", tmp_path / "t.yaml", tmp_path / "s.json", tmp_path,
                                 device=0))  # fmt: skip
    assert heard == [message]
    assert json.loads(line)["type"] == "log"


def test_waiting_for_the_gpu_does_not_count_against_the_watchdog(tmp_path: Path) -> None:
    """A tuning that waits 8 s for another process's GPU, under a 4 s watchdog, is not killed (its own
    work, Python's start included, is well under 4 s even on a loaded machine)."""
    script = (
        "import sys, time\n"
        "print('ktt: waiting for GPU 0 (held by pid 1, ktt tune of problem x since 10:00:00)', file=sys.stderr,"
        " flush=True)\n"
        "time.sleep(8)\n"
        "print('ktt: GPU 0 is free after 8 s of waiting', file=sys.stderr, flush=True)\n"
        "time.sleep(0.2)\n"
        "print('done', flush=True)\n"
    )
    heard: list[str] = []
    from cacao_tui.ktt_client import _GpuWait
    from cacao_tui.subprocesses import run_streaming

    gpu = _GpuWait(heard.append)
    result = asyncio.run(
        run_streaming([sys.executable, "-c", script], timeout_s=4, on_stderr_line=gpu.stderr_line, paused=gpu.paused)
    )
    assert not result.timed_out and result.stdout_lines == ["done"]
    assert [h.split(" (")[0] for h in heard] == ["waiting for GPU 0", "GPU 0 is free after 8 s of waiting"]
    unpaused = asyncio.run(run_streaming([sys.executable, "-c", script], timeout_s=4))
    assert unpaused.timed_out  # the same child without the pause is killed at 4 s


def test_the_watchdog_measures_a_pause_to_a_tenth_of_a_second() -> None:
    """0.55 s of work around a 1.85 s pause under a 1 s watchdog: done (0.45 s to spare for a late
    wake on a loaded machine). Counted by the state at the end of each poll of up to a second (as
    before), the poll that ended after the pause counted whole and the watchdog fired at 2 s, 0.4 s
    before the work ended."""
    from cacao_tui.subprocesses import _wait_unpaused

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        readers = loop.create_future()
        loop.call_later(2.4, readers.set_result, None)
        await _wait_unpaused(readers, 1.0, lambda: 0.05 <= loop.time() - start < 1.9)

    asyncio.run(scenario())
