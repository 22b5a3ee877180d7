"""scripts/gpu-phase.sh, the device side of a split run, on the CPU: the softmax replay's model
phase here, the GPU phase (FAKE tuner, FAKE nvidia-smi) in a copy of the problem directory at
another path as the device gets it, its packed output/ unpacked back here, and the next model
phase goes on from the GPU's results."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from cacao_tui.store.atomic import read_model
from cacao_tui.store.layout import RunLayout
from cacao_tui.store.phases import read_phase_state
from cacao_tui.store.state import IterState
from tests.engine.conftest import ROOT
from tests.engine.phase_site import quick_fake_tuner
from tests.engine.test_phases_cli import _env

FLAGS = ["--strategies", "2", "--max-iter", "3", "--max-depth", "1"]


def test_the_device_script_runs_the_gpu_phase_and_packs_what_comes_back(tmp_path: Path) -> None:
    local = tmp_path / "here" / "softmax"
    shutil.copytree(ROOT / "problems" / "softmax", local, ignore=shutil.ignore_patterns("output", "archive"))
    model_env = _env(tmp_path, gpu=False)
    argv = [sys.executable, "-m", "cacao_tui", "--dir", "softmax", "--no-ui", *FLAGS]
    first = subprocess.run([*argv, "--provider", "replay", "--phase", "llm"], cwd=local.parent, env=model_env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert first.returncode == 0 and "wait for the GPU" in first.stdout, first.stdout[-2000:] + first.stderr

    device = tmp_path / "device" / "repo" / "problems" / "softmax"  # the carried copy, elsewhere
    shutil.copytree(local, device)
    planted = [device / "output" / "branches" / "x.cubin", device / "output" / "branches" / "report.ncu-rep"]
    for p in planted:
        p.write_bytes(b"\x7fELF" + b"\0" * 1024)
    out = tmp_path / "out"
    env = _env(tmp_path, gpu=True)
    env.update({"OUT": str(out), "PYTHON": sys.executable})
    env["PYTHONPATH"] = f"{quick_fake_tuner.SITE}{os.pathsep}{ROOT}"
    run = subprocess.run([str(ROOT / "scripts" / "gpu-phase.sh"), str(device), "--timeout", "5"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = (out / "summary.txt").read_text()
    assert "exit 0" in summary and "wait for the model; continue with" in summary and "packed" in summary
    with tarfile.open(out / "gpu_output.tgz") as tar:
        names = tar.getnames()
    assert "output/phase.json" in names and not any(n.endswith((".cubin", ".ncu-rep")) for n in names)

    with tarfile.open(out / "gpu_output.tgz") as tar:  # back on the model's machine
        tar.extractall(local, filter="data")
    state = read_phase_state(RunLayout(local))
    assert state is not None and state.phase == "gpu" and state.next_phase == "llm"
    for name in state.waiting:
        st = read_model(RunLayout(local).branch(name).iteration(1).state, IterState)
        assert st.run is not None and st.run.ran and st.run.best_ms is not None
    again = subprocess.run([*argv, "--resume", "--phase", "llm"], cwd=local.parent, env=model_env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr
    assert "propose" in again.stdout or "decid" in again.stdout  # the model went on from the GPU's results
