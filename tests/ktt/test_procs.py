from __future__ import annotations

import sys
import time

from ktt import procs

CHILD_AND_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(p.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def test_run_kills_the_whole_group_at_its_timeout() -> None:
    start = time.monotonic()
    res = procs.run([sys.executable, "-c", CHILD_AND_GRANDCHILD], timeout_s=1.0)
    assert res.timed_out and time.monotonic() - start < 10
    grandchild = int(res.stdout.split()[0])
    assert not _running(grandchild)


def _running(pid: int, wait_s: float = 3.0) -> bool:
    """True while pid exists and is not a zombie (an orphan is reaped by init in its own time)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.1)
    return True


def test_run_reads_long_output_without_blocking() -> None:
    res = procs.run(
        [sys.executable, "-c", "print('x' * 200000); import sys; print('e' * 100000, file=sys.stderr)"], timeout_s=30
    )
    assert res.returncode == 0 and len(res.stdout) == 200000 and len(res.stderr) == 100000
