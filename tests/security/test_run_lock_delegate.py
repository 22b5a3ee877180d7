"""Class 3, split runs: the GPU phase --gpu-submit starts runs under the submitting run's lock only
with the token the lock's note names while the job runs; without it, or once the token is taken
back, it is refused like any second run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cacao_tui.store.run_lock import acquire_run_lock, held_here, read_holder
from tests.pathenv import child_pythonpath

TRY = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from cacao_tui.store.run_lock import RunLocked, acquire_run_lock
    try:
        lock = acquire_run_lock(Path(sys.argv[1]), delegate=sys.argv[2] or None)
    except RunLocked as exc:
        print("refused:", exc)
    else:
        print("delegated" if lock.fd < 0 else "held")
    """
)


def attempt(problem: Path, token: str) -> str:
    out = subprocess.run([sys.executable, "-c", TRY, str(problem), token], capture_output=True, text=True,
                         timeout=60, env={"PYTHONPATH": child_pythonpath(), "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture
def problem(tmp_path: Path):
    problem = tmp_path / "p"
    problem.mkdir()
    lock = acquire_run_lock(problem, command="cacao --gpu-submit (test)")
    yield problem
    lock.release()


def test_only_the_token_in_the_note_lets_the_gpu_phase_in(problem: Path) -> None:
    lock = held_here(problem)
    assert lock is not None
    assert attempt(problem, "").startswith("refused:")  # a second run, as ever
    lock.delegate("a" * 32)
    holder = read_holder(problem / "output.lock")
    assert holder is not None and holder.delegate == "a" * 32 and holder.command == "cacao --gpu-submit (test)"
    assert attempt(problem, "a" * 32) == "delegated"
    assert attempt(problem, "b" * 32).startswith("refused:")  # another token
    assert attempt(problem, "").startswith("refused:")
    lock.delegate(None)  # the job has ended
    assert read_holder(problem / "output.lock").delegate == ""
    assert attempt(problem, "a" * 32).startswith("refused:")


def test_a_token_with_nobody_holding_the_lock_takes_it(tmp_path: Path) -> None:
    problem = tmp_path / "q"
    problem.mkdir()
    assert attempt(problem, "c" * 32) == "held"  # the submitting run is gone: the phase holds it itself
