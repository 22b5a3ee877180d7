"""Best-of-K authoring (``--samples K``, issue 21): K attempts from one prompt, each
compile-checked and validated, the fastest valid one by a short probe tuned in full; every
sample's calls, tokens and cost recorded. Replayed from a session written here, with the FAKE
GPU tuner (probe times from FAKE_TIME_MS markers) and, through the real command, as a dry run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cacao_tui.llm.demo_session import DemoSession, structured, text, tools
from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.state import IterState
from tests.engine.conftest import ROOT
from tests.engine.scenario import SPEC, kernel_source
from tests.pathenv import child_pythonpath

B = "b1-alpha"


def _with_usage(line: dict, tokens_in: int, tokens_out: int) -> dict:
    line["response"]["usage"] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
    return line


def write_session(problem: Path) -> None:
    """Sample 1 writes a 1.0 ms kernel, sample 2 a 0.5 ms one, sample 3 one that never compiles."""
    lines = [
        text(None, None, "analyze", "A product; tile it."),
        structured(None, None, "strategize", {"strategies": [{"name": "alpha", "title": "Alpha", "description": "a"}]}),
        text(B, 1, "plan", "one kernel"),
    ]
    never_compiles = "// FAKE_COMPILE_ERROR\nint broken = ;\n"
    for node, ms, extra in (("author", 1.0, ""), ("author-s2", 0.5, ""), ("author-s3", 2.0, never_compiles)):
        source = kernel_source(ms, extra + f'#define SAMPLE "{node}"\n')
        calls = [("write_file", {"path": "kernels.cu", "content": source}),
                 ("write_file", {"path": "tuning.yaml", "content": SPEC}), ("check_compilation", {})]  # fmt: skip
        lines.append(_with_usage(tools(B, 1, node, calls), 1000, 300))
        ends = [("end_step", {"summary": f"{node} done"})] * (4 if extra else 1)  # rejected 4 times: it fails
        lines.append(_with_usage(tools(B, 1, node, ends), 1200, 50))
    demo = DemoSession("mmul", problem / "demo", note="test session (tests/engine/test_samples.py)")
    (problem / "session.jsonl").write_text(demo.render(lines), encoding="utf-8")


def test_three_samples_in_a_replay_the_fastest_valid_one_is_tuned(mmul_dir: Path) -> None:
    write_session(mmul_dir)
    argv = [sys.executable, "-m", "tests.engine.harness", str(mmul_dir), "--max-iter", "1", "--strategies", "1",
            "--samples", "3", "--fake-gpu"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          timeout=240)  # fmt: skip
    assert done.returncode == 0 and "FINISHED ok" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    layout = RunLayout(mmul_dir)
    it = layout.branch(B).iteration(1)
    st = read_model(it.state, IterState)
    assert st.author is not None and st.author.ok
    samples = {s.index: s for s in st.author.samples}
    assert [s.index for s in st.author.samples] == [1, 2, 3]
    assert samples[1].ok and samples[2].ok and not samples[3].ok and "end_step rejected" in (samples[3].message or "")
    assert samples[1].valid and samples[2].valid and samples[3].valid is None
    assert samples[1].probe_ms == 1.0 and samples[2].probe_ms == 0.5 and samples[2].chosen and not samples[1].chosen
    assert all(s.llm_calls == 2 and s.input_tokens == 2200 and s.output_tokens == 350 for s in samples.values())
    assert st.author.input_tokens == 6600  # the step's total: every sample's calls
    assert 'SAMPLE "author-s2"' in it.kernel.read_text()  # the chosen sample's files, tuned in full
    assert st.run is not None and st.run.best_ms == 0.5
    for k in (1, 2, 3):
        assert (it.root / "samples" / f"s{k}" / "kernels.cu").is_file()
    assert sorted(p.name for p in it.llm.glob("author*.json")) == [
        "author-s2_000.json", "author-s2_001.json", "author-s3_000.json", "author-s3_001.json",
        "author_000.json", "author_001.json"]  # fmt: skip


def test_samples_through_the_command_in_a_dry_run(mmul_dir: Path, tmp_path: Path) -> None:
    write_session(mmul_dir)
    argv = [sys.executable, "-m", "cacao_tui", "--dir", str(mmul_dir), "--provider", "replay", "--no-ui",
            "--dry-run", "--samples", "3", "--strategies", "1", "--max-iter", "1"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": child_pythonpath()},
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    st = read_model(RunLayout(mmul_dir).branch(B).iteration(1).state, IterState)
    assert st.author is not None and [s.ok for s in st.author.samples] == [True, True, False]
    assert st.author.samples[0].chosen and st.author.samples[0].valid is None  # nothing ran on a GPU
    assert "3 samples" not in done.stderr and "Traceback" not in done.stderr
