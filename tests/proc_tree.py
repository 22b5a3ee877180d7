"""The processes below a pid and their resident memory, from /proc: for tests that bound what a
command's whole tree uses (compile workers are children of a forkserver, not of the command, so
``RUSAGE_CHILDREN`` never sees them) or listens on."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path


def descendants(root: int) -> set[int]:
    """Every process whose chain of parents reaches ``root`` (``root`` itself not included)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except (OSError, ValueError, IndexError):
        return 0


def run_measured(argv: list[str], env: dict[str, str], timeout: float) -> tuple[int, str, str, float, int]:
    """Run ``argv``: (exit code, stdout, stderr, seconds, the largest resident set in KiB that any one
    process of its tree reached, sampled every 50 ms)."""
    import time

    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for pid in {proc.pid} | descendants(proc.pid):
                peak[0] = max(peak[0], rss_kib(pid))
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        sampler.join()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out, err, time.monotonic() - start, peak[0]
