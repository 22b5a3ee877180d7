"""Class 6 of the containment issue, sizes: a 10 MB model reply costs kilobytes, not the disk.

A whole ``cacao --provider replay --no-ui --dry-run`` run of the mmul demo session, with the
analysis and one authoring turn replaced by 10 MB replies. The replies are cut at the
documented caps with a note, later requests carry them shortened, and the run's output/
stays small (the same run without the caps wrote well over 50 MB).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from cacao_tui.settings import DEFAULTS

ROOT = Path(__file__).resolve().parents[2]
TEN_MB = 10 * 1024 * 1024


def _session_with_huge_replies(source: Path, target: Path) -> None:
    """The demo session with the analysis text and the first authoring turn's text at 10 MB."""
    out = []
    author_done = False
    for line in source.read_text(encoding="utf-8").splitlines():
        data = json.loads(line) if line.strip().startswith("{") else None
        if data and data.get("node") == "analyze":
            data["response"]["text"] = "The reference is slow. " + "A" * TEN_MB
        elif data and data.get("node") == "author" and not author_done and data.get("response"):
            data["response"]["text"] = "Writing the kernel. " + "B" * TEN_MB
            author_done = True
        out.append(json.dumps(data) if data else line)
    assert author_done
    target.write_text("\n".join(out) + "\n", encoding="utf-8")


def test_a_ten_megabyte_reply_is_cut_and_not_resent(tmp_path: Path) -> None:
    problem = tmp_path / "mmul"
    shutil.copytree(ROOT / "problems" / "mmul", problem, ignore=shutil.ignore_patterns("output", "archive"))
    session = tmp_path / "huge.jsonl"
    _session_with_huge_replies(problem / "session.jsonl", session)
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(problem), "--provider", "replay", "--from", str(session)]
    result = subprocess.run([*argv, "--no-ui", "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in out, out[-3000:]

    output = problem / "output"
    sizes = {p: p.stat().st_size for p in output.rglob("*") if p.is_file()}
    total = sum(sizes.values())
    biggest = max(sizes, key=sizes.__getitem__)
    assert total < 6 * 1024 * 1024, f"{total:,} bytes written; biggest {biggest} ({sizes[biggest]:,})"
    assert sizes[biggest] < 1024 * 1024, f"{biggest}: {sizes[biggest]:,} bytes"

    analyze = json.loads((output / "llm" / "analyze_000.json").read_text())
    note = " ".join(analyze["notes"])
    assert "10,485,783" in note and "cut to 65,536" in note
    assert len(analyze["response"]["text"]) < DEFAULTS.llm_reply_text_chars + 500
    assert "[cacao: reply cut here" in analyze["response"]["text"]
    master = json.loads((output / "master.json").read_text())
    assert len(master["analysis"]) < DEFAULTS.llm_reply_text_chars + 500
    # The strategize prompt carries the analysis as cut, not the 10 MB.
    strategize = json.loads((output / "llm" / "strategize_000.json").read_text())
    assert sum(len(m["content"]) for m in strategize["messages"]) < 200_000
