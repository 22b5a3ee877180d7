"""An unusable output/reference_time.json stops ``cacao`` before any work: one line naming it, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.pathenv import child_pythonpath


def test_an_unreadable_reference_time_file_is_one_line_and_exit_2(mmul_dir: Path) -> None:
    ref = mmul_dir / "output" / "reference_time.json"
    ref.parent.mkdir(parents=True, exist_ok=True)
    ref.write_text('{"reference_time_us": "fast"}')
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(mmul_dir), "--provider", "replay", "--no-ui", "--dry-run"]
    env = {**os.environ, "PYTHONPATH": child_pythonpath(), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(ref) in lines[0] and "reference_time_us" in lines[0], proc.stderr
    assert ref.read_text() == '{"reference_time_us": "fast"}'  # never replaced
    assert sorted(p.name for p in ref.parent.iterdir()) == ["reference_time.json"]  # nothing else written
    assert not (mmul_dir / "archive").exists()
